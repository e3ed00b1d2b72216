#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run dtlab into .gpu/ (ignored by git): a
# dtlab built for x86-64-v3 with CUDA (no -march=native: that machine's CPU is not
# this one's), the shared libraries it needs that such a machine may lack, and the
# Fashion-MNIST files. NCCL is not packed (over 200 MB): bench/gpu_device_run.sh
# finds the machine's own libnccl.so.2. docs/gpu.md, "On a lent GPU machine".
# Usage: bench/gpu_bundle.sh        then carry .gpu and run bench/gpu_device_run.sh there
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=build/gpu-device
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTLAB_NATIVE=OFF \
  "-DCMAKE_CXX_FLAGS=-march=x86-64-v3 -mtune=generic" -DDTLAB_BUILD_TESTS=OFF -DDTLAB_BUILD_BENCH=OFF \
  -DDTLAB_BUILD_DOCS=OFF -DDTLAB_WITH_MPI=OFF >/dev/null
grep -q "DTLAB_WITH_CUDA:BOOL=ON" "$build/CMakeCache.txt" ||
  { echo "gpu_bundle: CMake did not find the CUDA toolkit with NCCL; nothing to bundle" >&2; exit 1; }
cmake --build "$build" --target dtlab
rm -rf .gpu && mkdir -p .gpu/lib .gpu/datasets
cp "$build/cli/dtlab" .gpu/dtlab
# Every library outside glibc, libstdc++ and NCCL that the binary links.
ldd .gpu/dtlab | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done
data=$(sed -n 's/^DTLAB_DATASETS_DIR:PATH=//p' "$build/CMakeCache.txt")
cp -r "$data/fashion-mnist" .gpu/datasets/
du -sh .gpu
