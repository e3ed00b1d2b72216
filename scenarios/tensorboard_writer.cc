#include "scenarios/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

namespace dtlab {

namespace {

constexpr std::uint32_t kCrc32cPolynomial = 0x82F63B78u;  // Castagnoli, bit-reversed
constexpr std::uint32_t kCrcMaskDelta = 0xa282ead8u;      // TFRecord's mask constant
constexpr std::string_view kFileVersion = "brain.Event:2";
// Gives up after this many names already taken (another writer of the same process
// and second, or a leftover file): something else is wrong by then.
constexpr int kMaxNameAttempts = 1000;

constexpr std::array<std::uint32_t, 256> MakeCrc32cTable() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kCrc32cPolynomial : 0u);
    table[i] = crc;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kCrc32cTable = MakeCrc32cTable();

// Byte at a time: event records are tens of bytes, so a slicing-by-8 or SSE4.2
// version would buy nothing measurable.
constexpr std::uint32_t Crc32cOf(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (char c : data) crc = kCrc32cTable[(crc ^ static_cast<unsigned char>(c)) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

// The standard check value of CRC-32C: a wrong table fails the build, not a reader.
static_assert(Crc32cOf("123456789") == 0xE3069283u);

// TFRecord stores CRCs masked: the CRC of data that itself contains CRCs is then
// less likely to be degenerate (tensorflow/core/lib/hash/crc32c.h).
std::uint32_t MaskedCrc32c(std::string_view data) {
  const std::uint32_t crc = Crc32cOf(data);
  return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta;
}

// Little-endian whatever the host: the format fixes the byte order.
void PutFixed32(std::string* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

void PutFixed64(std::string* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

// Protobuf wire format (protobuf.dev/programming-guides/encoding).
enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void PutVarint(std::string* out, std::uint64_t value) {
  while (value >= 0x80u) {
    out->push_back(static_cast<char>((value & 0x7Fu) | 0x80u));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void PutKey(std::string* out, std::uint32_t field, WireType type) { PutVarint(out, (field << 3) | type); }

void PutLengthDelimited(std::string* out, std::uint32_t field, std::string_view bytes) {
  PutKey(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

// The fields of Event every record has. Zero values are left out, as proto3's own
// serializer does, so the bytes are what TensorFlow's writer would produce.
std::string EventHeader(double wall_time, std::int64_t step) {
  std::string event;
  if (std::bit_cast<std::uint64_t>(wall_time) != 0) {  // proto3 keeps -0.0, drops +0.0
    PutKey(&event, 1, kFixed64);                       // double wall_time = 1
    PutFixed64(&event, std::bit_cast<std::uint64_t>(wall_time));
  }
  if (step != 0) {
    PutKey(&event, 2, kVarint);  // int64 step = 2: negatives take ten bytes, as in proto
    PutVarint(&event, static_cast<std::uint64_t>(step));
  }
  return event;
}

std::string FileVersionEvent(double wall_time) {
  std::string event = EventHeader(wall_time, 0);
  PutLengthDelimited(&event, 3, kFileVersion);  // string file_version = 3
  return event;
}

std::string ScalarEvent(double wall_time, std::int64_t step, std::string_view tag, float value) {
  std::string summary_value;
  if (!tag.empty()) PutLengthDelimited(&summary_value, 1, tag);  // string tag = 1
  PutKey(&summary_value, 2, kFixed32);                           // float simple_value = 2 (in a oneof: kept even if 0)
  PutFixed32(&summary_value, std::bit_cast<std::uint32_t>(value));
  std::string summary;
  PutLengthDelimited(&summary, 1, summary_value);  // repeated Value value = 1
  std::string event = EventHeader(wall_time, step);
  PutLengthDelimited(&event, 5, summary);  // Summary summary = 5
  return event;
}

// Converting a double beyond float's range to float is undefined behaviour in C++,
// so saturate to infinity explicitly (NaN and infinities convert as they are).
float ToFloat(double value) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (value > kMax) return std::numeric_limits<float>::infinity();
  if (value < -kMax) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(value);
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The host name for the file name, with anything but [A-Za-z0-9._-] replaced, so the
// name stays one path component that TensorBoard's "*tfevents*" match accepts.
std::string HostName() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') return "localhost";
  std::string name = buffer;
  for (char& c : name) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!plain) c = '_';
  }
  return name;
}

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

std::uint32_t Crc32c(std::string_view data) { return Crc32cOf(data); }

StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Open(const std::string& directory) {
  if (directory.empty()) return Status::InvalidArgument("the TensorBoard log directory is empty");
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) return Status::IOError(directory + ": cannot create TensorBoard log directory: " + error.message());

  // The suffix tells apart writers of one process opened in the same second
  // (TensorFlow uses a global counter the same way); O_EXCL makes sure an existing
  // file, say from another host sharing the directory, is never appended to.
  static std::atomic<std::uint64_t> next_suffix{0};
  const double now = NowSeconds();
  const std::string prefix = (std::filesystem::path(directory) / "events.out.tfevents.").string() +
                             std::to_string(static_cast<std::int64_t>(now)) + "." + HostName() + "." +
                             std::to_string(::getpid()) + ".";
  std::string path;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    path = prefix + std::to_string(next_suffix.fetch_add(1));
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || attempt + 1 >= kMaxNameAttempts)) {
      return Status::IOError(path + ": cannot create event file: " + ErrnoText());
    }
  }
  std::FILE* file = ::fdopen(fd, "wb");
  if (file == nullptr) {
    const std::string message = path + ": cannot open event file: " + ErrnoText();
    ::close(fd);
    std::filesystem::remove(path, error);
    return Status::IOError(message);
  }

  std::unique_ptr<TensorBoardWriter> writer(new TensorBoardWriter(path, file));
  Status status = writer->WriteRecord(FileVersionEvent(now));
  if (!status.ok()) {
    // A file without its version record is not an event file: leave none behind.
    (void)writer->Close();
    std::filesystem::remove(path, error);
    return status;
  }
  return writer;
}

TensorBoardWriter::~TensorBoardWriter() { (void)Close(); }

Status TensorBoardWriter::AddScalar(const std::string& tag, std::int64_t step, double value, double wall_time) {
  if (wall_time == 0) wall_time = NowSeconds();
  return WriteRecord(ScalarEvent(wall_time, step, tag, ToFloat(value)));
}

Status TensorBoardWriter::WriteRecord(std::string_view event) {
  if (file_ == nullptr) return Status::InvalidArgument(path_ + ": event file is already closed");
  if (!error_.ok()) return error_;
  // One buffer and one fwrite per record, so a reader tailing the file mostly sees
  // whole records (it waits for the rest of a partial one anyway).
  std::string record;
  record.reserve(event.size() + 16);
  PutFixed64(&record, event.size());
  PutFixed32(&record, MaskedCrc32c(record));  // CRC of the 8 length bytes
  record.append(event);
  PutFixed32(&record, MaskedCrc32c(event));
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    error_ = Status::IOError(path_ + ": cannot write: " + ErrnoText());
    return error_;
  }
  return Flush();
}

Status TensorBoardWriter::Flush() {
  if (file_ == nullptr) return Status::Ok();
  if (!error_.ok()) return error_;
  if (std::fflush(file_) != 0) error_ = Status::IOError(path_ + ": cannot write: " + ErrnoText());
  return error_;
}

Status TensorBoardWriter::Close() {
  if (file_ == nullptr) return Status::Ok();
  Status status = Flush();
  // Synced once at the end, not per record: the run's curve should survive a crash
  // right after it ends, and an fsync per training step would cost more than the step.
  if (status.ok() && ::fsync(::fileno(file_)) != 0) {
    status = Status::IOError(path_ + ": cannot sync: " + ErrnoText());
  }
  if (std::fclose(file_) != 0 && status.ok()) status = Status::IOError(path_ + ": cannot close: " + ErrnoText());
  file_ = nullptr;
  return status;
}

}  // namespace dtlab
