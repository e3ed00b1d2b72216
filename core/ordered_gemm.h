// Ordered matrix products: every output element is one chain of fused
// multiply-adds in ascending k, whatever the matrix sizes, the blocking or the
// instruction set:
//     C[i][j] = fma(A(i,K-1), B[K-1][j], ... fma(A(i,1), B[1][j], fma(A(i,0), B[0][j], 0)) ...)
// (each fma rounded once, IEEE 754 fusedMultiplyAdd). So an example's forward and
// backward values do not depend on the batch it sits in, and a CUDA kernel that
// runs the same chain (__fmaf_rn) gets the same bits. This is the matrix product
// of both math modes (docs/exact.md): nothing in it is chosen from the CPU's
// caches or vector width, so the bits are the same on every machine.
//
// Thread safety: pure functions of their inputs.
#pragma once

#include <cstdint>

namespace dtlab {

/// C (m x n, row-major, leading dimension ldc) = A * B with A(i, k) at
/// a[i * a_row_stride + k * a_col_stride] and B (k x n) row-major with leading
/// dimension ldb. C is overwritten; with k == 0 it is zero. C must not overlap A or B.
void OrderedGemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                 std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

/// OrderedGemm's bits, faster where most entries of A are zero: each chain leaves
/// out its zero steps (core/ordered_gemm_sparse.cc says why the bits stay the same).
/// For row-major A (a_col_stride 1); otherwise, or where A is not mostly zeros, or
/// B holds an infinity or a NaN, it is OrderedGemm.
void OrderedGemmSparseA(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                        std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

/// The same where most entries of B are zero; for column-major A (a_row_stride 1).
void OrderedGemmSparseB(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                        std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

/// The same chain, one element at a time in plain C++ with std::fma: the
/// definition OrderedGemm must match bit for bit (tests use it).
void OrderedGemmReference(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                          std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

}  // namespace dtlab
