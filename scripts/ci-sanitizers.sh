#!/usr/bin/env bash
# CI's reliability jobs (issue 9, docs/reliability.md), run by .ci/run after the
# main test suite:
#   asan   AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover=all):
#          the unit tests and the end-to-end tests not labelled "slow"
#   tsan   ThreadSanitizer: the unit tests (collectives, batch runner, cluster, parameter
#          servers run their work on oneTBB). Debian's oneTBB is not instrumented, so
#          races inside TBB itself are out of its sight; races in dtlab's own code
#          between tasks are in sight.
#   fuzz   every libFuzzer target for FUZZ_SECONDS (default 60) on its seed corpus
# Usage: scripts/ci-sanitizers.sh [asan|tsan|fuzz|all]
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-all}

if [ "$job" = asan ] || [ "$job" = all ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan -LE slow
fi
if [ "$job" = tsan ] || [ "$job" = all ]; then
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan --target dtlab_unit_tests
  TSAN_OPTIONS=halt_on_error=1 ctest --preset tsan -L unit
fi
if [ "$job" = fuzz ] || [ "$job" = all ]; then
  scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
fi
