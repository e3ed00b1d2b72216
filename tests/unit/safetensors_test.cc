#include "core/safetensors.h"

#include <gtest/gtest.h>

#include "tests/unit/test_util.h"
#include <rapidcheck/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace dtlab {
namespace {

namespace fs = std::filesystem;

std::uint64_t HeaderLength(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return n;
}

// A file with one tensor of every dtype, including awkward values and shapes.
SafetensorsFile MakeSample() {
  SafetensorsFile file;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor<float> weights({2, 3}, {1.5f, -0.0f, nan, inf, -inf, 1e-45f});
  EXPECT_TRUE(file.Add("dense/kernel", weights).ok());
  const std::vector<double> f64 = {3.141592653589793, -2.5e300};
  EXPECT_TRUE(file.Add("f64", std::span<const double>(f64), {2, 1}).ok());
  const std::vector<std::int32_t> i32 = {-1, 0, 2147483647, -2147483647 - 1};
  EXPECT_TRUE(file.Add("i32", std::span<const std::int32_t>(i32), {4}).ok());
  const std::vector<std::int64_t> step = {1234567890123};
  EXPECT_TRUE(file.Add("step", std::span<const std::int64_t>(step), {}).ok());
  const std::vector<std::uint8_t> u8 = {0, 1, 254, 255, 7};
  EXPECT_TRUE(file.Add("bytes", std::span<const std::uint8_t>(u8), {5}).ok());
  EXPECT_TRUE(file.Add("empty", std::span<const float>(), {0, 3}).ok());
  file.metadata["epoch"] = "3";
  file.metadata["note"] = "h\xC3\xA9llo \"quoted\"\n";
  return file;
}

void ExpectSameEntries(const SafetensorsFile& a, const SafetensorsFile& b) {
  ASSERT_EQ(a.entries().size(), b.entries().size());
  for (std::size_t i = 0; i < a.entries().size(); ++i) {
    EXPECT_EQ(a.entries()[i], b.entries()[i]) << "entry " << i << " " << a.entries()[i].name;
  }
}

// Raw safetensors bytes from a header text and a data buffer.
std::string RawFile(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  return out + header + data;
}

void ExpectCorruption(const StatusOr<SafetensorsFile>& result, const std::string& origin, const std::string& needle) {
  ASSERT_FALSE(result.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(result.status().code(), Status::Code::kCorruption) << result.status().ToString();
  EXPECT_EQ(result.status().message().rfind(origin, 0), 0u) << result.status().message();
  EXPECT_NE(result.status().message().find(needle), std::string::npos)
      << "message: " << result.status().message() << "\nexpected: " << needle;
}

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(DTypeSize(DType::kI32), 4u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeSize(DType::kU8), 1u);
  EXPECT_EQ(DTypeName(DType::kF32), "F32");
  EXPECT_EQ(DTypeName(DType::kF64), "F64");
  EXPECT_EQ(DTypeName(DType::kI32), "I32");
  EXPECT_EQ(DTypeName(DType::kI64), "I64");
  EXPECT_EQ(DTypeName(DType::kU8), "U8");
}

TEST(SafetensorsTest, RoundTripsEveryDTypeExactly) {
  const SafetensorsFile original = MakeSample();
  const std::string bytes = SerializeSafetensors(original);
  StatusOr<SafetensorsFile> parsed = ParseSafetensors(bytes, "sample");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ExpectSameEntries(original, *parsed);
  EXPECT_EQ(parsed->metadata.at("epoch"), "3");
  EXPECT_EQ(parsed->metadata.at("note"), original.metadata.at("note"));
  EXPECT_EQ(parsed->metadata.count("dtlab.crc32"), 1u);

  StatusOr<Tensor<float>> weights = parsed->GetF32("dense/kernel");
  ASSERT_TRUE(weights.ok());
  EXPECT_EQ(weights->shape(), (Shape{2, 3}));
  const Tensor<float> expected = original.GetF32("dense/kernel").value();
  EXPECT_EQ(std::memcmp(weights->data(), expected.data(), 6 * sizeof(float)), 0);
  EXPECT_TRUE(std::signbit((*weights)[1]));
  EXPECT_TRUE(std::isnan((*weights)[2]));
  EXPECT_EQ(parsed->GetF64("f64").value(), (std::vector<double>{3.141592653589793, -2.5e300}));
  EXPECT_EQ(parsed->GetI32("i32").value(), (std::vector<std::int32_t>{-1, 0, 2147483647, -2147483647 - 1}));
  EXPECT_EQ(parsed->GetI64("step").value(), (std::vector<std::int64_t>{1234567890123}));
  EXPECT_EQ(parsed->Find("step")->shape, Shape{});
  EXPECT_EQ(parsed->GetU8("bytes").value(), (std::vector<std::uint8_t>{0, 1, 254, 255, 7}));
  EXPECT_EQ(parsed->GetF32("empty").value().shape(), (Shape{0, 3}));
}

TEST(SafetensorsTest, EmptyFileRoundTrips) {
  SafetensorsFile empty;
  StatusOr<SafetensorsFile> parsed = ParseSafetensors(SerializeSafetensors(empty), "empty");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->entries().empty());
}

TEST(SafetensorsTest, SerializationIsDeterministic) {
  const std::string first = SerializeSafetensors(MakeSample());
  const std::string second = SerializeSafetensors(MakeSample());
  EXPECT_EQ(first, second);
  // Parsing and writing again reproduces the bytes too.
  StatusOr<SafetensorsFile> parsed = ParseSafetensors(first, "first");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(SerializeSafetensors(*parsed), first);
}

TEST(SafetensorsTest, HeaderLayoutIsStandardSafetensors) {
  const SafetensorsFile sample = MakeSample();
  const std::string bytes = SerializeSafetensors(sample);
  ASSERT_GE(bytes.size(), 8u);
  const std::uint64_t n = HeaderLength(bytes);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-byte aligned";
  const std::string header_text = bytes.substr(8, n);
  EXPECT_EQ(header_text.front(), '{');  // the Python reader requires this
  const nlohmann::json header = nlohmann::json::parse(header_text);
  ASSERT_TRUE(header.is_object());
  const std::string data = bytes.substr(8 + n);

  std::uint64_t offset = 0;
  for (const TensorEntry& entry : sample.entries()) {
    SCOPED_TRACE(entry.name);
    ASSERT_TRUE(header.contains(entry.name));
    const auto& description = header[entry.name];
    EXPECT_EQ(description["dtype"], std::string(DTypeName(entry.dtype)));
    EXPECT_EQ(description["shape"].get<Shape>(), entry.shape);
    const auto offsets = description["data_offsets"].get<std::vector<std::uint64_t>>();
    ASSERT_EQ(offsets.size(), 2u);
    EXPECT_EQ(offsets[0], offset) << "data buffer follows insertion order";
    EXPECT_EQ(offsets[1], offset + entry.bytes.size());
    EXPECT_EQ(data.substr(offset, entry.bytes.size()), std::string(entry.bytes.begin(), entry.bytes.end()));
    offset += entry.bytes.size();
  }
  EXPECT_EQ(offset, data.size());
  const auto& metadata = header["__metadata__"];
  EXPECT_EQ(metadata["epoch"], "3");
  char expected_crc[9];
  std::snprintf(expected_crc, sizeof(expected_crc), "%08lx",
                crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
  EXPECT_EQ(metadata["dtlab.crc32"], std::string(expected_crc));
  EXPECT_TRUE(metadata["dtlab.header_crc32"].is_string());
}

TEST(SafetensorsTest, AddRejectsBadInput) {
  SafetensorsFile file;
  const std::vector<float> three = {1, 2, 3};
  ASSERT_TRUE(file.Add("x", std::span<const float>(three), {3}).ok());
  Status duplicate = file.Add("x", std::span<const float>(three), {3});
  EXPECT_EQ(duplicate.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(duplicate.message().find("'x'"), std::string::npos);
  EXPECT_EQ(file.Add("y", std::span<const float>(three), {2}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(file.Add("y", std::span<const float>(three), {-1, -3}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(file.Add("", std::span<const float>(three), {3}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(file.Add("__metadata__", std::span<const float>(three), {3}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(file.Add("bad\xFF", std::span<const float>(three), {3}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(file.AddEntry({"z", DType::kI64, {2}, std::vector<std::uint8_t>(8)}).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(file.entries().size(), 1u);
}

TEST(SafetensorsTest, GetReportsMissingAndWrongDType) {
  const SafetensorsFile file = MakeSample();
  StatusOr<Tensor<float>> missing = file.GetF32("nope");
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  EXPECT_EQ(file.GetI64("nope").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(file.GetF32("step").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(file.GetI64("dense/kernel").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(file.GetI32("step").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(file.Find("nope"), nullptr);
  ASSERT_NE(file.Find("i32"), nullptr);
  EXPECT_EQ(file.Find("i32")->dtype, DType::kI32);
}

TEST(SafetensorsTest, RejectsMalformedFiles) {
  const std::string origin = "bad.safetensors";
  const std::string eight(8, 'x');
  struct Case {
    std::string bytes;
    std::string needle;
  };
  std::string huge_length(8, '\0');
  huge_length[4] = 1;  // 2^32
  std::string too_long = RawFile("{}", "");
  too_long[0] = 50;
  const std::vector<Case> cases = {
      {"", "too short"},
      {"1234567", "too short"},
      {huge_length + "{}", "100 MB"},
      {too_long, "exceeds"},
      {RawFile("{not json", ""), "not valid JSON"},
      {RawFile("[1, 2]", ""), "not a JSON object"},
      {RawFile("{\"a\" :{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} \xFF", "1234"), "not valid JSON"},
      {RawFile(R"({"a": 5})", ""), "not a JSON object"},
      // Issue 19: nesting past the format's 3 levels is refused before parsing
      // (100 000 levels overflowed the stack), and so are keys it does not have.
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": [[]]}})", "1234"),
       "nests deeper than 3 levels"},
      {RawFile("{\"a\": {\"extra\": " + std::string(100000, '[') + std::string(100000, ']') + "}}", ""),
       "nests deeper than 3 levels"},
      {RawFile(R"({"__metadata__": {"k": {"deep": "x"}}})", ""), "is not a string"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": 1}})", "1234"),
       "unknown key \"extra\""},
      {RawFile(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", "1234"), "missing \"dtype\""},
      {RawFile(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", "1234"), "missing \"shape\""},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1]}})", "1234"), "missing \"data_offsets\""},
      {RawFile(R"({"a": {"dtype": 1, "shape": [1], "data_offsets": [0, 4]}})", "1234"), "not a string"},
      {RawFile(R"({"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}})", "12"), "unknown dtype"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", "1234"), "not an array"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}})", "1234"), "not an integer"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "1234"), "negative dimension"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", "1234"), "pair"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})", "1234"), "pair"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", "1234"), "end before"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", "1234"), "need 8"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 4]}})", "1234"),
       "too large"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", "1234"), "beyond"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})",
               "123456"),
       "overlaps"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [6, 10]}})",
               "1234567890"),
       "gap of 2"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", "123456"),
       "unused bytes at the end"},
      {RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                   "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
               "1234"),
       "repeats the key"},
      {RawFile(R"({"__metadata__": []})", ""), "\"__metadata__\" is not a JSON object"},
      {RawFile(R"({"__metadata__": {"k": 1}})", ""), "not a string"},
      {RawFile(R"({"__metadata__": {"dtlab.crc32": "xyz"}})", ""), "malformed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    ExpectCorruption(ParseSafetensors(c.bytes, origin), origin, c.needle);
  }
  // Files written by other tools (no dtlab checksums) are accepted.
  StatusOr<SafetensorsFile> plain =
      ParseSafetensors(RawFile(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "\x01\x02"), origin);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->GetU8("a").value(), (std::vector<std::uint8_t>{1, 2}));
}

TEST(SafetensorsTest, ChecksumMismatchIsReported) {
  std::string bytes = SerializeSafetensors(MakeSample());
  bytes.back() ^= 0x01;
  StatusOr<SafetensorsFile> result = ParseSafetensors(bytes, "ckpt-3.safetensors");
  ExpectCorruption(result, "ckpt-3.safetensors", "checksum mismatch: the file is corrupted (stored crc32 ");
  EXPECT_NE(result.status().message().find(", computed "), std::string::npos);
}

TEST(SafetensorsTest, EveryFlippedDataByteIsDetected) {
  const std::string bytes = SerializeSafetensors(MakeSample());
  const std::size_t data_start = 8 + HeaderLength(bytes);
  ASSERT_LT(data_start, bytes.size());
  for (std::size_t position = data_start; position < bytes.size(); ++position) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string mutated = bytes;
      mutated[position] = static_cast<char>(mutated[position] ^ (1 << bit));
      StatusOr<SafetensorsFile> result = ParseSafetensors(mutated, "m");
      ASSERT_FALSE(result.ok()) << "flip at " << position << " bit " << bit;
      EXPECT_EQ(result.status().code(), Status::Code::kCorruption);
      EXPECT_NE(result.status().message().find("checksum mismatch"), std::string::npos);
    }
  }
}

// Parsing `mutated` must fail with Corruption or give back exactly `original`'s tensors.
void ExpectCorruptionOrOriginal(const SafetensorsFile& original, const std::string& mutated) {
  StatusOr<SafetensorsFile> result = ParseSafetensors(mutated, "mutant");
  if (result.ok()) {
    ExpectSameEntries(original, *result);
  } else {
    EXPECT_EQ(result.status().code(), Status::Code::kCorruption);
    EXPECT_EQ(result.status().message().rfind("mutant: ", 0), 0u);
  }
}

TEST(SafetensorsTest, EveryFlippedBitAnywhereIsHarmless) {
  const SafetensorsFile original = MakeSample();
  const std::string bytes = SerializeSafetensors(original);
  for (std::size_t position = 0; position < bytes.size(); ++position) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string mutated = bytes;
      mutated[position] = static_cast<char>(mutated[position] ^ (1 << bit));
      SCOPED_TRACE("flip at " + std::to_string(position) + " bit " + std::to_string(bit));
      ExpectCorruptionOrOriginal(original, mutated);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

RC_GTEST_PROP(SafetensorsProperty, MutatedFileIsCorruptionOrOriginal, ()) {
  SafetensorsFile original;
  const auto weights = *rc::gen::container<std::vector<float>>(6, rc::gen::arbitrary<float>());
  const auto counts = *rc::gen::arbitrary<std::vector<std::int64_t>>();
  const auto raw = *rc::gen::arbitrary<std::vector<std::uint8_t>>();
  RC_ASSERT(original.Add("w", std::span<const float>(weights), {3, 2}).ok());
  RC_ASSERT(
      original.Add("counts", std::span<const std::int64_t>(counts), {static_cast<std::int64_t>(counts.size())}).ok());
  RC_ASSERT(original.Add("raw", std::span<const std::uint8_t>(raw), {static_cast<std::int64_t>(raw.size())}).ok());
  original.metadata["epoch"] = "1";
  const std::string bytes = SerializeSafetensors(original);

  const auto position = *rc::gen::inRange<std::size_t>(0, bytes.size());
  const auto new_value = *rc::gen::suchThat(rc::gen::arbitrary<unsigned char>(), [&](unsigned char v) {
    return v != static_cast<unsigned char>(bytes[position]);
  });
  std::string mutated = bytes;
  mutated[position] = static_cast<char>(new_value);

  StatusOr<SafetensorsFile> result = ParseSafetensors(mutated, "mutant");
  if (result.ok()) {
    RC_ASSERT(result->entries() == original.entries());
  } else {
    RC_ASSERT(result.status().code() == Status::Code::kCorruption);
    RC_ASSERT(result.status().message().rfind("mutant: ", 0) == 0u);
  }
}

TEST(SafetensorsTest, TruncationAtEveryLengthIsCorruption) {
  const std::string bytes = SerializeSafetensors(MakeSample());
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    StatusOr<SafetensorsFile> result = ParseSafetensors(bytes.substr(0, length), "cut");
    ASSERT_FALSE(result.ok()) << "length " << length;
    EXPECT_EQ(result.status().code(), Status::Code::kCorruption) << "length " << length;
    EXPECT_EQ(result.status().message().rfind("cut: ", 0), 0u);
  }
}

TEST(SafetensorsFileIoTest, WriteAndReadBack) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  const std::string path = (dir / "model.safetensors").string();
  const SafetensorsFile sample = MakeSample();
  ASSERT_TRUE(WriteFileAtomically(path, SerializeSafetensors(sample)).ok());
  StatusOr<SafetensorsFile> read = ReadSafetensorsFile(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameEntries(sample, *read);
  // Overwriting replaces the contents and leaves no temporary file.
  SafetensorsFile small;
  const std::vector<std::int32_t> one = {1};
  ASSERT_TRUE(small.Add("one", std::span<const std::int32_t>(one), {1}).ok());
  ASSERT_TRUE(WriteFileAtomically(path, SerializeSafetensors(small)).ok());
  EXPECT_EQ(::dtlab::testing::ReadFileBytes(path), SerializeSafetensors(small));
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(SafetensorsFileIoTest, ReadErrors) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  StatusOr<SafetensorsFile> missing = ReadSafetensorsFile((dir / "absent").string());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  // A directory is not a regular file: refused before reading (core/file_io.h).
  StatusOr<SafetensorsFile> directory = ReadSafetensorsFile(dir.string());
  EXPECT_EQ(directory.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos) << directory.status().message();
  const std::string garbage = (dir / "garbage").string();
  ASSERT_TRUE(WriteFileAtomically(garbage, "not a safetensors file").ok());
  StatusOr<SafetensorsFile> corrupt = ReadSafetensorsFile(garbage);
  EXPECT_EQ(corrupt.status().code(), Status::Code::kCorruption);
  EXPECT_EQ(corrupt.status().message().rfind(garbage, 0), 0u) << corrupt.status().message();
}

TEST(SafetensorsFileIoTest, FailedWriteLeavesNothingBehind) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  const std::string path = (dir / "no-such-dir" / "x.safetensors").string();
  Status status = WriteFileAtomically(path, "abc");
  EXPECT_EQ(status.code(), Status::Code::kIOError);
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(std::strerror(ENOENT)), std::string::npos) << status.message();

  // A directory is never replaced: refused before a temporary file is written.
  const fs::path target = dir / "occupied";
  fs::create_directories(target / "child");
  status = WriteFileAtomically(target.string(), "abc");
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u) << "the temporary file must be removed";
}

}  // namespace
}  // namespace dtlab
