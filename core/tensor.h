// Tensor: a dense row-major array of T with a shape, the unit of data in core/.
//
// Layouts follow Keras so weights can be compared with other frameworks:
// activations are NHWC, convolution kernels HWIO, dense kernels (in, out).
// Storage is contiguous and 64-byte aligned; Eigen maps views onto it.
//
// Thread safety: a Tensor is a value; concurrent reads are safe, writes are not.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace dtlab {

/// Dimensions of a tensor, outermost first (e.g. {batch, height, width, channels}).
using Shape = std::vector<std::int64_t>;

/// Number of elements in a tensor of `shape` (1 for a scalar, shape {}).
inline std::int64_t NumElements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

/// "[2, 28, 28, 1]"
std::string ShapeToString(const Shape& shape);

/// Allocates on 64-byte boundaries whatever the build's instruction set.
/// Eigen::aligned_allocator aligns only to EIGEN_MAX_ALIGN_BYTES (16 without AVX,
/// 32 with AVX2), which is less than the Aligned64 views of Tensor::flat() promise
/// Eigen; a build without -march (the fuzzers') then failed Eigen's alignment
/// assertion on an unlucky tensor.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlignment); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T>
class Tensor {
 public:
  using Storage = std::vector<T, CacheLineAllocator<T>>;

  Tensor() = default;
  /// A zero-filled tensor of the given shape.
  explicit Tensor(Shape shape) : shape_(std::move(shape)), data_(NumElements(shape_), T(0)) {}
  Tensor(Shape shape, std::initializer_list<T> values) : shape_(std::move(shape)), data_(values) {}

  const Shape& shape() const { return shape_; }
  std::int64_t dim(std::size_t i) const { return shape_[i]; }
  std::int64_t size() const { return static_cast<std::int64_t>(data_.size()); }

  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  std::span<T> span() { return {data_.data(), data_.size()}; }
  std::span<const T> span() const { return {data_.data(), data_.size()}; }
  T& operator[](std::int64_t i) { return data_[static_cast<std::size_t>(i)]; }
  const T& operator[](std::int64_t i) const { return data_[static_cast<std::size_t>(i)]; }

  /// Changes the shape, keeping capacity; contents are unspecified unless the
  /// element count is unchanged. Cheap when the tensor is reused as a buffer.
  void Resize(Shape shape) {
    shape_ = std::move(shape);
    data_.resize(static_cast<std::size_t>(NumElements(shape_)));
  }
  void SetZero() { std::fill(data_.begin(), data_.end(), T(0)); }

  /// A flat Eigen view of all elements.
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Aligned64> flat() { return {data_.data(), size()}; }
  Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Aligned64> flat() const { return {data_.data(), size()}; }

  friend bool operator==(const Tensor& a, const Tensor& b) { return a.shape_ == b.shape_ && a.data_ == b.data_; }

 private:
  Shape shape_;
  Storage data_;
};

/// Row-major matrix views, the shape GEMM-based kernels work in.
template <typename T>
using MatrixMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

}  // namespace dtlab
