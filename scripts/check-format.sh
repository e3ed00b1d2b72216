#!/usr/bin/env bash
# Checks that every C++ and CUDA source in the repository is laid out as
# .clang-format says (clang-format 14, Debian 12's). CI runs it first (.ci/run).
#   scripts/check-format.sh         list the files that differ; exit 1 if any does
#   scripts/check-format.sh --fix   rewrite them in place
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }
mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.cu')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not laid out as .clang-format says: %s\n' "${bad[@]}" >&2
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ; run scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: all ${#files[@]} files laid out as .clang-format says"
