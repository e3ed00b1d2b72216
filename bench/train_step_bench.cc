// Micro-benchmarks of the training step of the built-in models (forward + backward
// of one batch through BatchRunner on oneTBB). Run: build/release/bench/train_step_bench
// The end-to-end epoch comparison with PyTorch is bench/compare_torch.sh.
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <numeric>

#include "core/mnist.h"
#include "core/model.h"
#include "core/rng.h"
#include "sim/compute/batch_runner.h"
#include "sim/engines/cluster.h"

namespace dtlab {
namespace {

void BM_TrainStep(benchmark::State& state, const char* model_name) {
  const std::int64_t batch = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const std::int64_t chunk = state.range(2);
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  auto model = std::move(MakeModel<float>(model_name, {28, 28, 1}, 10)).value();
  ParameterList<float> params = model->InitialParameters(1), grads = model->ZeroParameters();
  Tensor<float> images({batch, 28, 28, 1});
  CounterRng rng(1, RngPurpose::kTest, 0);
  for (std::int64_t i = 0; i < images.size(); ++i) images[i] = rng.UniformFloat();
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch)), predictions(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>(i % 10);
  std::vector<float> coefficients(labels.size(), 1.0f / static_cast<float>(batch)), losses(labels.size());
  BatchRunner runner(*model, chunk);
  for (auto _ : state) {
    runner.ForwardBackward(params, images, labels, coefficients, losses, predictions, grads);
    benchmark::DoNotOptimize(grads[0].data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

// Args: batch, threads, chunk size (examples per task).
BENCHMARK_CAPTURE(BM_TrainStep, seed_cnn, "seed-cnn")
    ->ArgsProduct({{64, 256}, {1, 2}, {4, 8, 16, 32}})
    ->ArgNames({"batch", "threads", "chunk"})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_TrainStep, mnist_cnn, "mnist-cnn")->Args({64, 2, 16})->UseRealTime();

// A whole training step (gather, forward, backward, loss, regularization, Adam) of
// seed-cnn on one device, fast versus exact mode (docs/performance.md, issue 4).
// Args: math (0 fast, 1 exact), batch, threads.
void BM_OneDeviceStep(benchmark::State& state) {
  const MathMode math = state.range(0) == 0 ? MathMode::kFast : MathMode::kExact;
  const std::int64_t batch = state.range(1);
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(state.range(2)));
  const ImageDataset data = MakeSyntheticDataset(batch * 8, 28, 28, 10, 3);
  auto model = std::move(MakeModel<float>("seed-cnn", {28, 28, 1}, 10)).value();
  ClusterConfig config;
  config.math = math;
  auto cluster = std::move(Cluster::Create(*model, config, "adam", {}, model->InitialParameters(1), 16)).value();
  std::vector<std::vector<std::int64_t>> steps;
  for (std::int64_t s = 0; s < 8; ++s) {
    steps.emplace_back(static_cast<std::size_t>(batch));
    std::iota(steps.back().begin(), steps.back().end(), s * batch);
  }
  std::int64_t step = 0;
  for (auto _ : state) {
    const auto& indices = steps[static_cast<std::size_t>(step % 8)];
    auto result = cluster->TrainStep(data, {indices}, batch, 1e-3f, step);
    benchmark::DoNotOptimize(result);
    ++step;
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_OneDeviceStep)
    ->ArgsProduct({{0, 1}, {64, 256}, {1, 2}})
    ->ArgNames({"exact", "batch", "threads"})
    ->UseRealTime();

}  // namespace
}  // namespace dtlab

BENCHMARK_MAIN();
