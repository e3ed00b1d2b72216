#!/usr/bin/env bash
# CI's reliability jobs (issue 9, docs/reliability.md), run by .ci/run after the
# main test suite:
#   asan   AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover=all):
#          the unit tests and the end-to-end tests not labelled "slow"
#   fuzz   every libFuzzer target for FUZZ_SECONDS (default 60) on its seed corpus
# There is no ThreadSanitizer job: Debian's oneTBB is not built with it, so TSan
# cannot see TBB's synchronization and reports every task hand-off as a race
# (docs/reliability.md).
# Usage: scripts/ci-sanitizers.sh [asan|fuzz|all]
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-all}

if [ "$job" = asan ] || [ "$job" = all ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan -LE slow
fi
if [ "$job" = fuzz ] || [ "$job" = all ]; then
  scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
fi
