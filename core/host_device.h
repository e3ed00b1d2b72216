// DTLAB_HOST_DEVICE marks a function that CUDA code calls on the GPU as well as on
// the host (core/portable_math.h, core/exact_words.h, core/device_kernels.h); in a
// plain C++ build it expands to nothing.
#pragma once

#if defined(__CUDACC__)
#define DTLAB_HOST_DEVICE __host__ __device__
#else
#define DTLAB_HOST_DEVICE
#endif
