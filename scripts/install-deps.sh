#!/usr/bin/env bash
# Installs the Debian 12 packages dtlab needs to build, test and run, if any are
# missing (idempotent: does nothing when all are present). Run as root, or with sudo.
#   scripts/install-deps.sh           build, test and data packages
#   scripts/install-deps.sh --peers   also the reference peers and tools some tests and
#                                     benchmarks use (PyTorch with OpenBLAS, headless Chromium
#                                     for the HTML reports, python3-venv for TensorBoard's
#                                     reader: scripts/peers-venv.sh); never needed to run dtlab
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3
  libeigen3-dev libtbb-dev libboost-program-options-dev zlib1g-dev
  nlohmann-json3-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev doxygen
  clang libclang-rt-14-dev  # the libFuzzer targets (scripts/fuzz.sh)
  clang-format  # the C++ layout check (scripts/check-format.sh, .clang-format)
  groff-base  # renders the manual pages the build writes (tests/cli/man_pages.sh)
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist
)
if [ "${1:-}" = "--peers" ]; then
  packages+=(python3-torch python3-numpy libopenblas0-openmp chromium python3-venv)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
