# The virtual cluster against the one-device reference (issue 3's must-shows):
# Mirrored with N in {1, 2, 3, 4, 8} passes at every step; the per-replica mean as
# denominator fails with gradients N times too large, and says so; every strategy
# and all-reduce algorithm passes; bad cluster options exit 2.
. "$(dirname "$0")/lib.bash"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }

train() { local name=$1; shift; expect_exit "${EXPECT:-0}" "$name" -- timeout 300 "$DTLAB" train --no-progress --json --epochs 1 "$@"; }

for n in 1 2 3 4 8; do
  train mirrored_$n --strategy mirrored --replicas $n --batch-per-replica 8 --steps 12 --check-reference
  check_json mirrored_$n "d['reference_check']['within_bound'] and d['reference_check']['steps_checked'] == 12 and d['reference_check']['per_example_values_identical'] and d['replicas'] == $n"
done
# One replica computes exactly what one device computes.
check_json mirrored_1 "d['reference_check']['max_abs_diff'] == 0 and d['reference_check']['max_ulp'] == 0"

# 1024 virtual replicas on this 2-core machine, checked against one device.
train replicas_1024 --strategy mirrored --replicas 1024 --batch-per-replica 1 --steps 1 --check-reference
check_json replicas_1024 "d['replicas'] == 1024 and d['reference_check']['within_bound'] and d['reference_check']['steps_checked'] == 1"

EXPECT=1 train per_replica_mean --strategy mirrored --replicas 4 --batch-per-replica 8 --steps 3 --check-reference --loss-denominator per-replica
check_json per_replica_mean "not d['reference_check']['within_bound'] and d['reference_check']['steps_failed'] == 3"
expect_contains per_replica_mean out "4 times the reference"
expect_contains per_replica_mean out "too large by a factor of 4"
expect_contains per_replica_mean out "tf.reduce_mean"
EXPECT=1 expect_exit 1 per_replica_mean_text -- timeout 300 "$DTLAB" train --no-progress --epochs 1 --strategy mirrored --replicas 2 --batch-per-replica 8 --steps 2 --check-reference --loss-denominator per-replica
expect_contains per_replica_mean_text out "Reference check: FAIL"

# Short replicas: a global batch of 10 on 4 replicas gives [3, 3, 3, 1] (the legacy rule TF
# applies under AUTO sharding, docs/semantics.md; [3, 3, 2, 2] with --auto-shard off); the default
# denominator (local batch x N) then weighs examples unevenly and fails; global passes.
train uneven_global --strategy mirrored --replicas 4 --global-batch 10 --steps 4 --check-reference --loss-denominator global
check_json uneven_global "d['reference_check']['within_bound']"
EXPECT=1 train uneven_default --strategy mirrored --replicas 4 --global-batch 10 --steps 4 --check-reference --loss-denominator default
check_json uneven_default "not d['reference_check']['within_bound']"

for cfg in "central_storage --replicas 3" "multi_worker_mirrored --replicas 4 --workers 2" "tpu --replicas 4" \
           "multi_worker_mirrored --replicas 6 --workers 3 --all-reduce hierarchical" \
           "mirrored --replicas 5 --all-reduce tree" "mirrored --replicas 5 --all-reduce naive" \
           "mirrored --replicas 5 --all-reduce direct" "mirrored --replicas 4 --convention ddp"; do
  name=$(echo "$cfg" | tr -c 'a-z0-9\n' '_')
  train "$name" --strategy $cfg --batch-per-replica 8 --steps 6 --check-reference
  check_json "$name" "d['reference_check']['within_bound'] and d['simulated_seconds'] > 0"
done

# halving_doubling is the real name of tree: the same bits, and each run prints the name it was given.
train halving_doubling_5 --strategy mirrored --replicas 5 --all-reduce halving_doubling --batch-per-replica 8 --steps 6 --check-reference
check_json halving_doubling_5 "d['all_reduce'] == 'halving_doubling' and d['reference_check']['within_bound']"
check_json mirrored___replicas_5___all_reduce_tree "d['all_reduce'] == 'tree'"
tree_digest=$(python3 -c "import json; print(json.load(open('$WORK/mirrored___replicas_5___all_reduce_tree.out'))['weights_digest'])")
check_json halving_doubling_5 "d['weights_digest'] == '$tree_digest'"

# Bad cluster options.
bad() { local name=$1 text=$2; shift 2; expect_exit 2 "$name" -- timeout 60 "$DTLAB" train --no-progress --steps 1 "$@"; expect_contains "$name" err "$text"; }
bad zero_replicas "--replicas must be at least 1" --strategy mirrored --replicas 0
bad workers_not_dividing "does not divide --replicas" --strategy multi_worker_mirrored --replicas 4 --workers 3
bad unknown_strategy "unknown strategy 'horovod'" --strategy horovod
bad unknown_algorithm "unknown" --strategy mirrored --replicas 2 --all-reduce butterfly
expect_contains unknown_algorithm err "ring, halving_doubling (alias tree), naive, hierarchical, direct"
bad one_device_many "exactly one replica" --strategy one_device --replicas 2
bad workers_without_multi_worker "multi_worker_mirrored" --strategy mirrored --replicas 4 --workers 2
bad unknown_convention "unknown convention" --convention jax
bad unknown_denominator "unknown loss denominator" --loss-denominator mean
bad unknown_topology "unknown" --topology hypercube
bad zero_global_batch "--global-batch must be at least 1" --global-batch 0
bad unwritable_trace "cannot write --trace" --trace /nonexistent-dir/trace.json
bad ps_check_reference "asynchronous" --strategy parameter_server --workers 2 --check-reference
# parameter_server saves at --checkpoint-every like the others (it was refused before).
train ps_checkpoint_every --strategy parameter_server --workers 2 --steps 6 --checkpoint-every 5 --checkpoint-dir "$WORK/ps_ckpt"
check_json ps_checkpoint_every "d['steps'] == 6 and d['last_checkpoint'].endswith('ckpt-6.safetensors')"
bad ps_replicas_not_workers "must equal --workers" --strategy parameter_server --workers 2 --replicas 3
bad ps_zero_servers "--parameter-servers must be at least 1" --strategy parameter_server --workers 2 --parameter-servers 0
finish
