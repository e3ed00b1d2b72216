#include "sim/comm/faults.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>
#include <set>
#include <sstream>

#include "core/checked_number.h"
#include "core/enum_names.h"
#include "core/text.h"

namespace dtlab {
namespace {

constexpr NameTable<FaultKind, 6> kKinds = {{
    {"throw", FaultKind::kThrow},
    {"die", FaultKind::kDie},
    {"straggler", FaultKind::kStraggler},
    {"drop", FaultKind::kDrop},
    {"corrupt", FaultKind::kCorrupt},
    {"nan", FaultKind::kNonFinite},
}};

// The keys each kind takes (replica and step: all of them).
std::set<std::string> KeysOf(FaultKind kind) {
  switch (kind) {
    case FaultKind::kThrow:
      return {"replica", "step", "layer"};
    case FaultKind::kDie:
      return {"replica", "step"};
    case FaultKind::kStraggler:
      return {"replica", "step", "seconds"};
    case FaultKind::kDrop:
    case FaultKind::kCorrupt:
      return {"replica", "step", "to", "phase"};
    case FaultKind::kNonFinite:
      return {"replica", "step", "variable", "value"};
  }
  return {};
}

}  // namespace

StatusOr<FaultSpec> ParseFaultSpec(std::string_view text) {
  const std::string spec(text);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("fault '" + spec + "': " + why +
                                   " (write KIND:replica=R,step=K[,...] with KIND one of throw, die, straggler, drop, "
                                   "corrupt, nan; see docs/reliability.md)");
  };
  const auto colon = spec.find(':');
  auto kind = ParseEnumName(spec.substr(0, colon), kKinds, "fault kind");
  if (!kind.ok()) return bad(kind.status().message());
  FaultSpec fault;
  fault.kind = *kind;
  const std::set<std::string> allowed = KeysOf(fault.kind);
  std::set<std::string> seen;
  std::stringstream items(colon == std::string::npos ? "" : spec.substr(colon + 1));
  for (std::string item; std::getline(items, item, ',');) {
    const auto equals = item.find('=');
    if (equals == std::string::npos) return bad("'" + item + "' is not key=value");
    const std::string key = item.substr(0, equals), value = item.substr(equals + 1);
    if (!allowed.count(key)) {
      return bad("unknown key '" + key + "' for " + std::string(EnumName(fault.kind, kKinds)) +
                 " (allowed: " + JoinText(allowed, ", ") + ")");
    }
    if (!seen.insert(key).second) return bad("'" + key + "' given twice");
    // Each field parsed into its real type with its range (never int64 then cast).
    auto integer = [&](auto& out, auto min) -> Status {
      using Int = std::remove_reference_t<decltype(out)>;
      auto parsed = ParseInteger<Int>(value, key, static_cast<Int>(min), std::numeric_limits<Int>::max());
      if (!parsed.ok()) return bad(parsed.status().message());
      out = *parsed;
      return Status::Ok();
    };
    if (key == "replica") {
      DTLAB_RETURN_IF_ERROR(integer(fault.replica, 0));
    } else if (key == "to") {
      DTLAB_RETURN_IF_ERROR(integer(fault.to, 0));
    } else if (key == "step") {
      DTLAB_RETURN_IF_ERROR(integer(fault.step, 1));
    } else if (key == "phase") {
      DTLAB_RETURN_IF_ERROR(integer(fault.phase, 1));
    } else if (key == "seconds") {
      char* end = nullptr;
      fault.seconds = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(fault.seconds > 0) || !std::isfinite(fault.seconds))
        return bad("seconds must be a positive number, got '" + value + "'");
    } else if (key == "layer") {
      fault.layer = value;
    } else if (key == "variable") {
      fault.variable = value;
    } else if (key == "value") {
      if (value != "nan" && value != "inf") return bad("value must be nan or inf, got '" + value + "'");
      fault.infinity = value == "inf";
    }
  }
  if (!seen.count("replica") || !seen.count("step")) return bad("replica and step are required");
  if (fault.kind == FaultKind::kStraggler && !seen.count("seconds")) return bad("a straggler needs seconds=S");
  return fault;
}

std::string FaultSpecText(const FaultSpec& fault) {
  std::string text = std::string(EnumName(fault.kind, kKinds)) + ":replica=" + std::to_string(fault.replica) +
                     ",step=" + std::to_string(fault.step);
  if (!fault.layer.empty()) text += ",layer=" + fault.layer;
  if (fault.kind == FaultKind::kStraggler) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", fault.seconds);
    text += ",seconds=";
    text += seconds;
  }
  if (fault.to >= 0) text += ",to=" + std::to_string(fault.to);
  if (fault.phase > 0) text += ",phase=" + std::to_string(fault.phase);
  if (!fault.variable.empty()) text += ",variable=" + fault.variable;
  if (fault.infinity) text += ",value=inf";
  return text;
}

void MessageFaults::Fail(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure.empty()) failure = std::move(what);
}

}  // namespace dtlab
