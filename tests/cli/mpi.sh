#!/usr/bin/env bash
# Multi-worker runs on MPI (docs/mpi.md): mpirun -np W (2, 3, 4) dtlab train
# --strategy multi_worker_mirrored --replicas-per-worker R equals the single-process
# simulated run of the same W x R replicas bit for bit (fast and exact mode, every
# all-reduce algorithm and sharding policy), and both pass the one-device reference
# check; exact mode also equals one device. Then: the ranks of one machine sharing
# its memory (every rank refused where one cannot fit), chief checkpoints (workertemp_N
# deleted), resuming, --backup-dir, a stalled rank (collective timeout, exit 3), a
# peer that never starts (the MPI_Init watchdog), the emulated device backend on
# every rank, and
# clear errors for a bad or inconsistent TF_CONFIG, a missing chief, --workers that
# do not match the world, and ranks started with different arguments.
source "$(dirname "$0")/lib.bash"
[ "${DTLAB_WITH_MPI:-0}" = 1 ] && command -v mpirun >/dev/null || { echo "dtlab built without MPI: skipped"; exit 77; }
# A 20-image data set; a global batch of 7 leaves short and empty replica batches.
DATA="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"
COMMON=(--dataset "$DATA" --epochs 2 --global-batch 7 --no-progress)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
mpi() { local np=$1; shift; "${MPIRUN[@]}" -np "$np" "$DTLAB" train --strategy multi_worker_mirrored "$@"; }
sim() { "$DTLAB" train --strategy multi_worker_mirrored "$@"; }
digest() { python3 -c "import json; print(json.load(open('$WORK/$1.out'))['weights_digest'])" 2>/dev/null || echo "no-digest-$1"; }
expect_same_digest() {
  CHECKS=$((CHECKS + 1))
  local a b; a=$(digest "$1"); b=$(digest "$2")
  [ "$a" = "$b" ] || fail "$1 ($a) and $2 ($b) end with different weights"
}

expect_exit 0 one_device_exact -- "$DTLAB" train "${COMMON[@]}" --math exact --json

for w in 2 3 4; do
  r=$(( w == 4 ? 1 : 2 ))
  n=$((w * r))
  for math in fast exact; do
    name="w${w}_r${r}_$math"
    expect_exit 0 "mpi_$name" -- mpi $w --replicas-per-worker $r --math $math --check-reference --json "${COMMON[@]}"
    expect_exit 0 "sim_$name" -- sim --workers $w --replicas $n --all-reduce hierarchical --math $math \
      --check-reference --json "${COMMON[@]}"
    check_json "mpi_$name" "d['reference_check']['within_bound'] and d['reference_check']['steps_checked'] == 6 and d['workers'] == $w and d['replicas'] == $n and d['all_reduce'] == 'hierarchical'"
    expect_same_digest "mpi_$name" "sim_$name"
  done
  expect_same_digest "mpi_w${w}_r${r}_exact" one_device_exact
  check_json "mpi_w${w}_r${r}_exact" "d['reference_check']['bitwise_equal']"
done

# Between ranks, exact mode's main round is a reduce-scatter of the window sums, each
# rank deciding its slice, then an all-gather of the floats (docs/exact.md, "Between
# processes"): fewer bytes than the single-process run's all-reduce of the same
# replicas (the same bits, above; 0.86 of them here, where the block scales and each
# rank's local sum are the same), and the dry run prices what the run sends.
check_json mpi_w2_r2_exact "d['collective_bytes'] < 0.9 * json.load(open('$WORK/sim_w2_r2_exact.out'))['collective_bytes']"
expect_exit 0 mpi_w2_r2_exact_dry -- mpi 2 --replicas-per-worker 2 --math exact --dry-run --json "${COMMON[@]}"
check_json mpi_w2_r2_exact_dry "abs(d['step_collective_bytes'] * 6 / json.load(open('$WORK/mpi_w2_r2_exact.out'))['collective_bytes'] - 1) < 0.01"

# Synchronized BatchNormalization: its statistics cross the ranks through MPI
# (every rank's passes stop for them); 2 ranks x 2 replicas end with one device's
# bits, and Keras's default (per-replica statistics) with one process's 4 replicas'.
MODELS="$DTLAB_SOURCE_DIR/scenarios/models"
for model in batch-norm-cnn batch-norm-cnn-unsynchronized; do
  expect_exit 0 "mpi_$model" -- mpi 2 --replicas-per-worker 2 --math exact --json --model "$MODELS/$model.json" \
    "${COMMON[@]}"
  expect_exit 0 "sim_$model" -- "$DTLAB" train --replicas 4 --math exact --json --model "$MODELS/$model.json" \
    "${COMMON[@]}"
  expect_same_digest "mpi_$model" "sim_$model"
done
expect_exit 0 one_device_bn -- "$DTLAB" train --math exact --json --model "$MODELS/batch-norm-cnn.json" "${COMMON[@]}"
expect_same_digest mpi_batch-norm-cnn one_device_bn
# Unsynchronized, a rank's 17 replicas compute in waves (16 slots on 2 cores) and keep
# their encoded gradients and their own statistics: the bits of one process's 34
# replicas all at once (the words' all-reduce). The model normalizes a Conv2D's
# output, so a replica of one example still has statistics over its positions (a
# dense layer's would normalize one example to its offset).
WAVES=(--dataset "$DATA" --epochs 2 --global-batch 20 --no-progress --math exact --json
  --model "$DTLAB_SOURCE_DIR/tests/models/batch_normalization.json")
expect_exit 0 mpi_bn_waves -- mpi 2 --replicas-per-worker 17 "${WAVES[@]}"
expect_exit 0 sim_bn_words -- "$DTLAB" train --replicas 34 --exact-all-reduce words "${WAVES[@]}"
expect_same_digest mpi_bn_waves sim_bn_words

# Ranks that hold more replicas than a wave (16 slots on 2 cores): exact mode's
# replicas compute in waves and keep only their encoded gradients, as in one process
# (docs/cluster.md, "Compact gradients in waves"). One device's bits; the estimate
# prices a replica at its encoding, not its words, and holds the rank's measured peak
# within 25%.
expect_exit 0 mpi_waves -- mpi 2 --replicas-per-worker 40 --math exact --check-reference --json "${COMMON[@]}"
expect_same_digest mpi_waves one_device_exact
check_json mpi_waves "d['reference_check']['bitwise_equal'] and 0.75 <= d['estimated_peak_bytes'] / d['peak_resident_bytes'] <= 1.25"
for k in compact words; do
  expect_exit 0 "mpi_waves_dry_$k" -- mpi 2 --replicas-per-worker 40 --math exact --exact-all-reduce $k --dry-run \
    --json "${COMMON[@]}"
done
check_json mpi_waves_dry_compact "d['per_replica_bytes'] < 0.3 * json.load(open('$WORK/mpi_waves_dry_words.out'))['per_replica_bytes']"

# The ranks of one machine share its memory: each counts MemAvailable at its share,
# so 2 ranks that would each fit alone (0.9 of it) but not together are refused
# before training, every rank with exit 2; half the most a rank fits, which the
# refusal names, fits. (Dry runs: a real run of these is the same check, then
# allocates. The margins leave room for the other tests' memory, which moves
# MemAvailable meanwhile.)
R=$(python3 -c "
import json
available = [int(l.split()[1]) * 1024 for l in open('/proc/meminfo') if l.startswith('MemAvailable:')][0]
print(int(0.9 * available / json.load(open('$WORK/mpi_waves_dry_words.out'))['per_replica_bytes']))")
SHARED=(--math exact --exact-all-reduce words --dry-run --json "${COMMON[@]}")
expect_exit 2 mpi_machine_shared -- mpi 2 --replicas-per-worker "$R" "${SHARED[@]}"
expect_contains mpi_machine_shared err "for the 2 ranks on this machine, this rank's share"
expect_contains mpi_machine_shared err "use fewer --replicas-per-worker or fewer ranks a machine"
check_json mpi_machine_shared "not d['fits'] and d['ranks_on_machine'] == 2 and 0 < d['largest_replicas'] < $R"
M=$(python3 -c "import json; print(json.load(open('$WORK/mpi_machine_shared.out'))['largest_replicas'] // 2)" || echo 1)
expect_exit 0 mpi_machine_half -- mpi 2 --replicas-per-worker "$M" "${SHARED[@]}"
check_json mpi_machine_half "d['fits']"
# Where one rank cannot fit (here an address-space limit on rank 1 alone: the ranks'
# arguments must be the same), every rank refuses: rank 0, which fits its 5 GiB,
# names rank 1.
if python3 -c "import sys; sys.exit(0 if [int(l.split()[1]) for l in open('/proc/meminfo') if l.startswith('MemAvailable:')][0] > 12 * 2**20 else 1)"; then
  R=$(python3 -c "import json; print(int(5 * 2**30 / json.load(open('$WORK/mpi_waves_dry_words.out'))['per_replica_bytes']))")
  ONE=(train --strategy multi_worker_mirrored --replicas-per-worker "$R" "${SHARED[@]}")
  expect_exit 2 mpi_one_rank_refuses -- "${MPIRUN[@]}" -np 1 "$DTLAB" "${ONE[@]}" : \
    -np 1 bash -c 'ulimit -v 4194304; exec "$0" "$@"' "$DTLAB" "${ONE[@]}"
  expect_contains mpi_one_rank_refuses err "the address-space limit (ulimit -v, RLIMIT_AS)"
  expect_contains mpi_one_rank_refuses err "rank 1 cannot fit its replicas in memory"
else
  echo "mpi_one_rank_refuses: skipped (less than 12 GiB available)"
fi

# Every algorithm over MPI, on 3 ranks of 2 replicas, fast mode (where order shows).
for alg in ring tree naive direct; do
  expect_exit 0 "mpi_$alg" -- mpi 3 --replicas-per-worker 2 --all-reduce $alg --json "${COMMON[@]}"
  expect_exit 0 "sim_$alg" -- sim --workers 3 --replicas 6 --all-reduce $alg --json "${COMMON[@]}"
  expect_same_digest "mpi_$alg" "sim_$alg"
done
# Every sharding policy and the legacy rebatch across 2 workers. FILE cannot shard
# an in-memory data set (TensorFlow's auto-shard error), on MPI as in one process.
expect_exit 2 mpi_shard_file -- mpi 2 --auto-shard file "${COMMON[@]}"
expect_contains mpi_shard_file err "auto_shard_policy FILE cannot shard range(20) across 2 workers"
for shard in off auto data hint; do
  expect_exit 0 "mpi_shard_$shard" -- mpi 2 --replicas-per-worker 2 --auto-shard $shard --rebatch legacy --json "${COMMON[@]}"
  expect_exit 0 "sim_shard_$shard" -- sim --workers 2 --replicas 4 --all-reduce hierarchical --auto-shard $shard \
    --rebatch legacy --json "${COMMON[@]}"
  expect_same_digest "mpi_shard_$shard" "sim_shard_$shard"
done

# Checkpoints: the chief writes DIR, the others write workertemp_N and delete it.
# Stopping after 4 steps and resuming ends where an uninterrupted run ends.
CK="$WORK/run/ckpt"
expect_exit 0 ckpt_first -- mpi 3 "${COMMON[@]}" --math exact --checkpoint-dir "$CK" --checkpoint-every 2 --steps 4
CHECKS=$((CHECKS + 1))
[ -f "$CK/ckpt-4.safetensors" ] && [ ! -e "$WORK/run/workertemp_1" ] && [ ! -e "$WORK/run/workertemp_2" ] ||
  fail "checkpoints: expected $CK/ckpt-4.safetensors and no workertemp_N: $(ls "$WORK/run" "$CK" | tr '\n' ' ')"
expect_exit 0 ckpt_resume -- mpi 3 "${COMMON[@]}" --math exact --checkpoint-dir "$CK" --checkpoint-every 2 --json
check_json ckpt_resume "d['resumed_from_step'] == 4 and d['steps'] == 6"
expect_same_digest ckpt_resume one_device_exact
expect_contains ckpt_first out "Saved checkpoint $CK/ckpt-4.safetensors"

# BackupAndRestore: a rank dies at step 5; the backup (every 2 steps) resumes the
# rerun at step 4, and is deleted when training ends.
BK="$WORK/backup"
expect_exit 3 backup_killed -- mpi 2 --replicas-per-worker 2 "${COMMON[@]}" --backup-dir "$BK" --backup-every 2 \
  --inject-fault die:replica=3,step=5
expect_contains backup_killed err "rank 1 (worker 1) died: killed by signal 9"
CHECKS=$((CHECKS + 1))
[ -f "$BK/chief/ckpt-4.safetensors" ] && [ ! -e "$BK/workertemp_1" ] || fail "backup: expected $BK/chief/ckpt-4.safetensors only"
expect_exit 0 backup_resume -- mpi 2 --replicas-per-worker 2 "${COMMON[@]}" --backup-dir "$BK" --backup-every 2 --json
check_json backup_resume "d['resumed_from_step'] == 4"
expect_same_digest backup_resume mpi_w2_r2_fast
CHECKS=$((CHECKS + 1))
[ ! -e "$BK/chief" ] || fail "the backup $BK/chief was not deleted at the end of training"

# A rank that stalls (a 30 s straggler) is found by the others' 2 s timeout.
start=$(date +%s%N)
expect_exit 3 stalled -- mpi 3 "${COMMON[@]}" --collective-timeout 2 --inject-fault straggler:replica=2,step=3,seconds=30
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
expect_contains stalled err "timed out after 2 s waiting for rank 2"
expect_contains stalled err "at step 3"
expect_contains stalled err "rank 2 did not answer a probe within 1 s: it stopped responding"
CHECKS=$((CHECKS + 1))
[ "$elapsed" -lt 20000 ] || fail "stalled: took $elapsed ms to stop (timeout 2 s)"

# A peer that never starts (here a rank that is not dtlab and never joins MPI):
# MPI_Init would wait for it forever; dtlab's watchdog stops after the timeout.
printf '#!/bin/sh\nexec sleep 60\n' >"$WORK/never_starts.sh" && chmod +x "$WORK/never_starts.sh"
start=$(date +%s%N)
expect_exit 3 never_starts -- "${MPIRUN[@]}" -np 2 "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}" \
  --collective-timeout 2 : -np 1 "$WORK/never_starts.sh"
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
expect_contains never_starts err "MPI_Init did not complete within 2 s: a rank of this job did not start or cannot be reached"
CHECKS=$((CHECKS + 1))
[ "$elapsed" -lt 20000 ] || fail "never_starts: took $elapsed ms to stop (timeout 2 s)"

# Bad or inconsistent set-ups: exit 2 with what to change.
W3='{"cluster": {"worker": ["h0:1", "h1:1", "h2:1"]}, "task": {"type": "worker", "index": 0}}'
expect_exit 2 tf_size -- env TF_CONFIG="$W3" "${MPIRUN[@]}" -x TF_CONFIG -np 2 "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}"
expect_contains tf_size err "3 workers"
W2='{"cluster": {"worker": ["h0:1", "h1:1"]}, "task": {"type": "worker", "index": 0}}'
expect_exit 2 tf_rank -- env TF_CONFIG="$W2" "${MPIRUN[@]}" -x TF_CONFIG -np 2 "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}"
expect_contains tf_rank err "rank 1"
expect_exit 2 tf_malformed -- env TF_CONFIG='{"cluster": ' "${MPIRUN[@]}" -x TF_CONFIG -np 2 "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}"
expect_contains tf_malformed err "TF_CONFIG"
NO_TRAINER='{"cluster": {"ps": ["h0:1"], "evaluator": ["h1:1"]}, "task": {"type": "ps", "index": 0}}'
expect_exit 2 tf_no_chief -- env TF_CONFIG="$NO_TRAINER" "${MPIRUN[@]}" -x TF_CONFIG -np 2 "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}"
expect_contains tf_no_chief err "no chief or worker task"
# Per-rank TF_CONFIG (mpirun's MPMD form) that matches the world: trains.
T0='{"cluster": {"chief": ["h0:1"], "worker": ["h1:1"]}, "task": {"type": "chief", "index": 0}}'
T1='{"cluster": {"chief": ["h0:1"], "worker": ["h1:1"]}, "task": {"type": "worker", "index": 0}}'
expect_exit 0 tf_ok -- "${MPIRUN[@]}" -np 1 -x TF_CONFIG="$T0" "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}" --json : \
  -np 1 -x TF_CONFIG="$T1" "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}" --json
expect_exit 0 tf_ok_sim -- sim --workers 2 --replicas 2 --all-reduce hierarchical "${COMMON[@]}" --json
expect_same_digest tf_ok tf_ok_sim
expect_exit 2 workers_mismatch -- mpi 2 --workers 3 "${COMMON[@]}"
expect_contains workers_mismatch err "--workers 3 but mpirun started 2 ranks"
expect_exit 2 other_args -- "${MPIRUN[@]}" -np 1 "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}" : \
  -np 1 "$DTLAB" train --strategy multi_worker_mirrored "${COMMON[@]}" --seed 2
expect_contains other_args err "rank 1 was started with other arguments than rank 0"
expect_exit 2 not_multi_worker -- "${MPIRUN[@]}" -np 2 "$DTLAB" train --strategy mirrored "${COMMON[@]}"
expect_contains not_multi_worker err "with --strategy multi_worker_mirrored (or parameter_server); got --strategy mirrored"
expect_exit 2 drop_under_mpi -- mpi 2 "${COMMON[@]}" --inject-fault drop:replica=0,step=1
expect_contains drop_under_mpi err "under MPI the messages are real"
expect_exit 2 rpw_without_mpi -- "$DTLAB" train --replicas-per-worker 2 "${COMMON[@]}"
expect_contains rpw_without_mpi err "--replicas-per-worker is for runs under mpirun"
# A device backend under mpirun: each rank's replicas compute with the device kernels
# (emulated here; cuda on a GPU machine) and the job still ends with the CPU's bits.
expect_exit 0 backend.mpi -- mpi 2 --replicas-per-worker 2 --math exact --backend emulated "${COMMON[@]}" --json
expect_exit 0 backend.sim -- sim --workers 2 --replicas 4 --math exact "${COMMON[@]}" --json
expect_same_digest backend.mpi backend.sim
finish
