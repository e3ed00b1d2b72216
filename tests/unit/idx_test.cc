// Tests of ReadIdxFile: round trips of plain and gzip files and every kind of bad input.
#include "core/idx.h"

#include <gtest/gtest.h>

#include "tests/unit/test_util.h"
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace dtlab {
namespace {

using Bytes = std::vector<std::uint8_t>;

std::string MakeTestDirectory() { return ::dtlab::testing::FreshTestDirectory().string(); }

void WritePlain(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void WriteGzip(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(file), Z_OK);
}

Bytes ReadRaw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An IDX file of unsigned bytes with the given dimensions and the payload
// 0, 1, 2, ... (mod 256).
Bytes MakeIdx(const std::vector<std::uint32_t>& dims) {
  Bytes bytes = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  std::size_t count = 1;
  for (const std::uint32_t dim : dims) {
    bytes.push_back(static_cast<std::uint8_t>(dim >> 24));
    bytes.push_back(static_cast<std::uint8_t>(dim >> 16));
    bytes.push_back(static_cast<std::uint8_t>(dim >> 8));
    bytes.push_back(static_cast<std::uint8_t>(dim));
    count *= dim;
  }
  for (std::size_t i = 0; i < count; ++i) bytes.push_back(static_cast<std::uint8_t>(i * 7 + 3));
  return bytes;
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override { directory_ = MakeTestDirectory(); }
  std::string PathFor(const std::string& name) const { return directory_ + "/" + name; }

  std::string directory_;
};

void ExpectPayload(const IdxArray& array, std::size_t count) {
  ASSERT_EQ(array.values.size(), count);
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_EQ(array.values[i], static_cast<std::uint8_t>(i * 7 + 3)) << i;
  }
}

TEST_F(IdxTest, PlainRoundTrip) {
  const std::string path = PathFor("images-idx3-ubyte");
  WritePlain(path, MakeIdx({5, 3, 4}));
  const StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->dims, (std::vector<std::int64_t>{5, 3, 4}));
  ExpectPayload(*array, 60);
}

TEST_F(IdxTest, GzipRoundTrip) {
  const std::string path = PathFor("images-idx3-ubyte.gz");
  WriteGzip(path, MakeIdx({300, 17, 13}));
  const StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->dims, (std::vector<std::int64_t>{300, 17, 13}));
  ExpectPayload(*array, 300 * 17 * 13);
}

TEST_F(IdxTest, GzipDetectedByMagicNotName) {
  const std::string path = PathFor("labels-no-suffix");
  WriteGzip(path, MakeIdx({10}));
  const StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->dims, (std::vector<std::int64_t>{10}));
  ExpectPayload(*array, 10);
}

TEST_F(IdxTest, ConcatenatedGzipMembersAreOneStream) {
  const Bytes whole = MakeIdx({4, 25});
  const std::string first = PathFor("first.gz");
  const std::string second = PathFor("second.gz");
  WriteGzip(first, Bytes(whole.begin(), whole.begin() + 30));
  WriteGzip(second, Bytes(whole.begin() + 30, whole.end()));
  Bytes joined = ReadRaw(first);
  const Bytes tail = ReadRaw(second);
  joined.insert(joined.end(), tail.begin(), tail.end());
  const std::string path = PathFor("joined.gz");
  WritePlain(path, joined);
  const StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  ExpectPayload(*array, 100);
}

TEST_F(IdxTest, OneToFourDimensions) {
  for (const auto& dims : std::vector<std::vector<std::uint32_t>>{{7}, {2, 3}, {2, 3, 4}, {2, 1, 3, 2}}) {
    const std::string path = PathFor("dims" + std::to_string(dims.size()));
    WritePlain(path, MakeIdx(dims));
    const StatusOr<IdxArray> array = ReadIdxFile(path);
    ASSERT_TRUE(array.ok()) << array.status().ToString();
    EXPECT_EQ(array->dims.size(), dims.size());
  }
}

TEST_F(IdxTest, MissingFileIsNotFound) {
  const std::string path = PathFor("does-not-exist");
  const StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(array.status().message().rfind(path, 0), 0u) << array.status().message();
}

// Expects `bytes`, written plain, to fail with Corruption and a message that starts
// with the path and contains every one of `words`.
void ExpectCorruption(const std::string& path, const Bytes& bytes, const std::vector<std::string>& words,
                      bool gzip = false) {
  if (gzip) {
    WriteGzip(path, bytes);
  } else {
    WritePlain(path, bytes);
  }
  const StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_FALSE(array.ok()) << path;
  EXPECT_EQ(array.status().code(), Status::Code::kCorruption) << array.status().ToString();
  const std::string& message = array.status().message();
  EXPECT_EQ(message.rfind(path, 0), 0u) << message;
  for (const std::string& word : words) {
    EXPECT_NE(message.find(word), std::string::npos) << "'" << word << "' not in: " << message;
  }
}

TEST_F(IdxTest, WrongMagicNamesTheBytes) {
  Bytes bytes = MakeIdx({3});
  bytes[0] = 0x12;
  bytes[1] = 0x34;
  ExpectCorruption(PathFor("bad-magic"), bytes, {"magic", "0x12 0x34 0x08 0x01"});
}

TEST_F(IdxTest, BadDimensionCountIsCorruption) {
  Bytes bytes = MakeIdx({3});
  bytes[3] = 0;
  ExpectCorruption(PathFor("zero-dims"), bytes, {"magic", "0x00 0x00 0x08 0x00"});
  bytes[3] = 5;
  ExpectCorruption(PathFor("five-dims"), bytes, {"magic", "0x00 0x00 0x08 0x05"});
}

// A header claiming a gigabyte before 5 bytes of data is reported as truncated
// with the bytes actually found; the reader grows the array as data arrives
// instead of allocating what the header claims (fuzz/idx_fuzz.cc found the cost).
TEST_F(IdxTest, HugeClaimedPayloadOnAShortFileIsTruncated) {
  Bytes bytes = {0x00, 0x00, 0x08, 0x02, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x80, 0x00, 1, 2, 3, 4, 5};
  ExpectCorruption(PathFor("huge-claim"), bytes, {"truncated", "1073741824", "found 5"});
}

TEST_F(IdxTest, WrongTypeByteIsUnsupported) {
  Bytes bytes = MakeIdx({3});
  bytes[2] = 0x0d;  // float
  ExpectCorruption(PathFor("float"), bytes, {"unsupported", "0x0d", "0x08"});
}

TEST_F(IdxTest, TruncatedHeader) {
  ExpectCorruption(PathFor("empty"), {}, {"truncated header", "found 0"});
  ExpectCorruption(PathFor("two-bytes"), {0, 0}, {"truncated header"});
  const Bytes bytes = MakeIdx({3, 4, 5});
  ExpectCorruption(PathFor("half-dims"), Bytes(bytes.begin(), bytes.begin() + 9),
                   {"truncated header", "expected 12 bytes of dimensions, found 5"});
}

TEST_F(IdxTest, TruncatedPayload) {
  Bytes bytes = MakeIdx({3, 4, 5});
  bytes.resize(bytes.size() - 7);
  ExpectCorruption(PathFor("short"), bytes, {"truncated: expected 60 bytes of data after the header, found 53"});
  ExpectCorruption(PathFor("short.gz"), bytes, {"truncated: expected 60 bytes of data after the header, found 53"},
                   /*gzip=*/true);
}

TEST_F(IdxTest, TrailingBytes) {
  Bytes bytes = MakeIdx({3, 4});
  bytes.push_back(1);
  bytes.push_back(2);
  ExpectCorruption(PathFor("long"), bytes, {"2 unexpected trailing bytes"});
  ExpectCorruption(PathFor("long.gz"), bytes, {"2 unexpected trailing bytes"}, /*gzip=*/true);
}

TEST_F(IdxTest, ZeroDimension) { ExpectCorruption(PathFor("zero"), MakeIdx({3, 0, 4}), {"dimension 1 is 0"}); }

TEST_F(IdxTest, HugeDimensionsAreRejectedBeforeAllocating) {
  Bytes bytes = MakeIdx({1, 1, 1});
  for (int i = 4; i < 16; ++i) bytes[i] = 0x7f;  // three dimensions of ~2^31
  ExpectCorruption(PathFor("huge"), bytes, {"more than 2147483648 bytes"});
  Bytes negative = MakeIdx({1});
  negative[4] = 0x80;  // 2^31 + 1: would be negative as a signed 32-bit integer
  ExpectCorruption(PathFor("negative"), negative, {"dimension 0"});
}

TEST_F(IdxTest, CorruptedGzipIsCorruption) {
  const std::string good = PathFor("good.gz");
  WriteGzip(good, MakeIdx({100, 10}));
  Bytes compressed = ReadRaw(good);
  ASSERT_GT(compressed.size(), 40u);
  for (std::size_t i = 20; i < compressed.size() - 10; i += 3) compressed[i] ^= 0x5a;
  const std::string path = PathFor("corrupted.gz");
  WritePlain(path, compressed);
  const StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), Status::Code::kCorruption) << array.status().ToString();
  EXPECT_EQ(array.status().message().rfind(path, 0), 0u) << array.status().message();
}

TEST_F(IdxTest, CorruptedGzipChecksumIsCorruption) {
  const std::string good = PathFor("good.gz");
  WriteGzip(good, MakeIdx({100, 10}));
  Bytes compressed = ReadRaw(good);
  compressed[compressed.size() - 6] ^= 0xff;  // inside the CRC-32 of the trailer
  ExpectCorruption(PathFor("bad-crc.gz"), compressed, {"corrupted gzip"});
}

TEST_F(IdxTest, TruncatedGzipStreamIsCorruption) {
  const std::string good = PathFor("good.gz");
  WriteGzip(good, MakeIdx({100, 10}));
  Bytes compressed = ReadRaw(good);
  compressed.resize(compressed.size() / 2);
  ExpectCorruption(PathFor("cut.gz"), compressed, {"corrupted gzip", "ends early"});
}

TEST_F(IdxTest, DirectoryIsAnError) {
  const StatusOr<IdxArray> array = ReadIdxFile(directory_);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().message().rfind(directory_, 0), 0u);
}

}  // namespace
}  // namespace dtlab
