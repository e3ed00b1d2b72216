# The parameter server honours every loss option (sim/engines/loss_code.h): a worker's step
# is one replica on a whole batch (num_replicas_in_sync = 1, as TF's
# ParameterServerStrategy on CPU workers), so on a worker's short final batch the
# global denominator divides by the configured batch and every other rule by the
# batch itself, and the options that only matter with several replicas in sync give
# exactly the numbers of N = 1. A reduction the chosen Keras refuses is refused (exit 2).
. "$(dirname "$0")/lib.bash"
FASHION=/usr/share/datasets/fashion-mnist
[ -d "$FASHION" ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }

# 1000 training examples: 2 workers x 500, batches of 16 leave each worker a short batch of 4.
python3 - "$FASHION" "$WORK/small" <<'PY'
import gzip, os, struct, sys
source, target = sys.argv[1:3]
os.makedirs(target, exist_ok=True)
for prefix, count in (("train", 1000), ("t10k", 200)):
    for kind, item in (("images-idx3-ubyte", 784), ("labels-idx1-ubyte", 1)):
        data = gzip.open(f"{source}/{prefix}-{kind}.gz").read()
        header = 16 if item == 784 else 8
        head = bytearray(data[:header])
        head[4:8] = struct.pack(">I", count)
        with gzip.open(f"{target}/{prefix}-{kind}.gz", "wb") as out:
            out.write(bytes(head) + data[header:header + count * item])
PY

run() {
  local name=$1; shift
  expect_exit 0 "$name" -- timeout 300 "$DTLAB" train --no-progress --json --dataset "$WORK/small" --epochs 1 \
    --strategy parameter_server --workers 2 --batch-per-replica 16 "$@"
}
run global
run default --loss-denominator default
run per_replica --loss-denominator per-replica
run ddp --convention ddp
run sum_over_batch_size --loss-reduction sum_over_batch_size
run sum --loss-reduction sum
run keras2 --keras 2
run unscaled --regularization-scaling unscaled
run split_tf --regularization-split tf
run split_exact --regularization-split exact
run empty_error --loss-denominator default --empty-replica-loss error
run exact_global --math exact
run exact_default --math exact --loss-denominator default

CHECKS=$((CHECKS + 1))
python3 - "$WORK" <<'PY' || fail "the parameter server's loss options do not change the numbers as they should"
import json, sys
work = sys.argv[1]
def numbers(name):
    d = json.load(open(f"{work}/{name}.out"))
    return d["final_test_loss"], d["final_test_accuracy"], d["steps"]
g = numbers("global")
assert g[2] == 64, g  # 2 x 32 updates, the last of each worker on 4 examples
for name in ("sum", "keras2", "unscaled", "split_tf", "split_exact"):
    assert numbers(name) == g, (name, numbers(name), g)
d = numbers("default")
assert d[0] != g[0], "global and default divide a short batch differently"
for name in ("per_replica", "ddp", "sum_over_batch_size", "empty_error"):
    assert numbers(name) == d, (name, numbers(name), d)
assert numbers("exact_global")[0] != numbers("exact_default")[0]
PY

expect_exit 2 keras2_sum_over_batch_size -- "$DTLAB" train --no-progress --dataset "$WORK/small" --epochs 1 \
  --strategy parameter_server --workers 2 --loss-reduction sum_over_batch_size --keras 2
expect_contains keras2_sum_over_batch_size err "Reduction"
expect_exit 2 auto_reduction -- "$DTLAB" train --no-progress --dataset "$WORK/small" --epochs 1 \
  --strategy parameter_server --workers 2 --loss-reduction auto
finish
