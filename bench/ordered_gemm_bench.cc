// Exact mode's ordered matrix product (core/ordered_gemm.h) against the Eigen GEMM
// that fast mode uses, on the products of one training step of the seed CNN
// (28x28 Fashion-MNIST, chunks of 16 examples), single-threaded. GFLOP/s counts
// 2*m*n*k per product. A per-example weight gradient runs 16 products, one per
// example, as exact mode does (a batch-invariant gradient needs one chain per
// example); Eigen is timed on the same 16 products.
//
// BM_Sparse times the zero-skipping products (OrderedGemmSparseA/B, the same bits)
// on fast mode's backward products of one chunk, with the sparse operand 80% zeros
// as the gradient behind max pooling is (one position in four, fewer after ReLU),
// beside OrderedGemm on the same operands; their GFLOP/s count the full product's
// 2*m*n*k (an effective rate).
//
// Run: build/release/bench/ordered_gemm_bench [--benchmark_filter=conv2d_1]
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "core/ordered_gemm.h"

namespace dtlab {
namespace {

struct GemmShape {
  std::int64_t m, n, k;
  bool a_transposed;   // A(i, k) at a[k * m + i] (weight gradients) instead of a[i * k + k]
  std::int64_t count;  // products per step (16 for per-example gradients)
};

using ConstRowMajor = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
using RowMajor = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// 64-byte aligned, as dtlab's tensors are (core/tensor.h): a misaligned operand
// splits every vector load across two cache lines and halves the rate of the
// kernels that load a vector per fma.
using AlignedFloats = std::vector<float, Eigen::aligned_allocator<float>>;
struct Operands {
  AlignedFloats a, b, c;
};

Operands MakeOperands(const GemmShape& s) {
  Operands o;
  o.a.resize(static_cast<std::size_t>(s.count * s.m * s.k));
  o.b.resize(static_cast<std::size_t>(s.count * s.k * s.n));
  o.c.resize(static_cast<std::size_t>(s.count * s.m * s.n));
  std::uint32_t x = 12345;
  auto next = [&x] {
    x = x * 1664525u + 1013904223u;
    return static_cast<float>(x >> 8) * (1.0f / 16777216.0f) - 0.5f;
  };
  for (float& v : o.a) v = next();
  for (float& v : o.b) v = next();
  return o;
}

void SetRate(benchmark::State& state, const GemmShape& s) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(static_cast<double>(2 * s.m * s.n * s.k * s.count),
                         benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_Ordered(benchmark::State& state, GemmShape s) {
  Operands o = MakeOperands(s);
  for (auto _ : state) {
    for (std::int64_t e = 0; e < s.count; ++e) {
      const float* a = o.a.data() + e * s.m * s.k;
      const float* b = o.b.data() + e * s.k * s.n;
      float* c = o.c.data() + e * s.m * s.n;
      if (s.a_transposed)
        OrderedGemm(s.m, s.n, s.k, a, 1, s.m, b, s.n, c, s.n);
      else
        OrderedGemm(s.m, s.n, s.k, a, s.k, 1, b, s.n, c, s.n);
    }
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  SetRate(state, s);
}

void BM_Eigen(benchmark::State& state, GemmShape s) {
  Operands o = MakeOperands(s);
  for (auto _ : state) {
    for (std::int64_t e = 0; e < s.count; ++e) {
      ConstRowMajor b(o.b.data() + e * s.k * s.n, s.k, s.n);
      RowMajor c(o.c.data() + e * s.m * s.n, s.m, s.n);
      if (s.a_transposed)
        c.noalias() = ConstRowMajor(o.a.data() + e * s.m * s.k, s.k, s.m).transpose() * b;
      else
        c.noalias() = ConstRowMajor(o.a.data() + e * s.m * s.k, s.m, s.k) * b;
    }
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  SetRate(state, s);
}

// The sparse operand (A of an input gradient, B of a weight gradient) keeps one
// entry in five.
void BM_Sparse(benchmark::State& state, GemmShape s) {
  Operands o = MakeOperands(s);
  AlignedFloats& sparse = s.a_transposed ? o.b : o.a;
  for (std::size_t e = 0; e < sparse.size(); ++e)
    if ((e * 2654435761u) % 5 != 0) sparse[e] = 0.0f;
  for (auto _ : state) {
    if (s.a_transposed)
      OrderedGemmSparseB(s.m, s.n, s.k, o.a.data(), 1, s.m, o.b.data(), s.n, o.c.data(), s.n);
    else
      OrderedGemmSparseA(s.m, s.n, s.k, o.a.data(), s.k, 1, o.b.data(), s.n, o.c.data(), s.n);
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  SetRate(state, s);
}

// {m, n, k, a_transposed, count}
constexpr GemmShape kConvForward{16 * 26 * 26, 32, 9, false, 1};            // conv2d
constexpr GemmShape kConv1Forward{16 * 11 * 11, 64, 288, false, 1};         // conv2d_1
constexpr GemmShape kConv1InputGradient{16 * 11 * 11, 288, 64, false, 1};   // dz * kernel^T
constexpr GemmShape kConv1WeightGradient{288, 64, 121, true, 16};           // patches^T * dz, per example
constexpr GemmShape kConvWeightGradient{9, 32, 676, true, 16};              // conv2d, per example
constexpr GemmShape kConv1WeightGradientChunk{288, 64, 16 * 121, true, 1};  // fast mode: one chain per chunk
constexpr GemmShape kDenseForward{16, 64, 1600, false, 1};                  // dense
constexpr GemmShape kDense1Forward{16, 10, 64, false, 1};                   // dense_1
constexpr GemmShape kDenseInputGradient{16, 1600, 64, false, 1};            // dy * kernel^T

#define DTLAB_GEMM_BENCH(name, shape)         \
  BENCHMARK_CAPTURE(BM_Ordered, name, shape); \
  BENCHMARK_CAPTURE(BM_Eigen, name, shape)

DTLAB_GEMM_BENCH(conv2d_forward, kConvForward);
DTLAB_GEMM_BENCH(conv2d_1_forward, kConv1Forward);
DTLAB_GEMM_BENCH(conv2d_1_input_gradient, kConv1InputGradient);
DTLAB_GEMM_BENCH(conv2d_1_weight_gradient_x16, kConv1WeightGradient);
DTLAB_GEMM_BENCH(conv2d_weight_gradient_x16, kConvWeightGradient);
DTLAB_GEMM_BENCH(dense_forward, kDenseForward);
DTLAB_GEMM_BENCH(dense_1_forward, kDense1Forward);
DTLAB_GEMM_BENCH(dense_input_gradient, kDenseInputGradient);
BENCHMARK_CAPTURE(BM_Ordered, conv2d_1_input_gradient_sparse, kConv1InputGradient);
BENCHMARK_CAPTURE(BM_Sparse, conv2d_1_input_gradient_sparse, kConv1InputGradient);
BENCHMARK_CAPTURE(BM_Ordered, conv2d_1_weight_gradient_chunk_sparse, kConv1WeightGradientChunk);
BENCHMARK_CAPTURE(BM_Sparse, conv2d_1_weight_gradient_chunk_sparse, kConv1WeightGradientChunk);

}  // namespace
}  // namespace dtlab

BENCHMARK_MAIN();
