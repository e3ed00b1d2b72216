#!/usr/bin/env bash
# CI's reliability jobs (issue 9, docs/reliability.md), run by .ci/run after the
# main test suite:
#   asan   AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover=all):
#          the unit tests and the end-to-end tests labelled "asan", the ones that
#          feed dtlab untrusted input (tests/CMakeLists.txt)
#   tsan   ThreadSanitizer (halt_on_error=1): the unit tests and the end-to-end
#          tests labelled "tsan", against a oneTBB built with ThreadSanitizer by
#          scripts/build-tsan-tbb.sh (Debian's libtbb is not instrumented, so TSan
#          would report each of TBB's task hand-offs as a race); 15-30 s of it
#          oneTBB (skipped once built)
#   fuzz   every libFuzzer target for FUZZ_SECONDS (default 60) on its seed corpus
# Usage: scripts/ci-sanitizers.sh [asan|tsan|fuzz|all]
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-all}

if [ "$job" = asan ] || [ "$job" = all ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan
fi
if [ "$job" = tsan ] || [ "$job" = all ]; then
  scripts/build-tsan-tbb.sh
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan
  # An uninstrumented libtbb would drown the run in false reports: make sure the
  # binaries load the instrumented one (the preset's TBB_DIR and build RPATH).
  # ldd's output is read whole first: `ldd | grep -q` under pipefail fails at
  # random when grep exits before ldd has written its last line (SIGPIPE).
  for binary in build/tsan/tests/dtlab_unit_tests build/tsan/cli/dtlab; do
    libraries=$(ldd "$binary")
    if ! grep -q "=> $PWD/build/tbb-tsan/lib/libtbb\.so" <<<"$libraries"; then
      echo "tsan: $binary does not load build/tbb-tsan's libtbb:" >&2
      grep tbb <<<"$libraries" >&2 || true
      exit 1
    fi
  done
  ctest --preset tsan  # TSAN_OPTIONS come from the preset
fi
if [ "$job" = fuzz ] || [ "$job" = all ]; then
  scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
fi
