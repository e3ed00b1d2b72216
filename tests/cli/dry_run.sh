# Knowing the cost before spending it (issue 22 item 3; docs/reliability.md, "Memory"):
# --dry-run prints the estimated peak memory and the cost model's simulated time and
# trains nothing; its time is the real run's, priced from the schedules alone; its
# peak is within 25% of the peak RSS a real run measures; a run that cannot fit the
# machine or --max-memory exits 2 at once, naming the estimate and the most replicas
# that fit.
. "$(dirname "$0")/lib.bash"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }

# The simulated time of --dry-run is the run's, for each way a step communicates.
# SLACK (default 0): how much more the run may take, as a fraction of the dry run's.
same_time() {  # same_time NAME ARGS...: the dry run's simulated seconds equal the run's
  local name=$1
  shift
  expect_exit 0 "$name.dry" -- "$DTLAB" train --no-progress --json --dry-run "$@"
  expect_exit 0 "$name.run" -- "$DTLAB" train --no-progress --json "$@"
  CHECKS=$((CHECKS + 1))
  python3 - "$WORK/$name.dry.out" "$WORK/$name.run.out" "${SLACK:-0}" <<'PY' || fail "$name: the dry run's simulated time is not the run's"
import json, sys
dry, run = (json.load(open(f)) for f in sys.argv[1:3])
slack = float(sys.argv[3])
d, r = dry["simulated_seconds"], run["simulated_seconds"]
print(d, r)
ok = dry["dry_run"] and dry["steps"] == run["steps"] and -1e-9 * r <= r - d <= slack * d + 1e-9 * r
sys.exit(0 if ok else 1)
PY
}
same_time mirrored --replicas 8 --steps 5
same_time exact_words --replicas 3 --steps 4 --math exact --exact-all-reduce words --all-reduce halving_doubling
# The compact all-reduce (exact mode's default): the dry run prices the two rounds
# every step sends; the few values a window leaves undecided send refinement rounds,
# priced as a step sends them, so the run may take a little longer, never less.
SLACK=0.05 same_time exact --replicas 3 --steps 4 --math exact --all-reduce halving_doubling
same_time central --strategy central_storage --replicas 4 --steps 3
same_time workers --strategy multi_worker_mirrored --workers 2 --replicas 4 --all-reduce hierarchical --steps 3 \
  --topology torus2d
# A folded run (docs/cluster.md, "Folded reduction") sends no message; its collectives
# are priced from the schedule the run names, as the dry run prices them, and that
# record (the ring's 2n(n-1) messages of 24 bytes, twice while it is built) is all
# the memory its messages take.
same_time folded --replicas 300 --batch-per-replica 1 --steps 2
check_json folded.run "d['folded_reduction'] and d['collective_bytes'] > 0"
check_json folded.dry "d['folded_reduction'] and d['message_log_bytes'] == 2 * (2 * 300 * 299) * 24"
# central_storage folds as well: the waves' one sum is the host's, and the replicas
# read its variables (no broadcast). The bits of the reduce and the broadcast, priced
# the same from their schedules.
for math in exact fast; do
  same_time "central_folded_$math" --strategy central_storage --replicas 12 --fold-above 4 --global-batch 20 --steps 3 \
    --math $math
  same_time "central_$math" --strategy central_storage --replicas 12 --global-batch 20 --steps 3 --math $math
  check_json "central_folded_$math.run" "d['folded_reduction'] and d['weights_digest'] == json.load(open('$WORK/central_$math.run.out'))['weights_digest']"
  check_json "central_$math.run" "not d['folded_reduction']"
done

# It trains nothing and writes nothing.
expect_exit 0 nothing -- "$DTLAB" train --replicas 4 --dry-run --checkpoint-dir "$WORK/ckpt"
expect_contains nothing out "Memory, estimated peak"
expect_contains nothing out "Simulated time (cost model)"
expect_contains nothing out "The run fits; nothing was trained."
CHECKS=$((CHECKS + 1))
[ -z "$(ls -A "$WORK/ckpt" 2>/dev/null)" ] || fail "--dry-run wrote into --checkpoint-dir"

# The estimated peak against the peak resident set a real run reaches.
peak() {  # peak NAME ARGS...: estimate within 25% of the measured peak RSS
  local name=$1
  shift
  CHECKS=$((CHECKS + 1))
  python3 - "$DTLAB" "$@" <<'PY' || fail "$name: the estimated peak is not within 25% of the measured one"
import json, resource, subprocess, sys
dtlab, args = sys.argv[1], sys.argv[2:]
dry = json.loads(subprocess.run([dtlab, "train", "--json", "--dry-run", *args], check=True,
                                capture_output=True, text=True).stdout)
subprocess.run([dtlab, "train", "--no-progress", *args], check=True, capture_output=True)
measured = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024.0
ratio = dry["peak_bytes"] / measured
print(f"{' '.join(args)}: estimated {dry['peak_bytes'] / 2**20:.0f} MiB, measured {measured / 2**20:.0f} MiB, ratio {ratio:.3f}")
sys.exit(0 if 0.75 <= ratio <= 1.25 else 1)
PY
}
peak fast64 --replicas 64 --batch-per-replica 1 --steps 2 --threads 1
peak exact16 --replicas 16 --batch-per-replica 1 --steps 2 --math exact --threads 1
peak one --steps 2 --threads 1
peak folded300 --replicas 300 --batch-per-replica 1 --steps 2 --math exact --threads 1
peak central300 --strategy central_storage --replicas 300 --batch-per-replica 1 --steps 2 --math exact --threads 1
# A run reports its own estimate and its measured peak (VmHWM from its start).
expect_exit 0 measured -- "$DTLAB" train --no-progress --json --replicas 300 --batch-per-replica 1 --steps 2 --math exact
check_json measured "0.75 <= d['estimated_peak_bytes'] / d['peak_resident_bytes'] <= 1.25"

# Far too many replicas: refused at once, with the estimate and what would fit.
start=$(date +%s%N)
expect_exit 2 huge -- "$DTLAB" train --replicas 100000 --steps 1
CHECKS=$((CHECKS + 1))
[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 5000 ] || fail "--replicas 100000 took 5 s or more to be refused"
expect_contains huge err "the run needs about"
expect_contains huge err "replicas would fit"
expect_exit 2 huge_dry -- "$DTLAB" train --replicas 100000 --dry-run
expect_contains huge_dry out "The run would NOT fit."
expect_contains huge_dry err "the run needs about"

# --max-memory: a limit on the peak.
expect_exit 2 limited -- "$DTLAB" train --replicas 256 --math exact --max-memory 1G --steps 1
expect_contains limited err "--max-memory 1.0 GiB less the"
expect_contains limited err "replicas would fit"
expect_exit 0 limited_fits -- "$DTLAB" train --replicas 2 --max-memory 1G --dry-run --json
check_json limited_fits "d['fits'] and d['largest_replicas'] > 2 and d['available_source'].startswith('--max-memory')"
expect_exit 2 bad_size -- "$DTLAB" train --max-memory lots --steps 1
expect_contains bad_size err "--max-memory must be a size above 0"
expect_exit 2 zero_size -- "$DTLAB" train --max-memory 0 --steps 1
finish
