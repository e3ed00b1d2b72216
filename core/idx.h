// IDX files: the array format of MNIST and Fashion-MNIST.
//
// An IDX file is a 4-byte magic number (two zero bytes, an element type byte and
// the number of dimensions), then each dimension as a big-endian 32-bit integer,
// then the elements in row-major order. Files may be gzip-compressed, as the
// data sets are usually distributed. Only unsigned-byte elements (type 0x08) are
// supported: that is all the image and label files of the MNIST family use.
//
// Thread safety: ReadIdxFile is reentrant; distinct calls may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dtlab {

/// The contents of an IDX file of unsigned bytes.
struct IdxArray {
  /// Dimensions, outermost first; 1 to 4 of them, each > 0.
  std::vector<std::int64_t> dims;
  /// The elements in row-major order; size() is the product of dims.
  std::vector<std::uint8_t> values;
};

/// The largest payload (product of the dimensions, in bytes) ReadIdxFile accepts,
/// so a corrupted header cannot make it allocate terabytes.
inline constexpr std::int64_t kMaxIdxPayloadBytes = std::int64_t{1} << 31;

/// Reads the IDX file at `path`, gzip-compressed (recognized by its 0x1f 0x8b
/// magic) or plain.
///
/// On success the array holds exactly the file's dimensions and elements.
/// Failures, whose messages all start with `path`:
///   NotFound    the file does not exist;
///   InvalidArgument  it is not a regular file (a directory, a FIFO, a device:
///               never opened in a way that blocks) or is larger than
///               kMaxDatasetFileBytes (core/file_io.h);
///   IOError     the operating system refused to open or read it;
///   Corruption  bad magic bytes or an unsupported element type (the message
///               names the bytes found), a truncated header, a zero dimension,
///               a payload over kMaxIdxPayloadBytes, fewer or more data bytes
///               than the dimensions call for, or a damaged gzip stream.
StatusOr<IdxArray> ReadIdxFile(const std::string& path);

}  // namespace dtlab
