#include "core/half_precision.h"

namespace dtlab {

std::string_view ComputeTypeName(ComputeType type) {
  switch (type) {
    case ComputeType::kFloat32:
      return "float32";
    case ComputeType::kFloat16:
      return "float16";
    case ComputeType::kBFloat16:
      return "bfloat16";
  }
  return "float32";
}

void RoundToComputeType(std::span<float> values, ComputeType type) {
  if (type == ComputeType::kFloat32) return;
  for (float& v : values) v = RoundToComputeType(v, type);
}

}  // namespace dtlab
