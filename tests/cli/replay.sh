#!/usr/bin/env bash
# dtlab replay and dtlab devices (docs/gpu.md). Without a GPU: the emulated backend
# (the CUDA kernels' code run on the CPU) must reproduce the CPU's exact mode bit for
# bit on scenarios that cover every layer, model, strategy, loss convention and
# uneven or empty replicas; fast mode must give the CPU's verdicts; records
# round-trip; a tampered record is caught; bad input gets exit 2; and --backend cuda
# says that no CUDA device is present (exit 2). With a GPU the same replays run on it.
source "$(dirname "$0")/lib.bash"

# The models and strategies the built-in scenarios do not use.
cat >"$WORK/models.toml" <<'TOML'
title = "every model and strategy"
[cluster]
strategy = "central_storage"
replicas = 3
all_reduce = "tree"
[data]
source = "fashion-mnist"
train_examples = 200
test_examples = 100
global_batch = 50
[model]
name = "linear"
[run]
steps = 2
[[variant]]
name = "mnist-cnn-one-device"
set = ["model.name=mnist-cnn", "cluster.strategy=one_device", "cluster.replicas=1", "optimizer.name=rmsprop"]
[[variant]]
name = "seed-multi-worker"
set = ["model.name=seed-cnn", "cluster.strategy=multi_worker_mirrored", "cluster.workers=2", "cluster.replicas=2", "optimizer.name=sgd"]
[[check]]
kind = "value"
value = "steps"
min = 2
expect = "pass"
TOML

has_gpu=$(python3 -c "import json,subprocess; d=json.loads(subprocess.run(['$DTLAB','devices','--json'],capture_output=True).stdout); print(1 if d['devices'] else 0)")
backends=(emulated)
[ "$has_gpu" = 1 ] && backends+=(cuda)

for backend in "${backends[@]}"; do
  # Exact mode: every step bitwise equal to the CPU run of the same configuration.
  for scenario in short-final-batch empty-replicas tf-vs-ddp checkpoint-restore dropout-masks "$WORK/models.toml"; do
    name=exact.$backend.$(basename "$scenario" .toml)
    expect_exit 0 "$name" -- "$DTLAB" replay "$scenario" --backend "$backend" --steps 2 --json
    check_json "$name" "d['passed'] and d['steps_compared'] >= 2 and d['steps_failed'] == 0 and d['math'] == 'exact'"
    check_json "$name" "all(s['reference_gradient'] == s['device_gradient'] and s['reference_weights'] == s['device_weights'] for r in d['runs'] for s in r['steps'])"
    check_json "$name" "d['all_reduce']['wrong'] == 0 and d['all_reduce']['size_bytes'] > 0"
  done
  # Dropout runs on the device too: masks drawn on the host, applied there.
  check_json "exact.$backend.dropout-masks" "len(d['runs']) == 5 and not any(r.get('cpu_only') for r in d['runs'])"
  # The three models, and every run of the file ran on the device.
  check_json "exact.$backend.models" "[r['name'] for r in d['runs']] == ['main', 'mnist-cnn-one-device', 'seed-multi-worker'] and all(len(r['steps']) == 2 for r in d['runs'])"
  # Fast mode: the device is within the bound wherever the CPU is, and the pitfall
  # variant (reduce_mean per replica) fails the check on both.
  expect_exit 0 fast.$backend -- "$DTLAB" replay short-final-batch --backend "$backend" --math fast --steps 2 --json
  check_json fast.$backend "d['passed'] and d['math'] == 'fast'"
  check_json fast.$backend "all(s['within_bound'] for r in d['runs'] if r['name'] != 'per-replica' for s in r['steps'])"
  check_json fast.$backend "not any(s['within_bound'] or s['reference_within_bound'] for r in d['runs'] if r['name'] == 'per-replica' for s in r['steps'])"
done

# A half policy stays on the CPU: the device kernels compute in float32
# (MakeDevicePlan refuses them); nothing is compared, nothing fails.
expect_exit 0 mixed.emulated -- "$DTLAB" replay mixed-precision-overflow --backend emulated --math fast --json
check_json mixed.emulated "d['passed'] and d['steps_compared'] == 0 and all(r['cpu_only'] for r in d['runs'])"
# ... and no all-reduce is measured for it (on a GPU, one of no element was an error).
check_json mixed.emulated "'all_reduce' not in d"
expect_exit 0 mixed.emulated-text -- "$DTLAB" replay mixed-precision-overflow --backend emulated --steps 1
expect_contains mixed.emulated-text out "PASS: no step ran on the device (every run of the scenario stays on the CPU)"
# So does BatchNormalization (no device kernel): the replay says so for every run.
expect_exit 0 batch-norm.emulated -- "$DTLAB" replay batch-norm-replicas --backend emulated --steps 1 --json
check_json batch-norm.emulated "d['passed'] and d['steps_compared'] == 0 and all(r['cpu_only'] for r in d['runs'])"
check_json batch-norm.emulated "all('BatchNormalization runs on the CPU only' in r['cpu_only_reason'] for r in d['runs'])"
expect_exit 2 mixed.train -- "$DTLAB" train --backend emulated --precision mixed_float16 --steps 1
expect_contains mixed.train err "the device kernels compute in float32"

# --steps shorter than a scenario's faults: the faults that would never fire are left
# out, so the restart still finds its checkpoint; dtlab run refuses such a fault and
# says why the restart has no checkpoint.
expect_exit 0 faults.short -- "$DTLAB" replay fault-recovery --backend emulated --steps 3 --json
check_json faults.short "d['passed'] and [r['name'] for r in d['runs']] == ['main', 'restarted', 'uninterrupted']"
expect_exit 2 faults.run -- "$DTLAB" run fault-recovery --set run.steps=5
expect_contains faults.run err "cannot copy the checkpoint of run 'main': it saved none: fault die:replica=2,step=6: step=6 is never reached"

# dtlab train --backend: the emulated device trains to the CPU's bits in exact mode.
for backend in cpu emulated; do
  expect_exit 0 train.$backend -- "$DTLAB" train --backend "$backend" --math exact --replicas 3 --steps 3 --epochs 1 --json
done
check_json train.emulated "d['weights_digest'] == json.load(open('$WORK/train.cpu.out'))['weights_digest'] and d['backend'] == 'emulated'"
# The folded reduction (docs/cluster.md) hands the device waves of replicas, whose
# segments start at a replica other than 0: 40 replicas in waves, with Dropout's
# per-replica streams (keyed by replica id), give the collective's bits on the CPU
# and on the emulated device.
for run in "cpu 1" "emulated 1" "cpu 4096"; do
  set -- $run
  expect_exit 0 "folded.$1.$2" -- "$DTLAB" train --backend "$1" --math exact --replicas 40 --fold-above "$2" \
    --global-batch 70 --steps 2 --epochs 1 --dropout-rng per-replica \
    --model "$DTLAB_SOURCE_DIR/scenarios/models/dropout-cnn.json" --json
done
check_json folded.cpu.1 "d['folded_reduction'] and d['weights_digest'] == json.load(open('$WORK/folded.cpu.4096.out'))['weights_digest']"
check_json folded.emulated.1 "d['folded_reduction'] and d['weights_digest'] == json.load(open('$WORK/folded.cpu.4096.out'))['weights_digest']"
expect_exit 2 train.bad-backend -- "$DTLAB" train --backend gpu --steps 1
expect_contains train.bad-backend err "--backend must be cpu, emulated or cuda"

# The same digests on one thread as on all cores (and as in the runs above).
expect_exit 0 one-thread -- "$DTLAB" replay short-final-batch --backend emulated --steps 2 --threads 1 --json
check_json one-thread "[s['device_weights'] for r in d['runs'] for s in r['steps']] == [s['device_weights'] for r in json.load(open('$WORK/exact.emulated.short-final-batch.out'))['runs'] for s in r['steps']]"

# The emulated device's lanes are what streams are on a GPU: 3 lanes for 4 replicas
# (lane 0 runs two of them, reusing its buffers) still give the CPU's bits.
expect_exit 0 lanes -- "$DTLAB" replay short-final-batch --backend emulated --streams 3 --steps 2 --json
check_json lanes "d['passed'] and d['steps_failed'] == 0 and d['device'].endswith('3 lanes')"

# The human table: per-step verdicts and the nccl-tests columns.
expect_exit 0 table -- "$DTLAB" replay empty-replicas --backend emulated --steps 1
expect_contains table out "bitwise equal"
expect_contains table out "size(B)  replicas   method     time(us)  algbw(GB/s)  busbw(GB/s)  #wrong"
expect_contains table out "PASS: 3 steps compared, 0 differ"

# A scenario of checks alone replays its all-reduce only.
expect_exit 0 checks-only -- "$DTLAB" replay ring-all-reduce --backend emulated --json
check_json checks-only "d['runs'] == [] and d['all_reduce']['wrong'] == 0"

# Parameter servers stay on the CPU and say so.
expect_exit 0 ps -- "$DTLAB" replay parameter-server-staleness --backend emulated --steps 2
expect_contains ps out "parameter servers run on the CPU only"

# A record of the CPU run, checked later against the device; a tampered digest is a
# failed verdict (exit 1) naming the step; other --steps, a damaged file: exit 2.
expect_exit 0 record -- "$DTLAB" replay short-final-batch --backend cpu --steps 2 --record "$WORK/record.json"
expect_contains record out "PASS: 6 steps compared"
check_json_file() { python3 -c "import json,sys; d=json.load(open('$1')); sys.exit(0 if ($2) else 1)" || fail "$1: expected $2"; CHECKS=$((CHECKS + 1)); }
check_json_file "$WORK/record.json" "d['format'] == 'dtlab-replay-record' and [len(r['steps']) for r in d['runs']] == [2, 2, 2] and all(len(s['variable_gradients']) == 8 for r in d['runs'] for s in r['steps'])"
expect_exit 0 against -- "$DTLAB" replay short-final-batch --backend emulated --steps 2 --against "$WORK/record.json" --json
check_json against "d['passed'] and d['steps_compared'] == 6 and d['reference'].startswith('the record')"
python3 - "$WORK/record.json" "$WORK/tampered.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
step = d['runs'][1]['steps'][1]
step['weights'] = '%016x' % (int(step['weights'], 16) ^ 1)
step = d['runs'][0]['steps'][0]  # a gradient that differs in conv2d_1/kernel (the third variable)
step['gradient'] = '%016x' % (int(step['gradient'], 16) ^ 1)
step['variable_gradients'][2] = '%016x' % (int(step['variable_gradients'][2], 16) ^ 1)
json.dump(d, open(sys.argv[2], 'w'))
PY
expect_exit 1 tampered -- "$DTLAB" replay short-final-batch --backend emulated --steps 2 --against "$WORK/tampered.json"
expect_contains tampered out "default              2"
expect_contains tampered out "DIFFERS: weights"
expect_contains tampered out "DIFFERS: gradient (conv2d_1/kernel)"
expect_contains tampered out "step 1 differs from the reference (first in the gradient of conv2d_1/kernel)"
expect_contains tampered out "FAIL: 6 steps compared, 2 differ"
expect_exit 2 other-steps -- "$DTLAB" replay short-final-batch --backend emulated --steps 3 --against "$WORK/record.json"
expect_contains other-steps err "the record was made with --steps 2, this replay has 3"
echo '{"format": "dtlab-replay-record", "version": 1, "scenario": "short-final-batch", "max_steps": 2, "runs": 7}' >"$WORK/damaged.json"
expect_exit 2 damaged -- "$DTLAB" replay short-final-batch --backend emulated --steps 2 --against "$WORK/damaged.json"
expect_contains damaged err "damaged record"
expect_exit 2 other-scenario -- "$DTLAB" replay empty-replicas --backend emulated --steps 2 --against "$WORK/record.json"
expect_contains other-scenario err "the record is of scenario 'short-final-batch', not 'empty-replicas'"
expect_exit 2 other-set -- "$DTLAB" replay short-final-batch --backend emulated --steps 2 --against "$WORK/record.json" --set cluster.replicas=2
expect_contains other-set err "the record was made with other --set values"
# --set changes the scenario as dtlab run's does: one replica.
expect_exit 0 one-replica -- "$DTLAB" replay empty-replicas --backend emulated --steps 1 --set cluster.replicas=1 --json
check_json one-replica "d['passed'] and d['all_reduce']['replicas'] == 1"
expect_exit 2 no-record -- "$DTLAB" replay short-final-batch --backend emulated --against "$WORK/missing.json"
expect_exit 2 record-unwritable -- "$DTLAB" replay short-final-batch --backend cpu --steps 1 --record "$WORK/no/such/dir/r.json"
[ ! -e "$WORK/no/such/dir/r.json.tmp" ] || fail "a half-written record was left behind"

# Bad options.
expect_exit 2 bad-backend -- "$DTLAB" replay short-final-batch --backend tpu
expect_contains bad-backend err "--backend must be cpu, emulated or cuda"
expect_exit 2 bad-devices -- "$DTLAB" replay short-final-batch --devices 0,x
expect_contains bad-devices err "--devices must list GPU indices"
expect_exit 2 bad-math -- "$DTLAB" replay short-final-batch --backend emulated --math fuzzy
expect_exit 2 bad-steps -- "$DTLAB" replay short-final-batch --backend emulated --steps 0
expect_exit 2 emulated-devices -- "$DTLAB" replay short-final-batch --backend emulated --devices 0
expect_contains emulated-devices err "--devices chooses GPUs: it goes with --backend cuda"
expect_exit 2 cpu-fast -- "$DTLAB" replay short-final-batch --backend cpu --math fast
expect_exit 2 fast-record -- "$DTLAB" replay short-final-batch --backend emulated --math fast --record "$WORK/f.json"
expect_exit 2 no-scenario -- "$DTLAB" replay
expect_exit 0 help -- "$DTLAB" replay --help
expect_contains help out "--backend"

# dtlab devices always answers. Where nvcc is installed, CMake must have found the
# toolkit (so CI compiles the CUDA backend); a build may still switch it off.
expect_exit 0 devices -- "$DTLAB" devices --json
check_json devices "isinstance(d['devices'], list) and len(d['peer_access']) == len(d['devices'])"
check_json devices "d['built_with_cuda'] == ('${DTLAB_WITH_CUDA:-0}' == '1')"
if [ "${DTLAB_WITH_CUDA:-0}" = 1 ]; then
  check_json devices "d['cuda_runtime'] != '' and d['nccl'] != ''"
fi
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  [ "${DTLAB_CUDA_FOUND:-0}" = 1 ] || fail "nvcc is installed but CMake did not find the CUDA toolkit with NCCL"
fi
expect_exit 0 devices-text -- "$DTLAB" devices
if [ "$has_gpu" = 0 ]; then
  expect_contains devices-text out "no CUDA device"
  # Without a GPU, --backend cuda is a clear error, exit 2, before any training.
  expect_exit 2 no-gpu -- "$DTLAB" replay short-final-batch --backend cuda
  expect_contains no-gpu err "no CUDA device"
  expect_exit 2 no-gpu-default -- "$DTLAB" replay flagship
  expect_contains no-gpu-default err "no CUDA device"
  expect_exit 2 no-gpu-train -- "$DTLAB" train --backend cuda --steps 1
  expect_contains no-gpu-train err "no CUDA device"
else
  expect_exit 2 no-such-gpu -- "$DTLAB" replay short-final-batch --backend cuda --devices 99
  expect_contains no-such-gpu err "there is no CUDA device 99"
fi
finish
