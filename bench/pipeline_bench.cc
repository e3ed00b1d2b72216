// Cost of one epoch of the input pipeline (core/dataset.h) over Fashion-MNIST's
// 60,000 indices: shuffle with a full buffer then batch(64), as the seed model's
// training reads it, and the shuffle alone. The unit tests check what these
// epochs contain (tests/unit/dataset_test.cc); their time is measured here.
//
// Run: build/release/bench/pipeline_bench
#include <benchmark/benchmark.h>

#include <cstdint>

#include "core/dataset.h"

namespace dtlab {
namespace {

constexpr std::int64_t kExamples = 60000;

void BM_PipelineEpoch(benchmark::State& state) {
  const std::int64_t batch = state.range(0);
  Pipeline pipeline(kExamples);
  if (!pipeline.Shuffle(kExamples, 1).ok()) state.SkipWithError("Shuffle refused");
  if (batch > 0 && !pipeline.Batch(batch).ok()) state.SkipWithError("Batch refused");
  std::int64_t epoch = 0;
  for (auto _ : state) benchmark::DoNotOptimize(pipeline.Iterate(epoch++));
  state.SetItemsProcessed(state.iterations() * kExamples);
}
// 64: shuffle(60000).batch(64); 0: shuffle(60000) alone.
BENCHMARK(BM_PipelineEpoch)->Arg(64)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dtlab

BENCHMARK_MAIN();
