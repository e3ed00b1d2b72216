#!/usr/bin/env bash
# Injected faults (docs/reliability.md): each kind stops dtlab train with exit 3 and
# names the replica, the step and the layer, variable or message involved, in fast
# and exact mode; bad fault specs exit 2; after a replica dies the same command,
# rerun without the fault, resumes from the last checkpoint and ends with the
# checkpoint of a run that never failed, byte for byte.
source "$(dirname "$0")/lib.bash"
# A 20-image data set (tests/bad_inputs/files/valid) keeps it fast under the sanitizers.
DATA="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"
train() { "$DTLAB" train --replicas 4 --batch-per-replica 4 --dataset "$DATA" --no-progress "$@"; }

for math in fast exact; do
  expect_exit 3 "throw_$math" -- train --steps 3 --math $math --inject-fault throw:replica=1,step=2,layer=dense
  expect_contains "throw_$math" err "step 2: replica 1 raised an exception in layer 'dense'"
  expect_exit 3 "die_$math" -- train --steps 3 --math $math --inject-fault die:replica=2,step=2 --collective-timeout 45
  expect_contains "die_$math" err "all_reduce/ring at step 2: timed out after 45 s waiting for replica 2, which stopped responding"
  expect_exit 3 "drop_$math" -- train --steps 3 --math $math --all-reduce tree --inject-fault drop:replica=0,step=2
  expect_contains "drop_$math" err "all_reduce/tree at step 2: the message replica 0 -> replica"
  expect_contains "drop_$math" err "was dropped and never arrived"
  expect_exit 3 "corrupt_$math" -- train --steps 3 --math $math --inject-fault corrupt:replica=3,step=2,to=0
  expect_contains "corrupt_$math" err "the message replica 3 -> replica 0 of phase"
  expect_contains "corrupt_$math" err "arrived corrupted (CRC-32"
  expect_exit 3 "nan_$math" -- train --steps 3 --math $math --inject-fault nan:replica=1,step=2,variable=dense/kernel
  expect_contains "nan_$math" err "step 2: replica 1 of 4 computed a non-finite gradient for dense/kernel (NaN)"
done
# Exact mode computes 20 replicas in waves (Cluster::FoldWave: 16 on up to 4 threads)
# and encodes each as its wave ends: a fault hits the replica it names in any wave.
for fault in throw:replica=18,step=2,layer=dense nan:replica=17,step=2,variable=dense/kernel; do
  expect_exit 3 "waves_${fault%%:*}" -- "$DTLAB" train --dataset "$DATA" --no-progress --replicas 20 \
    --batch-per-replica 1 --steps 3 --math exact --inject-fault "$fault"
done
expect_contains waves_throw err "step 2: replica 18 raised an exception in layer 'dense'"
expect_contains waves_nan err "step 2: replica 17 of 20 computed a non-finite gradient for dense/kernel (NaN)"
# A NaN in the first wave and an exception in the second: the exception is reported,
# as when all replicas compute at once (the words all-reduce: no waves), so that the
# report does not depend on the wave size (on the threads).
for all_reduce in compact words; do
  expect_exit 3 "waves_both_$all_reduce" -- "$DTLAB" train --dataset "$DATA" --no-progress --replicas 20 \
    --batch-per-replica 1 --steps 3 --math exact --exact-all-reduce $all_reduce \
    --inject-fault nan:replica=3,step=2 --inject-fault throw:replica=18,step=2
  expect_contains "waves_both_$all_reduce" err "step 2: replica 18 raised an exception in layer 'conv2d'"
done
expect_exit 3 straggler_slow -- train --steps 3 --inject-fault straggler:replica=0,step=2,seconds=120
expect_contains straggler_slow err "timed out after 60 s waiting for replica 0, a straggler whose compute took 120 s longer"
expect_exit 0 straggler_fast -- train --steps 3 --inject-fault straggler:replica=0,step=2,seconds=5 --json
check_json straggler_fast "d['simulated_seconds'] > 5 and d['steps'] == 3"
expect_exit 3 central_die -- train --strategy central_storage --steps 3 --inject-fault die:replica=1,step=3
expect_contains central_die err "reduce at step 3: timed out after 60 s waiting for replica 1"

expect_exit 2 bad_kind -- train --steps 1 --inject-fault explode:replica=1,step=1
expect_contains bad_kind err "unknown fault kind 'explode'"
expect_exit 2 bad_replica -- train --steps 1 --inject-fault die:replica=4,step=1
expect_contains bad_replica err "replica=4 names no replica; there are 4 replicas, so replica must be from 0 to 3"
expect_exit 2 bad_layer -- train --steps 1 --inject-fault throw:replica=0,step=1,layer=lstm
expect_contains bad_layer err "the model has no layer 'lstm' (layers: conv2d,"
expect_exit 2 bad_variable -- train --steps 1 --inject-fault nan:replica=0,step=1,variable=w
expect_contains bad_variable err "the model has no variable 'w'"
expect_exit 2 bad_timeout -- train --steps 1 --collective-timeout 0
expect_contains bad_timeout err "--collective-timeout must be positive"
expect_exit 2 ps_fault -- "$DTLAB" train --strategy parameter_server --workers 2 --dataset "$DATA" --steps 1 --inject-fault die:replica=1,step=1
expect_contains ps_fault err "fault injection applies to synchronous strategies"

# Recovery: replica 2 dies at step 7 of 10; checkpoints every 3 steps; the rerun resumes at step 6.
expect_exit 3 recover_fail -- train --steps 10 --checkpoint-every 3 --checkpoint-dir "$WORK/a" --inject-fault die:replica=2,step=7
expect_exit 0 recover_rerun -- train --steps 10 --checkpoint-every 3 --checkpoint-dir "$WORK/a"
expect_contains recover_rerun out "Resuming from the checkpoint at step 6"
expect_exit 0 uninterrupted -- train --steps 10 --checkpoint-every 3 --checkpoint-dir "$WORK/b"
expect_same_file "$WORK/a/ckpt-10.safetensors" "$WORK/b/ckpt-10.safetensors"
finish
