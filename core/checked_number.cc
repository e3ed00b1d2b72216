#include "core/checked_number.h"

#include <sstream>

namespace dtlab {

Status CheckRelativeTolerance(double value, std::string_view what) {
  if (std::isfinite(value) && value >= 0) return Status::Ok();
  std::ostringstream got;
  got << value;
  return Status::InvalidArgument(std::string(what) +
                                 " must be a non-negative number (a relative error: 0.05 allows 5%), got " + got.str());
}

}  // namespace dtlab
