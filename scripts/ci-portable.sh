#!/usr/bin/env bash
# Same bits on every machine (docs/exact.md, "Fast mode"), proved on one: a second
# build for plain x86-64-v3 (no -march=native, so no AVX-512 on a machine that has
# it) with another OrderedGemm k-blocking (DTLAB_ORDERED_GEMM_K_BLOCK=100 instead
# of 512) runs the unit tests and the golden tests (lessons, scenarios, flagship)
# against the same golden files, and cli.same_bits_across_builds compares its
# checkpoints with the release build's byte for byte.
# The portable test preset picks them by name: the unit tests (gtest names, which
# start with a capital) and those four cli.* tests.
# REQUIRES: the release preset built (CI runs the README's test command first).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/release/cli/dtlab ] || { echo "ci-portable: build the release preset first (build/release/cli/dtlab)" >&2; exit 2; }
cmake --preset portable
cmake --build --preset portable
ctest --preset portable
