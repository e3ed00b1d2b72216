#include "sim/comm/all_reduce_registry.h"

#include <cctype>

namespace dtlab {
namespace {

bool EqualIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

StatusOr<AllReduceAlgorithm> ParseAllReduceAlgorithm(std::string_view name) {
  for (const AllReduceAlgorithm algorithm : kAllReduceAlgorithms) {
    const AllReduceAlgorithmInfo& info = algorithm.info();
    if (EqualIgnoringCase(info.name, name)) return AllReduceAlgorithm(info);
    if (!info.alias.empty() && EqualIgnoringCase(info.alias, name)) return AllReduceAlgorithm(info, true);
  }
  return Status::InvalidArgument("unknown all-reduce algorithm '" + std::string(name) +
                                 "' (expected one of: " + AllReduceAlgorithmNames() + ")");
}

std::string AllReduceAlgorithmNames(std::string_view last_separator) {
  std::string names;
  for (std::size_t i = 0; i < kAllReduceAlgorithms.size(); ++i) {
    const AllReduceAlgorithmInfo& info = kAllReduceAlgorithms[i].info();
    if (i > 0) names += i + 1 == kAllReduceAlgorithms.size() ? last_separator : ", ";
    names += info.name;
    if (!info.alias.empty()) names += " (alias " + std::string(info.alias) + ")";
  }
  return names;
}

}  // namespace dtlab
