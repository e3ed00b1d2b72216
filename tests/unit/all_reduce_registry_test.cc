// The registry of all-reduce algorithms (sim/comm/all_reduce_registry.h): every
// algorithm is found by each of its names, an unknown name lists the valid ones,
// the old name "tree" is an alias of halving_doubling that prints as "tree", and
// every algorithm moves the same bits and messages as before it had its own file.
#include "sim/comm/all_reduce_registry.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/comm/collectives.h"

namespace dtlab {
namespace {

// Digest of every registered all-reduce's bits and messages on a few shapes.
std::uint64_t Fnv(std::uint64_t h, const void* data, std::size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
std::uint64_t SplitMix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
template <typename T>
T RandomValue(std::uint64_t& s) {
  const std::uint64_t bits = SplitMix(s);
  if constexpr (std::is_floating_point_v<T>) {
    // Mixed magnitudes, so that sums round and the order of addition shows.
    return std::ldexp(static_cast<T>(bits % 1000003) / T(1000003) - T(0.5), static_cast<int>(bits >> 58) - 16);
  } else {
    return static_cast<T>(static_cast<std::int64_t>(bits >> 13) - (std::int64_t{1} << 50));
  }
}
template <typename T>
std::uint64_t DigestOneType(AllReduceAlgorithm algorithm, std::uint64_t h) {
  for (std::int32_t n : {2, 3, 5, 8, 13})
    for (std::int64_t count : {1, 7, 1000, 4099})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
        if (op == ReduceOp::kMean && !std::is_floating_point_v<T>) continue;
        std::uint64_t seed = static_cast<std::uint64_t>(n * 100003 + count);
        std::vector<std::vector<T>> buffers(n, std::vector<T>(static_cast<std::size_t>(count)));
        for (auto& b : buffers)
          for (auto& x : b) x = RandomValue<T>(seed);
        std::vector<std::span<T>> spans(buffers.begin(), buffers.end());
        MessageLog log;
        CollectiveOptions options;
        options.algorithm = algorithm;
        options.replicas_per_worker = n % 2 == 0 ? 2 : 0;
        options.log = &log;
        AllReduce<T>(std::span<const std::span<T>>(spans), op, options);
        for (const auto& b : buffers) h = Fnv(h, b.data(), b.size() * sizeof(T));
        for (const Message& m : log.collectives().at(0).messages) {
          const std::int64_t fields[] = {m.phase, m.sender, m.receiver, m.bytes};
          h = Fnv(h, fields, sizeof fields);
        }
      }
  return h;
}
std::uint64_t Digest(AllReduceAlgorithm algorithm) {
  std::uint64_t h = 14695981039346656037ull;
  h = DigestOneType<float>(algorithm, h);
  h = DigestOneType<double>(algorithm, h);
  return DigestOneType<std::int64_t>(algorithm, h);
}

// The message log's record of one SUM all-reduce of `n` buffers of `count` ones.
CollectiveRecord RecordOfOnes(AllReduceAlgorithm algorithm, std::int32_t n, std::int64_t count) {
  std::vector<std::vector<double>> buffers(n, std::vector<double>(static_cast<std::size_t>(count), 1.0));
  std::vector<std::span<double>> spans(buffers.begin(), buffers.end());
  MessageLog log;
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.log = &log;
  AllReduce<double>(std::span<const std::span<double>>(spans), ReduceOp::kSum, options);
  EXPECT_EQ(log.collectives().size(), 1u);
  return log.collectives().at(0);
}

TEST(AllReduceRegistry, EveryAlgorithmIsFoundByEachOfItsNamesInAnyCase) {
  std::set<std::string> names;
  for (const AllReduceAlgorithm algorithm : kAllReduceAlgorithms) {
    const AllReduceAlgorithmInfo& info = algorithm.info();
    ASSERT_FALSE(info.name.empty());
    ASSERT_NE(info.schedule, nullptr) << info.name;
    ASSERT_NE(info.log_messages, nullptr) << info.name;
    EXPECT_EQ(algorithm.name(), info.name);
    std::vector<std::string_view> spellings = {info.name};
    if (!info.alias.empty()) spellings.push_back(info.alias);
    for (const std::string_view spelling : spellings) {
      EXPECT_TRUE(names.insert(std::string(spelling)).second) << "two algorithms are named " << spelling;
      std::string upper(spelling);
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      for (const std::string& text : {std::string(spelling), upper}) {
        const StatusOr<AllReduceAlgorithm> parsed = ParseAllReduceAlgorithm(text);
        ASSERT_TRUE(parsed.ok()) << text;
        EXPECT_EQ(*parsed, algorithm) << text;
        EXPECT_EQ(parsed->name(), spelling) << text;  // the registry's spelling, not the text's case
        EXPECT_EQ(AllReduceAlgorithmName(*parsed), spelling);
      }
    }
  }
  // The built-in names (a new algorithm adds its own without touching this test).
  for (const char* name : {"ring", "halving_doubling", "tree", "naive", "hierarchical", "direct"})
    EXPECT_EQ(names.count(name), 1u) << name;
}

TEST(AllReduceRegistry, AnUnknownNameListsTheValidOnes) {
  for (const char* bad : {"butterfly", "", "ring ", "halving-doubling", "rabenseifner"}) {
    const StatusOr<AllReduceAlgorithm> parsed = ParseAllReduceAlgorithm(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), "unknown all-reduce algorithm '" + std::string(bad) +
                                             "' (expected one of: " + AllReduceAlgorithmNames() + ")");
  }
  // Registry order, the alias beside its algorithm; help text joins the last two with "or".
  const std::string listed = AllReduceAlgorithmNames(), help = AllReduceAlgorithmNames(" or ");
  EXPECT_EQ(listed.rfind("ring, halving_doubling (alias tree), naive, hierarchical, direct", 0), 0u) << listed;
  EXPECT_EQ(help.rfind("ring, halving_doubling (alias tree), naive, hierarchical", 0), 0u) << help;
  const AllReduceAlgorithmInfo& info = kAllReduceAlgorithms.back().info();
  std::string last(info.name);
  if (!info.alias.empty()) last += " (alias " + std::string(info.alias) + ")";
  EXPECT_TRUE(help.ends_with(" or " + last)) << help;
  EXPECT_EQ(help.substr(0, help.size() - last.size() - 4), listed.substr(0, listed.size() - last.size() - 2));
}

TEST(AllReduceRegistry, TreeIsHalvingDoublingByItsOldName) {
  const StatusOr<AllReduceAlgorithm> tree = ParseAllReduceAlgorithm("tree");
  const StatusOr<AllReduceAlgorithm> real = ParseAllReduceAlgorithm("halving_doubling");
  ASSERT_TRUE(tree.ok() && real.ok());
  EXPECT_EQ(*tree, *real);
  EXPECT_EQ(*tree, AllReduceAlgorithm::kTree);
  EXPECT_EQ(*real, AllReduceAlgorithm::kHalvingDoubling);
  EXPECT_EQ(&tree->info(), &real->info());
  EXPECT_EQ(tree->name(), "tree");
  EXPECT_EQ(real->name(), "halving_doubling");
  EXPECT_EQ(Digest(*tree), Digest(*real));
  // The message log names the collective by the name the run chose.
  for (const AllReduceAlgorithm algorithm : {*tree, *real})
    EXPECT_EQ(RecordOfOnes(algorithm, 4, 8).name, "all_reduce/" + std::string(algorithm.name()));
}

TEST(AllReduceRegistry, TheDefaultIsTheRing) {
  EXPECT_EQ(AllReduceAlgorithm(), AllReduceAlgorithm::kRing);
  EXPECT_EQ(CollectiveOptions{}.algorithm.name(), "ring");
  EXPECT_EQ(kAllReduceAlgorithms.front(), AllReduceAlgorithm::kRing);
}

// Each built-in algorithm's digest of its output bits (float and double, SUM and MEAN; int64
// SUM) and of its messages (phase, sender, receiver, bytes) over N in {2, 3, 5, 8,
// 13} and 1, 7, 1000 and 4099 elements, taken from the collectives of one file
// with an enum switch before each algorithm got its own file.
TEST(AllReduceRegistry, EveryAlgorithmMovesTheSameBitsAndMessagesAsBefore) {
  const std::pair<const char*, std::uint64_t> before[] = {
      {"ring", 0xb85036cf308b0eccull},   {"halving_doubling", 0xd1698bec2b1da351ull},
      {"naive", 0x1eb31d447afb119full},  {"hierarchical", 0x116a0572b91e4064ull},
      {"direct", 0x29e13a4e7d70a80eull},
  };
  for (const auto& [name, digest] : before) {
    const StatusOr<AllReduceAlgorithm> algorithm = ParseAllReduceAlgorithm(name);
    ASSERT_TRUE(algorithm.ok()) << name;
    EXPECT_EQ(Digest(*algorithm), digest) << name;
  }
}

// The memory estimate's message-log term comes from each algorithm's log_messages,
// which bounds what the algorithm really records.
TEST(AllReduceRegistry, LogMessagesBoundsTheMessagesRecorded) {
  for (const AllReduceAlgorithm algorithm : kAllReduceAlgorithms)
    for (std::int32_t n : {2, 3, 4, 7, 8})
      EXPECT_LE(static_cast<double>(RecordOfOnes(algorithm, n, 64).messages.size()),
                algorithm.info().log_messages(static_cast<double>(n)))
          << algorithm.name() << " N=" << n;
}

}  // namespace
}  // namespace dtlab
