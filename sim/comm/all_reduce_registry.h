// The registry of all-reduce algorithms: the one list of them, and the value that
// names one (AllReduceAlgorithm) in configurations, scenario files and collectives.
//
// Adding an algorithm: write sim/comm/all_reduce_<name>.cc, which defines an
// AllReduceAlgorithmInfo (sim/comm/all_reduce_algorithm.h), and add its line to
// DTLAB_ALL_REDUCE_ALGORITHMS below. --all-reduce, scenario keys, help text, error
// messages, the message log, the memory estimate, and the tests and benchmarks that
// loop over every algorithm then know it.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "core/status.h"
#include "sim/comm/all_reduce_algorithm.h"

namespace dtlab {

// The registry: one line per algorithm, in the order help text, error messages and
// loops over every algorithm list them. Each line names the AllReduceAlgorithmInfo
// that the algorithm's file defines (the same list-of-names shape as SimGrid's
// COLL_ALLREDUCES).
#define DTLAB_ALL_REDUCE_ALGORITHMS(X) \
  X(kRingAllReduce)                    \
  X(kHalvingDoublingAllReduce)         \
  X(kNaiveAllReduce)                   \
  X(kHierarchicalAllReduce)            \
  X(kDirectAllReduce)                  \
  /* a new algorithm: its line above */

#define DTLAB_DECLARE_ALL_REDUCE_ALGORITHM(info) extern const AllReduceAlgorithmInfo info;
DTLAB_ALL_REDUCE_ALGORITHMS(DTLAB_DECLARE_ALL_REDUCE_ALGORITHM)
#undef DTLAB_DECLARE_ALL_REDUCE_ALGORITHM

/// An all-reduce algorithm of the registry, and the name it was chosen by: a run
/// configured with an alias ("tree") prints the alias wherever it prints the
/// algorithm's name, so its outputs stay what they were. Two values are equal when
/// they are the same algorithm, whatever name chose it. Cheap to copy.
class AllReduceAlgorithm {
 public:
  /// The ring.
  constexpr AllReduceAlgorithm();
  /// `info` by its name, or by its alias if `by_alias` (REQUIRES: info.alias not empty).
  constexpr explicit AllReduceAlgorithm(const AllReduceAlgorithmInfo& info, bool by_alias = false)
      : info_(&info), by_alias_(by_alias) {}

  const AllReduceAlgorithmInfo& info() const { return *info_; }
  /// The name it was chosen by: info().name, or info().alias.
  std::string_view name() const { return by_alias_ ? info_->alias : info_->name; }

  friend constexpr bool operator==(AllReduceAlgorithm a, AllReduceAlgorithm b) { return a.info_ == b.info_; }

  // The built-in algorithms, for code that picks one (defaults, tests). kTree is
  // halving_doubling chosen by its old name.
  static const AllReduceAlgorithm kRing, kHalvingDoubling, kTree, kNaive, kHierarchical, kDirect;

 private:
  const AllReduceAlgorithmInfo* info_;
  bool by_alias_;
};

constexpr AllReduceAlgorithm::AllReduceAlgorithm() : AllReduceAlgorithm(kRingAllReduce) {}
inline constexpr AllReduceAlgorithm AllReduceAlgorithm::kRing{kRingAllReduce};
inline constexpr AllReduceAlgorithm AllReduceAlgorithm::kHalvingDoubling{kHalvingDoublingAllReduce};
inline constexpr AllReduceAlgorithm AllReduceAlgorithm::kTree{kHalvingDoublingAllReduce, true};
inline constexpr AllReduceAlgorithm AllReduceAlgorithm::kNaive{kNaiveAllReduce};
inline constexpr AllReduceAlgorithm AllReduceAlgorithm::kHierarchical{kHierarchicalAllReduce};
inline constexpr AllReduceAlgorithm AllReduceAlgorithm::kDirect{kDirectAllReduce};

/// Every registered algorithm by its name, in registry order (for loops in tests,
/// benchmarks and reports).
#define DTLAB_ALL_REDUCE_ALGORITHM_VALUE(info) AllReduceAlgorithm(info),
inline constexpr std::array kAllReduceAlgorithms = {DTLAB_ALL_REDUCE_ALGORITHMS(DTLAB_ALL_REDUCE_ALGORITHM_VALUE)};
#undef DTLAB_ALL_REDUCE_ALGORITHM_VALUE

/// The algorithm whose name or alias is `name`, ignoring case; otherwise
/// InvalidArgument "unknown all-reduce algorithm '<name>' (expected one of: ...)".
StatusOr<AllReduceAlgorithm> ParseAllReduceAlgorithm(std::string_view name);
/// The name it was chosen by (AllReduceAlgorithm::name).
inline std::string_view AllReduceAlgorithmName(AllReduceAlgorithm algorithm) { return algorithm.name(); }
/// Every name in registry order, an alias in parentheses after its algorithm's name,
/// the last two joined by `last_separator`: with " or ", "ring, halving_doubling
/// (alias tree), naive, hierarchical or direct" (help text); with ", " the list
/// error messages give.
std::string AllReduceAlgorithmNames(std::string_view last_separator = ", ");

}  // namespace dtlab
