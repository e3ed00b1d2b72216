#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, the `fuzz` CMake preset: clang with
# AddressSanitizer and UndefinedBehaviorSanitizer) and runs each for a bounded
# time, starting from its seed corpus in fuzz/corpus/<target>/. A crash, a leak, a
# sanitizer report or a timeout fails the run and leaves the reproducer in
# build/fuzz/artifacts/. Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
mkdir -p build/fuzz/artifacts
for source in fuzz/*_fuzz.cc; do  # one target per source (fuzz/CMakeLists.txt)
  target=$(basename "$source" .cc)
  name=${target%_fuzz}
  # Work on a copy: new inputs found in CI are not written into the source tree.
  work=build/fuzz/corpus/$name
  rm -rf "$work" && mkdir -p "$work" && cp fuzz/corpus/"$name"/* "$work"/
  echo "fuzz: $target for ${seconds}s"
  build/fuzz/fuzz/$target -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix=build/fuzz/artifacts/"$name"- -print_final_stats=1 "$work" 2>&1 | tail -12
done
echo "fuzz: every target ran ${seconds}s without a finding"
