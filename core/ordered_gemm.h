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

/// A matrix read in place, row by row: element (i, k) is at
///   rows[i][(k / segment) * segment_stride + k % segment].
/// A convolution's patch matrix without im2col: the patch of output pixel i is KH
/// segments of KW*C consecutive inputs, one input row (W*C floats) apart.
struct SegmentedRows {
  const float* const* rows = nullptr;  // one pointer per row
  std::int64_t segment = 1, segment_stride = 0;
};

/// The same for a matrix written in place (a convolution's input gradient).
struct SegmentedOutputRows {
  float* const* rows = nullptr;
  std::int64_t segment = 1, segment_stride = 0;
};

/// What a product does to each finished element of C, in this order: c = c + bias[j]
/// (if bias is not null), then c = c > 0 ? c : +0 (if relu). The same bits as a
/// second pass over C would give.
struct GemmEpilogue {
  const float* bias = nullptr;  // n values
  bool relu = false;
};

/// C (m x n, row-major, leading dimension ldc) = A * B with A(i, k) at
/// a[i * a_row_stride + k * a_col_stride] and B (k x n) row-major with leading
/// dimension ldb. C is overwritten; with k == 0 it is zero. C must not overlap A or B.
void OrderedGemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                 std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

/// OrderedGemm, then the epilogue on every element of C.
void OrderedGemmWithEpilogue(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                             std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                             const GemmEpilogue& epilogue);

/// The same with A (m x k) given as segmented rows (the same chains: A's layout
/// changes only where its values are read from).
void OrderedGemmSegmentedA(std::int64_t m, std::int64_t n, std::int64_t k, const SegmentedRows& a, const float* b,
                           std::int64_t ldb, float* c, std::int64_t ldc, const GemmEpilogue& epilogue);

/// OrderedGemm's bits, faster where most entries of A are zero: each chain leaves
/// out its zero steps (core/ordered_gemm_sparse.cc says why the bits stay the same).
/// For row-major A (a_col_stride 1); otherwise, or where A is not mostly zeros, or
/// B holds an infinity or a NaN, it is OrderedGemm.
void OrderedGemmSparseA(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                        std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

/// The same where most entries of B are zero; for column-major A (a_row_stride 1).
void OrderedGemmSparseB(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                        std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

/// im2col's adjoint fused with OrderedGemmSparseA: C = A * B (m x n, A row-major with
/// leading dimension lda) is not stored but added into `out`: out(i, j) += C(i, j),
/// segment by segment in descending order and, within one, row by row in ascending
/// order. For a convolution's input gradient that is col2im's order of additions
/// (rows ascending, each row's kernel rows in order) for every input element, so
/// the bits are those of OrderedGemm followed by col2im (core/conv2d.cc) on an
/// output that started at +0. Returns false, changing nothing, where it does not
/// apply (B not finite, A not mostly zeros, or a segment not a whole number of
/// vectors that fits the registers): the caller then takes that road.
bool OrderedGemmSparseAAddToSegmentedRows(std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                                          std::int64_t lda, const float* b, std::int64_t ldb,
                                          const SegmentedOutputRows& out);

/// OrderedGemmSparseB's chains with A (m x k) given column by column: column kk of
/// A is segmented row kk of `a_columns` (a convolution's patch matrix read in place
/// is A's transpose, as a weight gradient needs). Returns false, with C unspecified,
/// where it does not apply (B not mostly zeros, a non-finite value in A, or a
/// segment not a whole number of vectors that fits the registers): the caller then
/// builds the patch matrix and calls OrderedGemmSparseB.
bool OrderedGemmSparseBSegmentedColumns(std::int64_t m, std::int64_t n, std::int64_t k, const SegmentedRows& a_columns,
                                        const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

/// The same chain, one element at a time in plain C++ with std::fma: the
/// definition OrderedGemm must match bit for bit (tests use it).
void OrderedGemmReference(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                          std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

}  // namespace dtlab
