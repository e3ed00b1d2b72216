#include "scenarios/tensorboard_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifndef DTLAB_TEST_TMPDIR
#define DTLAB_TEST_TMPDIR "/tmp"
#endif
#include "tests/unit/test_util.h"

namespace dtlab {
namespace {

namespace fs = std::filesystem;
using ::dtlab::testing::FreshTestDirectory;
using ::dtlab::testing::ReadFileBytes;

// ---- A reader written independently of the writer ------------------------------
// It shares no code with scenarios/tensorboard_writer.cc, so a mistake in the writer's
// CRC table, mask or field numbers cannot cancel out against the same mistake here.

// CRC-32C one bit at a time, straight from the definition (no table).
std::uint32_t BitwiseCrc32c(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (char c : data) {
    crc ^= static_cast<unsigned char>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

std::uint32_t MaskCrc(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::uint64_t LittleEndian(std::string_view bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i)
    value |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return value;
}

// Splits an event file into its records, checking the framing and both CRCs. On
// failure `error` says which check failed and at what offset.
struct RecordFile {
  std::vector<std::string> records;
  std::string error;  // empty: the whole file is well-formed
};

RecordFile ReadRecords(std::string_view file) {
  RecordFile out;
  std::size_t offset = 0;
  while (offset < file.size()) {
    const std::string at = " at offset " + std::to_string(offset);
    if (file.size() - offset < 12) {
      out.error = "truncated record header" + at;
      return out;
    }
    const std::string_view length_bytes = file.substr(offset, 8);
    if (LittleEndian(file.substr(offset + 8, 4)) != MaskCrc(BitwiseCrc32c(length_bytes))) {
      out.error = "length CRC mismatch" + at;
      return out;
    }
    const std::uint64_t length = LittleEndian(length_bytes);
    if (file.size() - offset - 12 < 4 || length > file.size() - offset - 16) {
      out.error = "truncated record data" + at;
      return out;
    }
    const std::string_view data = file.substr(offset + 12, length);
    if (LittleEndian(file.substr(offset + 12 + length, 4)) != MaskCrc(BitwiseCrc32c(data))) {
      out.error = "data CRC mismatch" + at;
      return out;
    }
    out.records.emplace_back(data);
    offset += 16 + length;
  }
  return out;
}

// Protobuf wire format: one field of a message.
struct Field {
  std::uint32_t number = 0;
  std::uint32_t wire_type = 0;  // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  std::uint64_t scalar = 0;     // varint, fixed64 or fixed32 value
  std::string bytes;            // length-delimited payload
};

bool ReadVarint(std::string_view* in, std::uint64_t* value) {
  *value = 0;
  for (int i = 0; i < 10 && !in->empty(); ++i) {
    const auto byte = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    *value |= std::uint64_t{byte & 0x7Fu} << (7 * i);
    if ((byte & 0x80u) == 0) return true;
  }
  return false;
}

::testing::AssertionResult ParseFields(std::string_view message, std::vector<Field>* fields) {
  while (!message.empty()) {
    std::uint64_t key = 0;
    if (!ReadVarint(&message, &key)) return ::testing::AssertionFailure() << "bad field key";
    Field field;
    field.number = static_cast<std::uint32_t>(key >> 3);
    field.wire_type = static_cast<std::uint32_t>(key & 7u);
    switch (field.wire_type) {
      case 0:
        if (!ReadVarint(&message, &field.scalar)) return ::testing::AssertionFailure() << "bad varint";
        break;
      case 1:
      case 5: {
        const std::size_t size = field.wire_type == 1 ? 8 : 4;
        if (message.size() < size) return ::testing::AssertionFailure() << "truncated fixed field";
        field.scalar = LittleEndian(message.substr(0, size));
        message.remove_prefix(size);
        break;
      }
      case 2: {
        std::uint64_t size = 0;
        if (!ReadVarint(&message, &size) || size > message.size())
          return ::testing::AssertionFailure() << "bad length-delimited field " << field.number;
        field.bytes = std::string(message.substr(0, size));
        message.remove_prefix(size);
        break;
      }
      default:
        return ::testing::AssertionFailure() << "unexpected wire type " << field.wire_type;
    }
    fields->push_back(std::move(field));
  }
  return ::testing::AssertionSuccess();
}

// The parts of tensorflow.Event the writer uses (event.proto, summary.proto).
struct Event {
  double wall_time = 0;  // absent fields read as proto3 defaults
  std::int64_t step = 0;
  std::optional<std::string> file_version;
  bool has_summary = false;
  std::vector<std::pair<std::string, float>> values;  // Summary.Value (tag, simple_value)
};

::testing::AssertionResult Expect(bool condition, const char* what) {
  return condition ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << what;
}

::testing::AssertionResult ParseValue(std::string_view message, Event* event) {
  std::vector<Field> fields;
  if (auto ok = ParseFields(message, &fields); !ok) return ok;
  std::string tag;
  std::optional<float> value;
  for (const Field& field : fields) {
    if (field.number == 1) {
      if (auto ok = Expect(field.wire_type == 2, "Value.tag is not length-delimited"); !ok) return ok;
      tag = field.bytes;
    } else if (field.number == 2) {
      if (auto ok = Expect(field.wire_type == 5, "Value.simple_value is not fixed32"); !ok) return ok;
      value = std::bit_cast<float>(static_cast<std::uint32_t>(field.scalar));
    } else {
      return ::testing::AssertionFailure() << "unexpected Summary.Value field " << field.number;
    }
  }
  if (auto ok = Expect(value.has_value(), "Summary.Value without simple_value"); !ok) return ok;
  event->values.emplace_back(tag, *value);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ParseEvent(std::string_view message, Event* event) {
  std::vector<Field> fields;
  if (auto ok = ParseFields(message, &fields); !ok) return ok;
  for (const Field& field : fields) {
    switch (field.number) {
      case 1:
        if (auto ok = Expect(field.wire_type == 1, "Event.wall_time is not fixed64"); !ok) return ok;
        event->wall_time = std::bit_cast<double>(field.scalar);
        break;
      case 2:
        if (auto ok = Expect(field.wire_type == 0, "Event.step is not a varint"); !ok) return ok;
        event->step = static_cast<std::int64_t>(field.scalar);
        break;
      case 3:
        if (auto ok = Expect(field.wire_type == 2, "Event.file_version is not length-delimited"); !ok) return ok;
        event->file_version = field.bytes;
        break;
      case 5: {
        if (auto ok = Expect(field.wire_type == 2, "Event.summary is not length-delimited"); !ok) return ok;
        event->has_summary = true;
        std::vector<Field> summary;
        if (auto ok = ParseFields(field.bytes, &summary); !ok) return ok;
        for (const Field& value : summary) {
          if (auto ok = Expect(value.number == 1 && value.wire_type == 2, "bad Summary.value"); !ok) return ok;
          if (auto ok = ParseValue(value.bytes, event); !ok) return ok;
        }
        break;
      }
      default:
        return ::testing::AssertionFailure() << "unexpected Event field " << field.number;
    }
  }
  return ::testing::AssertionSuccess();
}

// Reads and checks a whole event file.
::testing::AssertionResult ReadEvents(const fs::path& path, std::vector<Event>* events) {
  const RecordFile file = ReadRecords(ReadFileBytes(path));
  if (!file.error.empty()) return ::testing::AssertionFailure() << path << ": " << file.error;
  for (const std::string& record : file.records) {
    Event event;
    if (auto ok = ParseEvent(record, &event); !ok) return ok << " in " << path;
    events->push_back(std::move(event));
  }
  return ::testing::AssertionSuccess();
}

double Now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string Hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text;
  for (char c : bytes) {
    if (!text.empty()) text += ' ';
    text += kDigits[static_cast<unsigned char>(c) >> 4];
    text += kDigits[static_cast<unsigned char>(c) & 15];
  }
  return text;
}

std::unique_ptr<TensorBoardWriter> OpenOrDie(const fs::path& directory) {
  StatusOr<std::unique_ptr<TensorBoardWriter>> writer = TensorBoardWriter::Open(directory.string());
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  return writer.ok() ? std::move(writer).value() : nullptr;
}

// ---- Tests ------------------------------------------------------------------------

TEST(Crc32cTest, StandardCheckValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(BitwiseCrc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  // iSCSI test vectors (RFC 3720, B.4).
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending += static_cast<char>(i);
    descending += static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(descending), 0x113FDB5Cu);
}

TEST(Crc32cTest, TableAgreesWithBitwiseOnEveryPrefix) {
  std::string data;
  std::uint32_t state = 12345;
  for (int i = 0; i < 300; ++i) {
    state = state * 1103515245u + 12345u;
    data += static_cast<char>(state >> 24);
  }
  for (std::size_t n = 0; n <= data.size(); ++n) {
    ASSERT_EQ(Crc32c(std::string_view(data).substr(0, n)), BitwiseCrc32c(std::string_view(data).substr(0, n))) << n;
  }
}

TEST(TensorBoardWriterTest, ScalarsRoundTrip) {
  const fs::path dir = FreshTestDirectory() / "logs" / "run-1";  // parents are created too
  const double before = Now();
  std::unique_ptr<TensorBoardWriter> writer = OpenOrDie(dir);
  ASSERT_NE(writer, nullptr);
  const double after = Now();

  // The name TensorBoard globs for: events.out.tfevents.<seconds>.<host>.<pid>.<suffix>.
  const fs::path path(writer->path());
  EXPECT_EQ(path.parent_path(), dir);
  const std::string name = path.filename().string();
  const std::string prefix = "events.out.tfevents.";
  ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
  const std::string seconds = name.substr(prefix.size(), name.find('.', prefix.size()) - prefix.size());
  EXPECT_NEAR(std::stod(seconds), before, 2.0) << name;
  std::string pid = ".";  // built by appending: GCC 12 warns falsely (-Wrestrict) on "." + std::string&&
  pid += std::to_string(::getpid());
  pid += '.';
  EXPECT_NE(name.find(pid), std::string::npos) << name;

  struct Scalar {
    std::string tag;
    std::int64_t step;
    double value;
    double wall_time;
  };
  const double kMax = std::numeric_limits<double>::max();
  const std::vector<Scalar> scalars = {
      {"train/loss", 1, 2.302585092994046, 1700000000.25},
      {"train/accuracy", 1, 0.1, 1700000000.5},
      {"train/loss", 2, 1.5, 1700000001.125},
      {"zero", 0, 0.0, 1700000002.0},  // step 0 and value 0: absent and present on the wire
      {"negative/step", -5, -1e-3, 1700000003.0},
      {"big", std::numeric_limits<std::int64_t>::max(), 1e300, 1700000004.0},  // value saturates
      {"small", std::numeric_limits<std::int64_t>::min(), -kMax, 1700000005.0},
      {"nan", 7, std::nan(""), 1700000006.0},
      {"", 8, 3.0, 1700000007.0},  // empty tag: left out, as proto3 does
  };
  for (const Scalar& s : scalars) ASSERT_TRUE(writer->AddScalar(s.tag, s.step, s.value, s.wall_time).ok());
  ASSERT_TRUE(writer->Close().ok());

  std::vector<Event> events;
  ASSERT_TRUE(ReadEvents(path, &events));
  ASSERT_EQ(events.size(), scalars.size() + 1);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_FALSE(events[0].has_summary);
  EXPECT_EQ(events[0].step, 0);
  EXPECT_GE(events[0].wall_time, before);
  EXPECT_LE(events[0].wall_time, after);
  for (std::size_t i = 0; i < scalars.size(); ++i) {
    const Event& event = events[i + 1];
    const Scalar& s = scalars[i];
    EXPECT_FALSE(event.file_version.has_value()) << i;
    EXPECT_TRUE(event.has_summary) << i;
    EXPECT_EQ(event.step, s.step) << i;
    EXPECT_EQ(event.wall_time, s.wall_time) << i;
    ASSERT_EQ(event.values.size(), 1u) << i;
    EXPECT_EQ(event.values[0].first, s.tag) << i;
    const float got = event.values[0].second;
    if (std::isnan(s.value)) {
      EXPECT_TRUE(std::isnan(got)) << i;
    } else if (std::fabs(s.value) > std::numeric_limits<float>::max()) {
      EXPECT_EQ(got, std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(s.value > 0 ? 1 : -1)))
          << i;
    } else {
      EXPECT_EQ(got, static_cast<float>(s.value)) << i;
    }
  }
  // One file, nothing else left in the directory.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

// The exact bytes protobuf's own serializer gives for these events (Python protobuf,
// tensorboard.compat.proto.event_pb2): field numbers, wire types, zero-value omission
// and negative varints all as TensorFlow writes them.
TEST(TensorBoardWriterTest, EventsAreWhatProtobufSerializes) {
  std::unique_ptr<TensorBoardWriter> writer = OpenOrDie(FreshTestDirectory());
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->AddScalar("a", 1, 1.0, 1.0).ok());
  ASSERT_TRUE(writer->AddScalar("", -1, 0.0, 2.5).ok());
  ASSERT_TRUE(writer->Close().ok());
  const RecordFile file = ReadRecords(ReadFileBytes(writer->path()));
  ASSERT_EQ(file.error, "");
  ASSERT_EQ(file.records.size(), 3u);
  // Event(wall_time=<now>, file_version="brain.Event:2"): all but the 8 time bytes.
  EXPECT_EQ(Hex(file.records[0].substr(0, 1)), "09");
  EXPECT_EQ(Hex(file.records[0].substr(9)), "1a 0d 62 72 61 69 6e 2e 45 76 65 6e 74 3a 32");
  // Event(wall_time=1.0, step=1, summary=Summary(value=[Value(tag="a", simple_value=1.0)]))
  EXPECT_EQ(Hex(file.records[1]), "09 00 00 00 00 00 00 f0 3f 10 01 2a 0a 0a 08 0a 01 61 15 00 00 80 3f");
  // Event(wall_time=2.5, step=-1, summary=Summary(value=[Value(tag="", simple_value=0.0)]))
  EXPECT_EQ(Hex(file.records[2]),
            "09 00 00 00 00 00 00 04 40 10 ff ff ff ff ff ff ff ff ff 01 2a 07 0a 05 15 00 00 00 00");
}

TEST(TensorBoardWriterTest, ZeroWallTimeMeansNow) {
  std::unique_ptr<TensorBoardWriter> writer = OpenOrDie(FreshTestDirectory());
  ASSERT_NE(writer, nullptr);
  const double before = Now();
  ASSERT_TRUE(writer->AddScalar("loss", 3, 0.5).ok());
  const double after = Now();
  ASSERT_TRUE(writer->Close().ok());
  std::vector<Event> events;
  ASSERT_TRUE(ReadEvents(writer->path(), &events));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_GE(events[1].wall_time, before);
  EXPECT_LE(events[1].wall_time, after);
}

// TensorBoard tails the file during training: each scalar must be readable as soon as
// AddScalar returns, before Close.
TEST(TensorBoardWriterTest, EachScalarIsVisibleBeforeClose) {
  std::unique_ptr<TensorBoardWriter> writer = OpenOrDie(FreshTestDirectory());
  ASSERT_NE(writer, nullptr);
  for (int step = 1; step <= 3; ++step) {
    ASSERT_TRUE(writer->AddScalar("loss", step, 1.0 / step, 1.0).ok());
    std::vector<Event> events;
    ASSERT_TRUE(ReadEvents(writer->path(), &events));
    ASSERT_EQ(events.size(), static_cast<std::size_t>(step + 1));
    EXPECT_EQ(events.back().step, step);
  }
}

// Every single corrupted byte is caught, so the reader really checks both CRCs (and
// a writer with a wrong CRC would fail the round trip above).
TEST(TensorBoardWriterTest, CorruptedByteFailsTheCrcCheck) {
  std::unique_ptr<TensorBoardWriter> writer = OpenOrDie(FreshTestDirectory());
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->AddScalar("train/loss", 1, 0.75, 1.0).ok());
  ASSERT_TRUE(writer->Close().ok());
  const std::string good = ReadFileBytes(writer->path());
  ASSERT_EQ(ReadRecords(good).error, "");
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    EXPECT_NE(ReadRecords(bad).error, "") << "flipped byte " << i << " went unnoticed";
  }
  std::string bad = good;
  bad[0] ^= 1;  // the first record's length
  EXPECT_EQ(ReadRecords(bad).error, "length CRC mismatch at offset 0");
  bad = good;
  bad[12] ^= 1;  // the first byte of the first event
  EXPECT_EQ(ReadRecords(bad).error, "data CRC mismatch at offset 0");
  bad = good;
  bad.back() ^= 1;  // the last record's data CRC
  EXPECT_NE(ReadRecords(bad).error.find("data CRC mismatch"), std::string::npos);
  EXPECT_EQ(ReadRecords(good.substr(0, good.size() - 1)).error.find("truncated"), 0u);
}

TEST(TensorBoardWriterTest, WritersNeverShareAFile) {
  const fs::path dir = FreshTestDirectory();
  std::unique_ptr<TensorBoardWriter> first = OpenOrDie(dir);
  std::unique_ptr<TensorBoardWriter> second = OpenOrDie(dir);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first->path(), second->path());
  ASSERT_TRUE(first->AddScalar("a", 1, 1.0, 1.0).ok());
  ASSERT_TRUE(second->AddScalar("b", 1, 2.0, 1.0).ok());
  first.reset();  // the destructor closes
  ASSERT_TRUE(second->Close().ok());
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::vector<Event> events;
    EXPECT_TRUE(ReadEvents(entry.path(), &events));
    EXPECT_EQ(events.size(), 2u);
  }
}

TEST(TensorBoardWriterTest, OpenUnderARegularFileIsAnIOError) {
  const fs::path file = FreshTestDirectory() / "not-a-directory";
  std::ofstream(file) << "plain file\n";
  for (const fs::path& directory : {file / "logs", file}) {
    StatusOr<std::unique_ptr<TensorBoardWriter>> writer = TensorBoardWriter::Open(directory.string());
    ASSERT_FALSE(writer.ok()) << directory;
    EXPECT_EQ(writer.status().code(), Status::Code::kIOError) << writer.status().ToString();
    EXPECT_NE(writer.status().message().find(directory.string()), std::string::npos) << writer.status().ToString();
  }
  EXPECT_EQ(TensorBoardWriter::Open("").status().code(), Status::Code::kInvalidArgument);
}

TEST(TensorBoardWriterTest, CloseIsIdempotentAndAddAfterCloseFails) {
  std::unique_ptr<TensorBoardWriter> writer = OpenOrDie(FreshTestDirectory());
  ASSERT_NE(writer, nullptr);
  EXPECT_TRUE(writer->Flush().ok());
  EXPECT_TRUE(writer->Close().ok());
  EXPECT_TRUE(writer->Close().ok());
  EXPECT_TRUE(writer->Flush().ok());
  const Status late = writer->AddScalar("loss", 1, 1.0);
  EXPECT_EQ(late.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(late.message().find(writer->path()), std::string::npos) << late.ToString();
  std::vector<Event> events;
  ASSERT_TRUE(ReadEvents(writer->path(), &events));
  EXPECT_EQ(events.size(), 1u);  // only the file_version record
}

}  // namespace
}  // namespace dtlab
