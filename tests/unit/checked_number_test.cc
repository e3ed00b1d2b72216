// The range-checked number helpers (core/checked_number.h) every integer and
// floating-point field goes through: values are checked in their real type, so
// nothing wraps (issue 19).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/checked_number.h"

namespace dtlab {
namespace {

TEST(ParseInteger, AcceptsTheWholeRangeOfTheType) {
  EXPECT_EQ(*ParseInteger<std::int32_t>("2147483647", "replica"), 2147483647);
  EXPECT_EQ(*ParseInteger<std::int32_t>("-2147483648", "x"), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(*ParseInteger<std::int64_t>("9223372036854775807", "step"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(*ParseInteger<std::uint64_t>("18446744073709551615", "seed"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(*ParseInteger<int>("+3", "order"), 3);
}

TEST(ParseInteger, RefusesWhatDoesNotFitInsteadOfWrapping) {
  // The values: each would wrap to a small int32 if parsed as int64 and cast.
  for (const char* text : {"2147483648", "4294967297", "4294967298", "4294967296", "-2147483649"}) {
    auto parsed = ParseInteger<std::int32_t>(text, "replica");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().message(),
              std::string("replica must be an integer in [-2147483648, 2147483647], got '") + text + "'");
  }
  EXPECT_FALSE(ParseInteger<std::int64_t>("9223372036854775808", "step").ok());
  EXPECT_FALSE(ParseInteger<std::uint64_t>("-1", "seed").ok());  // not 2^64-1
}

TEST(ParseInteger, RefusesTextThatIsNotAWholeInteger) {
  for (const char* text : {"", "-", "+", "1x", " 1", "1 ", "1.0", "0x10", "one", "--1", "+-1"})
    EXPECT_FALSE(ParseInteger<std::int64_t>(text, "step").ok()) << "'" << text << "'";
}

TEST(ParseInteger, AppliesTheFieldRange) {
  auto zero_step = ParseInteger<std::int64_t>("0", "step", 1, std::numeric_limits<std::int64_t>::max());
  ASSERT_FALSE(zero_step.ok());
  EXPECT_EQ(zero_step.status().message(), "step must be an integer in [1, 9223372036854775807], got '0'");
  EXPECT_EQ(*ParseInteger<std::int32_t>("7", "phase", 1, 7), 7);
  EXPECT_FALSE(ParseInteger<std::int32_t>("8", "phase", 1, 7).ok());
}

TEST(NarrowInteger, ChecksBeforeNarrowing) {
  EXPECT_EQ(*NarrowInteger<std::int32_t>(4096, "'cluster.replicas'", 1, 4096), 4096);
  auto wraps = NarrowInteger<std::int32_t>(4294967297LL, "'cluster.replicas'", 1, 4096);
  ASSERT_FALSE(wraps.ok());
  EXPECT_EQ(wraps.status().message(), "'cluster.replicas' must be in [1, 4096], got 4294967297");
  EXPECT_FALSE(NarrowInteger<std::uint64_t>(-1, "'run.seed'").ok());
  EXPECT_FALSE(NarrowInteger<std::int32_t>(std::numeric_limits<std::int64_t>::min(), "x").ok());
}

TEST(CheckFinite, RefusesNanAndInfinities) {
  EXPECT_TRUE(CheckFinite(0.5, "--straggler-spread").ok());
  EXPECT_EQ(CheckFinite(INFINITY, "--straggler-spread").message(),
            "--straggler-spread must be a finite number, got inf");
  EXPECT_EQ(CheckFinite(-INFINITY, "x").message(), "x must be a finite number, got -inf");
  EXPECT_EQ(CheckFinite(NAN, "x").message(), "x must be a finite number, got nan");
}

TEST(CheckRelativeTolerance, SharedByScenariosAndLessons) {
  EXPECT_TRUE(CheckRelativeTolerance(0, "'tolerance'").ok());
  EXPECT_TRUE(CheckRelativeTolerance(0.05, "'tolerance'").ok());
  for (const double bad : {-0.1, double{NAN}, double{INFINITY}})
    EXPECT_EQ(CheckRelativeTolerance(bad, "'tolerance'").code(), Status::Code::kInvalidArgument) << bad;
}

TEST(CheckedMultiply, ReportsOverflow) {
  EXPECT_EQ(*CheckedMultiply(64, 4), 256);
  EXPECT_FALSE(CheckedMultiply(std::int64_t{1} << 62, 2).has_value());  // 4611686018427387904 x 2
  EXPECT_FALSE(CheckedMultiply(std::numeric_limits<std::int64_t>::max(), 3).has_value());
}

}  // namespace
}  // namespace dtlab
