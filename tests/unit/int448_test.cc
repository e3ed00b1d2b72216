// Int448 (sim/comm/int448.h): packing eight signed 56-bit fields, reading them back,
// and sums that carry between limbs, alone and through every all-reduce schedule.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sim/comm/all_reduce_registry.h"
#include "sim/comm/collectives.h"
#include "sim/comm/int448.h"

namespace dtlab {
namespace {

using Fields = std::array<std::int64_t, Int448::kFields>;
constexpr std::int64_t kFieldMax = (std::int64_t{1} << 55) - 1;  // fields lie in [-2^55, 2^55)

Fields Unpacked(const Int448& x) {
  Fields f;
  UnpackFields(x, f.data());
  return f;
}

TEST(Int448, PackedFieldsReadBackAtTheEdgesOfTheirRange) {
  const std::vector<Fields> cases = {
      {0, 0, 0, 0, 0, 0, 0, 0},
      {-1, -1, -1, -1, -1, -1, -1, -1},
      {kFieldMax, -kFieldMax - 1, kFieldMax, -kFieldMax - 1, kFieldMax, -kFieldMax - 1, kFieldMax, -kFieldMax - 1},
      {-kFieldMax - 1, 0, -1, 1, kFieldMax, 0, 0, -kFieldMax - 1},
      {1, 0, 0, 0, 0, 0, 0, -1},
  };
  for (const Fields& f : cases) EXPECT_EQ(Unpacked(PackFields(f.data())), f);
  // -1 in field 0 alone: every bit of the 448 is set but field 1's borrow cancels it.
  const Int448 minus_one = PackFields(Fields{-1, 0, 0, 0, 0, 0, 0, 0}.data());
  for (const std::uint64_t limb : minus_one.limb) EXPECT_EQ(limb, ~std::uint64_t{0});
}

RC_GTEST_PROP(Int448, PackedFieldsReadBack, ()) {
  Fields f;
  for (std::int64_t& x : f) x = *rc::gen::inRange<std::int64_t>(-kFieldMax - 1, kFieldMax + 1);
  RC_ASSERT(Unpacked(PackFields(f.data())) == f);
}

// The sum of packed fields is the packing of the fields' sums wherever those stay in
// range: carries cross limbs (an int64 sum limb by limb would drop them).
RC_GTEST_PROP(Int448, SumsCarryBetweenLimbs, ()) {
  const int n = *rc::gen::inRange(1, 300);
  const std::int64_t limit = (kFieldMax + 1) / n;  // |a field| < 2^55 / n: its sum stays in range
  Int448 sum{};
  Fields expected{};
  for (int r = 0; r < n; ++r) {
    Fields f;
    for (std::size_t k = 0; k < f.size(); ++k) {
      f[k] = *rc::gen::inRange<std::int64_t>(-limit + 1, limit);
      expected[k] += f[k];
    }
    sum += PackFields(f.data());
  }
  RC_ASSERT(Unpacked(sum) == expected);
}

// Biased packing (what the compact all-reduce sends): each group is PackFields's
// plus H = SumBias(0), in vectors and without, and a sum of n such groups reads
// back with SumBias(n). Runs
// of 1 to 5 groups, fields at the edges of their range half the time.
RC_GTEST_PROP(Int448, BiasedSumsReadBack, ()) {
  const int n = *rc::gen::inRange(1, 300);
  const auto groups = static_cast<std::size_t>(*rc::gen::inRange(1, 6));
  const std::int64_t limit = (kFieldMax + 1) / n;
  const bool edges = *rc::gen::arbitrary<bool>();
  std::vector<Int448> sum(groups, Int448{});
  std::vector<Fields> expected(groups, Fields{});
  for (int r = 0; r < n; ++r) {
    std::vector<std::int64_t> fields(groups * Int448::kFields);
    for (std::size_t k = 0; k < fields.size(); ++k) {
      fields[k] = edges ? *rc::gen::element(-limit, limit - 1, std::int64_t{0}, std::int64_t{-1})
                        : *rc::gen::inRange<std::int64_t>(-limit, limit);
      expected[k / Int448::kFields][k % Int448::kFields] += fields[k];
    }
    std::vector<Int448> packed(groups), portable(groups);
    PackBiasedFields(fields.data(), groups, packed.data());
    int448_internal::PackBiasedFieldsPortable(fields.data(), 0, groups, portable.data());  // what non-AVX2 builds run
    for (std::size_t g = 0; g < groups; ++g) {
      RC_ASSERT(packed[g] == PackFields(fields.data() + g * Int448::kFields) + SumBias(0));
      RC_ASSERT(portable[g] == packed[g]);
      sum[g] += packed[g];
    }
  }
  for (std::size_t g = 0; g < groups; ++g) {
    Fields f;
    UnpackFields(sum[g], f.data(), SumBias(n));
    RC_ASSERT(f == expected[g]);
  }
}

// The AVX-512 forms (where the build has them) against the scalar ones, for any
// limbs and any bias: limbs of all ones, zero or random, so that the carries of the
// bias's sum ripple across lanes.
RC_GTEST_PROP(Int448, VectorFormsMatchTheScalarOnes, ()) {
#if defined(__AVX512F__)
  auto limbs = [] {
    Int448 x;
    for (Int448::Limb& limb : x.limb)
      limb = *rc::gen::oneOf(rc::gen::just(Int448::Limb{0}), rc::gen::just(~Int448::Limb{0}),
                             rc::gen::arbitrary<Int448::Limb>());
    return x;
  };
  const Int448 x = limbs();
  const Int448 bias = *rc::gen::arbitrary<bool>() ? limbs() : SumBias(*rc::gen::inRange<std::int64_t>(0, 1 << 20));
  Fields scalar, vector;
  UnpackFields(x, scalar.data(), bias);
  _mm512_storeu_si512(vector.data(), UnpackFieldsVector(x, LimbsVector(bias)));
  RC_ASSERT(vector == scalar);
  Fields f;
  for (std::int64_t& field : f)
    field = *rc::gen::oneOf(rc::gen::element(-kFieldMax - 1, kFieldMax, std::int64_t{0}, std::int64_t{-1}),
                            rc::gen::inRange<std::int64_t>(-kFieldMax - 1, kFieldMax + 1));
  std::array<Int448, 2> packed{}, expected{};  // the second group must stay untouched
  packed[1].limb.fill(~Int448::Limb{0});
  expected[1] = packed[1];
  PackBiasedFields(f.data(), 1, expected.data());
  PackBiasedFieldsVector(_mm512_loadu_si512(f.data()), packed[0]);
  RC_ASSERT(packed == expected);
#else
  RC_SUCCEED("this build has no AVX-512");
#endif
}

TEST(Int448, ALimbCarryIsNotLost) {
  // Field 1 straddles limbs 0 and 1: its low byte is limb 0's top byte, 0xff in a
  // (2^55 - 1) and 0x01 in b (-(2^55 - 1) modulo 2^56). Their sum carries into limb 1,
  // where the rest of field 1 must cancel it.
  const Fields a{std::int64_t{1} << 54, kFieldMax, 0, 0, 0, 0, 0, 0};
  const Fields b{(std::int64_t{1} << 54) - 1, -kFieldMax, 0, 0, 0, 0, 0, 0};
  const Fields sum = Unpacked(PackFields(a.data()) + PackFields(b.data()));
  EXPECT_EQ(sum, (Fields{kFieldMax, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(Int448, EveryAllReduceScheduleSumsGroupsExactly) {
  std::mt19937_64 rng(7);
  for (const AllReduceAlgorithm algorithm : kAllReduceAlgorithms) {
    for (const int n : {2, 3, 4, 8}) {
      const std::int64_t count = 37;  // groups: not a multiple of any chunking
      const std::int64_t limit = (kFieldMax + 1) / n;
      std::uniform_int_distribution<std::int64_t> field(-limit + 1, limit - 1);
      std::vector<std::vector<Int448>> buffers(static_cast<std::size_t>(n), std::vector<Int448>(count));
      std::vector<Fields> expected(static_cast<std::size_t>(count), Fields{});
      for (auto& buffer : buffers)
        for (std::int64_t g = 0; g < count; ++g) {
          Fields f;
          for (std::size_t k = 0; k < f.size(); ++k) {
            f[k] = field(rng);
            expected[static_cast<std::size_t>(g)][k] += f[k];
          }
          buffer[static_cast<std::size_t>(g)] = PackFields(f.data());
        }
      std::vector<std::span<Int448>> spans(buffers.begin(), buffers.end());
      CollectiveOptions options;
      options.algorithm = algorithm;
      options.replicas_per_worker = n % 2 == 0 ? 2 : 0;
      AllReduce<Int448>(spans, ReduceOp::kSum, options);
      for (int r = 0; r < n; ++r)
        for (std::int64_t g = 0; g < count; ++g)
          ASSERT_EQ(Unpacked(buffers[static_cast<std::size_t>(r)][static_cast<std::size_t>(g)]),
                    expected[static_cast<std::size_t>(g)])
              << AllReduceAlgorithmName(algorithm) << ", " << n << " replicas, replica " << r << ", group " << g;
    }
  }
}

}  // namespace
}  // namespace dtlab
