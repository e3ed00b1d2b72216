// The safetensors file format: how dtlab stores tensors on disk (checkpoints).
//
// Layout (https://github.com/huggingface/safetensors), readable by the Python
// `safetensors` package and by PyTorch:
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  UTF-8 JSON object, padded with spaces so that 8 + N is a multiple of 8:
//                {"<tensor name>": {"dtype": "F32", "shape": [2, 3],
//                                   "data_offsets": [begin, end]}, ...,
//                 "__metadata__": {"<key>": "<value>", ...}}
//   [rest]     the data buffer: every tensor little-endian, row-major, packed in
//              order without gaps; data_offsets are relative to its first byte.
//
// dtlab adds two integrity checks as metadata (docs/checkpoints.md):
//   "dtlab.crc32"        zlib crc32 of the data buffer, 8 lowercase hex digits;
//   "dtlab.header_crc32" zlib crc32 of the header JSON re-serialized canonically
//                        (keys sorted, no spaces) without this one key.
// ParseSafetensors verifies each one that is present, so a flipped byte anywhere
// in a file written by dtlab is reported as Corruption instead of being loaded.
//
// Thread safety: SafetensorsFile is a value; concurrent const use is safe, any
// mutation needs external synchronization. The free functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_io.h"  // WriteFileAtomically, for the writers of checkpoints
#include "core/status.h"
#include "core/tensor.h"

namespace dtlab {

/// Element types dtlab reads and writes; names follow safetensors ("F32", ...).
enum class DType { kF32, kF64, kI32, kI64, kU8 };

/// Bytes per element: 4, 8, 4, 8, 1.
std::size_t DTypeSize(DType dtype);
/// The safetensors name: "F32", "F64", "I32", "I64", "U8".
std::string_view DTypeName(DType dtype);

/// One named tensor as stored: raw little-endian row-major bytes.
/// Invariant (kept by SafetensorsFile): bytes.size() == NumElements(shape) * DTypeSize(dtype).
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<std::uint8_t> bytes;

  friend bool operator==(const TensorEntry&, const TensorEntry&) = default;
};

/// The contents of one safetensors file: named tensors in order, plus string metadata.
/// Tensors are written in insertion order; a parsed file lists them in data order.
class SafetensorsFile {
 public:
  /// Adds a copy of `tensor` as F32 under `name`. InvalidArgument if the name is
  /// already used, empty, "__metadata__" or not valid UTF-8.
  Status Add(std::string name, const Tensor<float>& tensor);
  /// Adds a copy of `values` with `shape` (row-major). Besides the name errors
  /// above, InvalidArgument if a dimension is negative or NumElements(shape) !=
  /// values.size(). Use shape {} for a scalar and {n} for a vector.
  Status Add(std::string name, std::span<const float> values, Shape shape);
  Status Add(std::string name, std::span<const double> values, Shape shape);
  Status Add(std::string name, std::span<const std::int32_t> values, Shape shape);
  Status Add(std::string name, std::span<const std::int64_t> values, Shape shape);
  Status Add(std::string name, std::span<const std::uint8_t> values, Shape shape);
  /// Adds `entry` as is (e.g. one copied from another file); the same checks,
  /// plus InvalidArgument if its byte count does not match dtype and shape.
  Status AddEntry(TensorEntry entry);

  /// The tensor called `name`, or nullptr. The pointer stays valid until the
  /// next Add/AddEntry.
  const TensorEntry* Find(std::string_view name) const;

  /// The F32 tensor `name` as a Tensor. NotFound naming the tensor if there is
  /// none; Corruption if it has another dtype.
  StatusOr<Tensor<float>> GetF32(std::string_view name) const;
  /// The elements (flattened, row-major) of a tensor of the given dtype; the
  /// same errors as GetF32.
  StatusOr<std::vector<double>> GetF64(std::string_view name) const;
  StatusOr<std::vector<std::int32_t>> GetI32(std::string_view name) const;
  StatusOr<std::vector<std::int64_t>> GetI64(std::string_view name) const;
  StatusOr<std::vector<std::uint8_t>> GetU8(std::string_view name) const;

  const std::vector<TensorEntry>& entries() const { return entries_; }

  /// Free-form string metadata ("__metadata__"). Keys starting with "dtlab." are
  /// reserved: SerializeSafetensors overwrites "dtlab.crc32" and
  /// "dtlab.header_crc32". A parsed file keeps them as read.
  std::map<std::string, std::string> metadata;

 private:
  Status CheckNewName(const std::string& name) const;
  // Looks `name` up and checks its dtype; NotFound/Corruption as in GetF32.
  StatusOr<const TensorEntry*> FindTyped(std::string_view name, DType dtype) const;

  std::vector<TensorEntry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_by_name_;
};

/// The safetensors bytes for `file`. Deterministic: equal contents (entries in
/// the same order, equal metadata) give byte-identical output. Sets the metadata
/// keys "dtlab.crc32" and "dtlab.header_crc32" in the output (not in `file`).
/// Invalid UTF-8 in metadata is replaced by U+FFFD (names are checked by Add).
std::string SerializeSafetensors(const SafetensorsFile& file);

/// Parses and fully validates safetensors `bytes`. On failure returns
/// Corruption whose message starts with `origin_for_messages` (a path, usually)
/// and says what is wrong: a short file, a bad header length, JSON that is not
/// an object or an entry with missing or mistyped fields, an unknown dtype, a
/// negative dimension, offsets that do not match dtype and shape, lie outside
/// the buffer, overlap or leave gaps, a duplicate key, or a checksum mismatch.
StatusOr<SafetensorsFile> ParseSafetensors(std::string_view bytes, const std::string& origin_for_messages);

/// Reads and parses the file at `path` (ReadRegularFile, core/file_io.h: a
/// regular file of at most kMaxCheckpointBytes). NotFound if it does not exist,
/// InvalidArgument if it is a FIFO, a device, a directory or too large, IOError
/// if it cannot be read, otherwise as ParseSafetensors with origin `path`.
StatusOr<SafetensorsFile> ReadSafetensorsFile(const std::string& path);

}  // namespace dtlab
