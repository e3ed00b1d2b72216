// An all-reduce drawn step by step with the actual chunks: the real schedule of
// sim/comm/collectives.h (ScheduleAllReduce) runs over a transport that records, phase by
// phase, which replica sends which elements to which, and every buffer after the
// phase. Lessons show it; the scenario check `all_reduce` verifies the result.
#pragma once

#include <cstdint>
#include <string>

#include "sim/comm/collectives.h"

namespace dtlab {

struct AllReduceDrawing {
  std::string text;      // the drawing, one line per replica per phase
  bool correct = false;  // every replica ends with the sum of all inputs
  std::int32_t phases = 0;
  std::int64_t messages = 0;
};

/// Replica r starts with the values 10 * (r + 1) + i, i = 0 .. count-1 (integers,
/// so every order gives the exact sum). REQUIRES: 1 <= replicas <= 16, count <= 64.
AllReduceDrawing DrawAllReduce(std::int32_t replicas, AllReduceAlgorithm algorithm, std::int64_t count,
                               std::int32_t replicas_per_worker = 0);

}  // namespace dtlab
