#include "core/idx.h"

#include <stdio.h>  // fdopen
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <system_error>

#include "core/file_io.h"

namespace dtlab {
namespace {

constexpr std::uint8_t kUnsignedByteType = 0x08;
constexpr int kMaxDimensions = 4;
constexpr std::size_t kFileChunkBytes = std::size_t{1} << 16;
// When counting trailing garbage, stop after this many bytes ("at least N").
constexpr std::int64_t kMaxTrailingBytesCounted = std::int64_t{1} << 20;

std::string HexByte(std::uint8_t byte) {
  char text[8];
  std::snprintf(text, sizeof(text), "0x%02x", byte);
  return text;
}

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using FilePointer = std::unique_ptr<std::FILE, FileCloser>;

// A stream of the bytes of an IDX file, decompressed if need be.
// Not thread-safe.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `size` bytes into `destination`. Returns how many were read;
  // fewer than `size` only at the end of the data. An error status if the file
  // could not be read or its compressed stream is damaged.
  virtual StatusOr<std::size_t> Read(std::uint8_t* destination, std::size_t size) = 0;
};

// The bytes of a plain file.
class PlainSource : public ByteSource {
 public:
  PlainSource(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}

  StatusOr<std::size_t> Read(std::uint8_t* destination, std::size_t size) override {
    const std::size_t count = std::fread(destination, 1, size, file_);
    if (count < size && std::ferror(file_)) {
      return Status::IOError(path_ + ": read failed: " + std::strerror(errno));
    }
    return count;
  }

 private:
  std::FILE* file_;  // not owned
  std::string path_;
};

// The decompressed bytes of a gzip file (one or more concatenated members).
class GzipSource : public ByteSource {
 public:
  GzipSource(std::FILE* file, std::string path) : file_(file), path_(std::move(path)), input_(kFileChunkBytes) {}
  ~GzipSource() override {
    if (initialized_) inflateEnd(&stream_);
  }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  // Prepares zlib. Must succeed before Read is called.
  Status Init() {
    std::memset(&stream_, 0, sizeof(stream_));
    // 16 + MAX_WBITS: expect a gzip header and trailer, and check the CRC.
    if (inflateInit2(&stream_, 16 + MAX_WBITS) != Z_OK) {
      return Status::Runtime(path_ + ": cannot initialize zlib");
    }
    initialized_ = true;
    return Status::Ok();
  }

  StatusOr<std::size_t> Read(std::uint8_t* destination, std::size_t size) override {
    std::size_t produced = 0;
    while (produced < size) {
      if (stream_.avail_in == 0 && !file_exhausted_) {
        const std::size_t count = std::fread(input_.data(), 1, input_.size(), file_);
        if (count < input_.size()) {
          if (std::ferror(file_)) {
            return Status::IOError(path_ + ": read failed: " + std::strerror(errno));
          }
          file_exhausted_ = true;
        }
        stream_.next_in = input_.data();
        stream_.avail_in = static_cast<uInt>(count);
      }
      if (member_ended_) {
        if (stream_.avail_in == 0 && file_exhausted_) break;  // end of the data
        // Another gzip member follows (as `cat a.gz b.gz` makes).
        if (inflateReset(&stream_) != Z_OK) {
          return Status::Corruption(path_ + ": corrupted gzip data: cannot reset zlib");
        }
        member_ended_ = false;
      }
      const std::size_t wanted = std::min<std::size_t>(size - produced, 1u << 30);
      stream_.next_out = destination + produced;
      stream_.avail_out = static_cast<uInt>(wanted);
      const int result = inflate(&stream_, Z_NO_FLUSH);
      produced += wanted - stream_.avail_out;
      switch (result) {
        case Z_OK:
          break;
        case Z_STREAM_END:
          member_ended_ = true;
          break;
        case Z_BUF_ERROR:
          // No progress possible: fine if we merely need more input, an error
          // if there is none left.
          if (stream_.avail_in == 0 && file_exhausted_) {
            return Status::Corruption(path_ + ": corrupted gzip data: the compressed stream ends early");
          }
          break;
        default:
          return Status::Corruption(path_ + ": corrupted gzip data: " +
                                    (stream_.msg != nullptr ? stream_.msg : "zlib error " + std::to_string(result)));
      }
    }
    return produced;
  }

 private:
  std::FILE* file_;  // not owned
  std::string path_;
  std::vector<std::uint8_t> input_;
  z_stream stream_{};
  bool initialized_ = false;
  bool file_exhausted_ = false;
  bool member_ended_ = false;
};

StatusOr<IdxArray> ParseIdx(ByteSource& source, const std::string& path) {
  std::uint8_t magic[4];
  DTLAB_ASSIGN_OR_RETURN(const std::size_t magic_read, source.Read(magic, 4));
  if (magic_read < 4) {
    return Status::Corruption(path + ": truncated header: expected 4 magic bytes, found " + std::to_string(magic_read));
  }
  const std::string found =
      HexByte(magic[0]) + " " + HexByte(magic[1]) + " " + HexByte(magic[2]) + " " + HexByte(magic[3]);
  if (magic[0] != 0 || magic[1] != 0 || magic[3] < 1 || magic[3] > kMaxDimensions) {
    return Status::Corruption(path + ": not an IDX file: bad magic bytes " + found +
                              " (expected 0x00 0x00, a type byte, and 1 to 4 dimensions)");
  }
  if (magic[2] != kUnsignedByteType) {
    return Status::Corruption(path + ": unsupported IDX element type " + HexByte(magic[2]) + " in magic bytes " +
                              found + " (only unsigned bytes, 0x08, are supported)");
  }

  const int num_dims = magic[3];
  std::uint8_t dim_bytes[4 * kMaxDimensions];
  const std::size_t dim_bytes_wanted = 4 * static_cast<std::size_t>(num_dims);
  DTLAB_ASSIGN_OR_RETURN(const std::size_t dim_bytes_read, source.Read(dim_bytes, dim_bytes_wanted));
  if (dim_bytes_read < dim_bytes_wanted) {
    return Status::Corruption(path + ": truncated header: expected " + std::to_string(dim_bytes_wanted) +
                              " bytes of dimensions, found " + std::to_string(dim_bytes_read));
  }

  IdxArray array;
  std::int64_t payload_bytes = 1;
  for (int d = 0; d < num_dims; ++d) {
    const std::uint8_t* b = dim_bytes + 4 * d;
    const std::int64_t dim =
        (std::int64_t{b[0]} << 24) | (std::int64_t{b[1]} << 16) | (std::int64_t{b[2]} << 8) | std::int64_t{b[3]};
    if (dim <= 0 || dim > 0x7fffffff) {
      return Status::Corruption(path + ": dimension " + std::to_string(d) + " is " + std::to_string(dim) +
                                "; every dimension must be in [1, 2^31)");
    }
    array.dims.push_back(dim);
    payload_bytes *= dim;  // cannot overflow: each factor < 2^31 and we stop at 2^31
    if (payload_bytes > kMaxIdxPayloadBytes) {
      return Status::Corruption(path + ": dimensions ask for more than " + std::to_string(kMaxIdxPayloadBytes) +
                                " bytes of data (corrupted header?)");
    }
  }

  // Read in slices and grow the array as data arrives, so that a short file whose
  // header claims 2 GiB costs what the file holds, not 2 GiB of zeros (found by
  // fuzz/idx_fuzz.cc).
  constexpr std::size_t kSliceBytes = std::size_t{16} << 20;
  const auto wanted = static_cast<std::size_t>(payload_bytes);
  std::size_t payload_read = 0;
  while (payload_read < wanted) {
    const std::size_t slice = std::min(kSliceBytes, wanted - payload_read);
    array.values.resize(payload_read + slice);
    DTLAB_ASSIGN_OR_RETURN(const std::size_t count, source.Read(array.values.data() + payload_read, slice));
    payload_read += count;
    if (count < slice) {
      return Status::Corruption(path + ": truncated: expected " + std::to_string(payload_bytes) +
                                " bytes of data after the header, found " + std::to_string(payload_read));
    }
  }

  // Nothing may follow the data. Reading on also drives a gzip stream to its end,
  // which checks its CRC and length.
  std::int64_t trailing = 0;
  std::vector<std::uint8_t> scratch(kFileChunkBytes);
  while (trailing < kMaxTrailingBytesCounted) {
    DTLAB_ASSIGN_OR_RETURN(const std::size_t count, source.Read(scratch.data(), scratch.size()));
    trailing += static_cast<std::int64_t>(count);
    if (count < scratch.size()) break;
  }
  if (trailing > 0) {
    return Status::Corruption(path + ": " + (trailing >= kMaxTrailingBytesCounted ? "at least " : "") +
                              std::to_string(trailing) + " unexpected trailing bytes after the " +
                              std::to_string(payload_bytes) + " bytes of data");
  }
  return array;
}

}  // namespace

StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  // A regular file only: a FIFO or a device would block or never end.
  StatusOr<UniqueFd> fd = OpenRegularFile(path, kMaxDatasetFileBytes, "the IDX file");
  if (fd.status().code() == Status::Code::kNotFound) return Status::NotFound(path + ": no such file");
  if (!fd.ok()) return fd.status().WithContext(path);  // messages start with the path (idx.h)
  FilePointer file(::fdopen(fd->get(), "rb"));
  if (file == nullptr) return Status::IOError(path + ": cannot open: " + std::strerror(errno));
  (void)fd->release();  // the FILE owns it now

  // Peek at the first two bytes to choose plain or gzip.
  std::uint8_t head[2] = {0, 0};
  const std::size_t head_read = std::fread(head, 1, 2, file.get());
  if (head_read < 2 && std::ferror(file.get())) {
    return Status::IOError(path + ": read failed: " + std::strerror(errno));
  }
  std::rewind(file.get());

  if (head_read == 2 && head[0] == 0x1f && head[1] == 0x8b) {
    GzipSource source(file.get(), path);
    DTLAB_RETURN_IF_ERROR(source.Init());
    return ParseIdx(source, path);
  }
  PlainSource source(file.get(), path);
  return ParseIdx(source, path);
}

}  // namespace dtlab
