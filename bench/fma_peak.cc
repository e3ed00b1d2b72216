// Prints the measured float32 peak in GFLOP/s on THREADS threads (argument, default
// 1): each thread runs independent chains of fused multiply-adds in the widest
// vectors this build has (AVX-512 in a native build on a CPU with it, AVX2 in an
// x86-64-v3 build). That is the rate dtlab's kernels could reach at best on this
// machine with this build, whatever its FMA ports, vector width or turbo clock, which
// /proc/cpuinfo does not tell in a virtual machine. bench/compare_torch.sh divides
// by it ("of measured peak").
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <immintrin.h>

namespace {

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
Vec Splat(float x) { return _mm512_set1_ps(x); }
Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
float First(Vec v) { return _mm512_cvtss_f32(v); }
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
Vec Splat(float x) { return _mm256_set1_ps(x); }
Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
float First(Vec v) { return _mm256_cvtss_f32(v); }
#else
#error "fma_peak needs AVX2 and FMA (x86-64-v3) or AVX-512"
#endif

// 16 independent chains: enough to cover the FMA latency (4-5 cycles) on two ports.
// They stay in registers: an earlier version kept the loop from being folded with
// an empty asm statement on acc[0], which made the compiler store all 16 vectors
// every iteration, so it measured the store rate (one vector per cycle), about
// half the FMA rate. Nothing folds 10^8 dependent float steps anyway.
constexpr int kChains = 16;
constexpr long kIterations = 100'000'000;

float Run() {
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Splat(static_cast<float>(c));
  const Vec a = Splat(0.999999f), b = Splat(1e-7f);
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = Fma(acc[c], a, b);
  }
  float sum = 0;
  for (int c = 0; c < kChains; ++c) sum += First(acc[c]);
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  if (threads < 1 || threads > 1024) {
    std::fprintf(stderr, "usage: fma_peak [THREADS]   (1 to 1024, default 1)\n");
    return 2;
  }
  std::vector<float> sums(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back([&sums, t] { sums[static_cast<std::size_t>(t)] = Run(); });
  for (auto& thread : pool) thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops = 2.0 * kLanes * kChains * static_cast<double>(kIterations) * threads;
  std::printf("%.1f\n", flops / seconds / 1e9);
  return sums[0] == 12345.0f ? 1 : 0;  // uses the result
}
