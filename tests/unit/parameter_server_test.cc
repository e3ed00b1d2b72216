// ParameterServerCluster: the asynchronous run equals a sequential replay of the
// same updates (each batch's gradient taken at the version its worker pulled, then
// applied in push order by one optimizer), bit for bit; staleness is bookkept
// right; the interleaving depends only on the seed.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <map>

#include "core/batch.h"
#include "core/loss.h"
#include "sim/engines/parameter_server.h"

namespace dtlab {
namespace {

struct Fixture {
  ImageDataset data = MakeSyntheticDataset(96, 10, 10, 10, 11);
  std::unique_ptr<Sequential<float>> model = std::move(MakeModel<float>("seed-cnn", {10, 10, 1}, 10)).value();
  std::vector<std::vector<std::vector<std::int64_t>>> batches;  // [worker][batch] -> examples
  Fixture() {
    // Three workers with 4, 3 and 5 batches of 8 examples.
    std::int64_t next = 0;
    for (int count : {4, 3, 5}) {
      batches.emplace_back();
      for (int b = 0; b < count; ++b) {
        batches.back().emplace_back();
        for (int i = 0; i < 8; ++i) batches.back().back().push_back(next++);
      }
    }
  }
  std::unique_ptr<ParameterServerCluster> Make(std::uint64_t seed, std::int32_t servers,
                                               MathMode math = MathMode::kFast) const {
    ParameterServerOptions options;
    options.math = math;
    options.workers = 3;
    options.parameter_servers = servers;
    options.seed = seed;
    options.flops_per_example = 1e6;
    return std::move(ParameterServerCluster::Create(*model, options, "adam", {}, model->InitialParameters(5), 16))
        .value();
  }
};

// Exact mode: each update's gradient is the exact one-device gradient of its batch,
// here recomputed from two halves of the batch (another split, another chunk size)
// whose accumulator words are merged.
ParameterList<float> ExactReplayGradient(const Sequential<float>& model, const ParameterList<float>& pulled,
                                         const Tensor<float>& images, std::span<const std::int32_t> labels,
                                         std::span<const float> coefficients) {
  const auto b = static_cast<std::int64_t>(labels.size());
  const auto size = static_cast<std::size_t>(model.num_parameter_values() * kExactWords);
  std::vector<std::int64_t> first(size), second(size);
  std::vector<float> losses(labels.size());
  std::vector<std::int32_t> predictions(labels.size());
  const ExactSegment halves[] = {{&pulled, 0, b / 2, first}, {&pulled, b / 2, b - b / 2, second}};
  BatchRunner runner(model, 5);
  runner.RunExact(images, labels, coefficients, losses, predictions, halves);
  for (std::size_t k = 0; k < size; k += kExactWords) ExactMerge(first.data() + k, second.data() + k);
  AddRegularizationWords(model, pulled, 1.0f, first);
  ParameterList<float> grads = model.ZeroParameters();
  std::size_t offset = 0;
  for (auto& g : grads) {
    ExactToFloats(std::span(first).subspan(offset, static_cast<std::size_t>(g.size() * kExactWords)), g.span());
    offset += static_cast<std::size_t>(g.size() * kExactWords);
  }
  return grads;
}

class ParameterServerReplay : public ::testing::TestWithParam<MathMode> {};

TEST_P(ParameterServerReplay, EqualsSequentialReplayOfTheSameUpdates) {
  Fixture f;
  const MathMode math = GetParam();
  auto cluster = f.Make(7, 2, math);
  ASSERT_TRUE(
      cluster->RunEpoch(f.data, f.batches, 0, 1e-3f, -1, [](const ParameterServerUpdate&) { return Status::Ok(); })
          .ok());
  const auto& updates = cluster->updates();
  ASSERT_EQ(updates.size(), 12u);

  // Replay: keep every version of the variables; apply in push order.
  std::vector<ParameterList<float>> versions{f.model->InitialParameters(5)};
  auto optimizer = std::move(MakeOptimizer("adam", {})).value();
  optimizer->Build(versions[0]);
  std::map<std::int32_t, std::size_t> next_batch;
  BatchRunner runner(*f.model, 16);
  bool saw_staleness = false;
  for (const auto& u : updates) {
    const ParameterList<float>& pulled = versions[static_cast<std::size_t>(u.pulled_version)];
    const auto& batch = f.batches[static_cast<std::size_t>(u.worker)][next_batch[u.worker]++];
    Tensor<float> images;
    std::vector<std::int32_t> labels;
    GatherBatch(f.data, batch, images, labels);
    std::vector<float> coefficients(labels.size(), 1.0f / static_cast<float>(labels.size())), losses(labels.size());
    std::vector<std::int32_t> predictions(labels.size());
    ParameterList<float> grads = f.model->ZeroParameters();
    if (math == MathMode::kExact) {
      grads = ExactReplayGradient(*f.model, pulled, images, labels, coefficients);
    } else {
      runner.ForwardBackward(pulled, images, labels, coefficients, losses, predictions, grads);
      f.model->AddRegularizationGradient(pulled, 1.0f, grads);
    }
    ParameterList<float> next = versions.back();
    optimizer->Apply(next, grads, 1e-3f);
    versions.push_back(std::move(next));
    EXPECT_EQ(u.staleness, static_cast<std::int64_t>(versions.size()) - 2 - u.pulled_version);
    saw_staleness |= u.staleness > 0;
  }
  EXPECT_TRUE(saw_staleness) << "three asynchronous workers should produce stale updates";
  for (std::size_t p = 0; p < versions.back().size(); ++p)
    EXPECT_EQ(cluster->variables()[p], versions.back()[p]) << f.model->parameters()[p].name;
}

INSTANTIATE_TEST_SUITE_P(BothMathModes, ParameterServerReplay, ::testing::Values(MathMode::kFast, MathMode::kExact),
                         [](const auto& info) { return std::string(MathModeName(info.param)); });

TEST(ParameterServer, InterleavingDependsOnlyOnTheSeed) {
  Fixture f;
  auto order = [&](std::uint64_t seed, int threads) {
    tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    auto cluster = f.Make(seed, 3);
    EXPECT_TRUE(
        cluster->RunEpoch(f.data, f.batches, 0, 1e-3f, -1, [](const ParameterServerUpdate&) { return Status::Ok(); })
            .ok());
    std::vector<std::int32_t> workers;
    for (const auto& u : cluster->updates()) workers.push_back(u.worker);
    return std::make_pair(workers, cluster->variables());
  };
  const auto a = order(7, 1), b = order(7, 2), c = order(8, 2);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
  EXPECT_NE(a.first, c.first) << "another seed should interleave the workers differently";
}

TEST(ParameterServer, StopsAfterMaxUpdates) {
  Fixture f;
  auto cluster = f.Make(7, 1);
  int calls = 0;
  ASSERT_TRUE(cluster
                  ->RunEpoch(f.data, f.batches, 0, 1e-3f, 5,
                             [&](const ParameterServerUpdate&) {
                               ++calls;
                               return Status::Ok();
                             })
                  .ok());
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(cluster->version(), 5);
}

TEST(ParameterServer, BadOptions) {
  Fixture f;
  ParameterServerOptions options;
  options.parameter_servers = 0;
  EXPECT_FALSE(ParameterServerCluster::Create(*f.model, options, "adam", {}, f.model->InitialParameters(5), 16).ok());
  options.parameter_servers = 1;
  options.workers = 0;
  EXPECT_FALSE(ParameterServerCluster::Create(*f.model, options, "adam", {}, f.model->InitialParameters(5), 16).ok());
}

}  // namespace
}  // namespace dtlab

namespace dtlab {
namespace {

TEST(ParameterServer, MaxUpdatesCountsTheUpdatesBeforeARestore) {
  Fixture f;
  auto first = f.Make(7, 2);
  ASSERT_TRUE(
      first->RunEpoch(f.data, f.batches, 0, 1e-3f, 3, [](const ParameterServerUpdate&) { return Status::Ok(); }).ok());
  TrainingState state;
  state.optimizer = std::move(MakeOptimizer("adam", {})).value();
  state.optimizer->Build(first->variables());
  first->ExportState(state);
  EXPECT_EQ(state.optimizer->iterations(), 3);

  auto second = f.Make(7, 2);
  second->ImportState(state);
  EXPECT_EQ(second->version(), 3);
  EXPECT_EQ(second->variables(), first->variables());
  int calls = 0;
  ASSERT_TRUE(second
                  ->RunEpoch(f.data, f.batches, 1, 1e-3f, 5,
                             [&](const ParameterServerUpdate&) {
                               ++calls;
                               return Status::Ok();
                             })
                  .ok());
  EXPECT_EQ(calls, 2) << "--steps 5 after 3 restored updates leaves 2";
  EXPECT_EQ(second->version(), 5);
}

}  // namespace
}  // namespace dtlab
