// Exact mode (docs/exact.md): N replicas give the bits one device gives on the global
// batch, for any N, any split of the batch (short and empty replicas, both rebatch
// rules), sample weights, chunk size and thread count; and fast mode stays within
// its bound for the same random clusters.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/batch.h"
#include "core/batch_norm.h"
#include "core/loss.h"
#include "core/metrics.h"
#include "core/mnist.h"
#include "core/model.h"
#include "sim/compute/batch_runner.h"
#include "sim/engines/cluster.h"
#include "sim/comm/collectives.h"
#include "sim/input/distributed_input.h"

namespace dtlab {
namespace {

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

std::vector<float> Flatten(const ParameterList<float>& params) {
  std::vector<float> flat;
  for (const auto& p : params) flat.insert(flat.end(), p.data(), p.data() + p.size());
  return flat;
}

// A model on a small synthetic data set, sized so that 64 replicas' accumulators fit.
struct Lab {
  ImageDataset data;
  std::unique_ptr<Sequential<float>> model;
  ParameterList<float> params;
  Lab(const std::string& name, std::int64_t side, std::int64_t count, std::uint64_t seed)
      : data(MakeSyntheticDataset(count, side, side, 5, seed)),
        model(std::move(MakeModel<float>(name, {side, side, 1}, 5)).value()),
        params(model->InitialParameters(seed)) {}
};

// The RapidCheck generators' cluster: which model, N, the batch, its split.
struct RandomStep {
  std::string model;
  std::int32_t replicas;
  std::int64_t global_batch, batch;  // batch <= global_batch: a short final batch
  RebatchRule rule;
  bool weighted;
  std::int64_t chunk;
};

rc::Gen<RandomStep> GenStep(std::int32_t max_replicas) {
  return rc::gen::exec([max_replicas] {
    RandomStep s;
    s.model = *rc::gen::element<std::string>("linear", "linear", "mnist-cnn", "seed-cnn");
    const std::int32_t cap = s.model == "linear" ? max_replicas : s.model == "mnist-cnn" ? 8 : 4;
    s.replicas = *rc::gen::inRange<std::int32_t>(1, cap + 1);
    s.global_batch = *rc::gen::inRange<std::int64_t>(1, 3 * s.replicas + 6);
    s.batch = *rc::gen::inRange<std::int64_t>(1, s.global_batch + 1);
    s.rule = *rc::gen::element(RebatchRule::kV2, RebatchRule::kLegacy);
    s.weighted = *rc::gen::arbitrary<bool>();
    s.chunk = *rc::gen::element<std::int64_t>(1, 3, 16);
    return s;
  });
}

// Replicas run the step on their shares (compute_average_loss with sample weights
// and the global batch as denominator, as the tutorial), all-reduce the accumulator
// words, and round; the reference runs the whole batch as one device.
RC_GTEST_PROP(ExactMode, ReplicasEqualOneDeviceBitwise, ()) {
  const RandomStep s = *GenStep(64);
  const std::int64_t side = s.model == "seed-cnn" ? 10 : 6;
  Lab setup(s.model, side, s.batch, 3);
  std::vector<std::int64_t> batch(static_cast<std::size_t>(s.batch));
  std::iota(batch.begin(), batch.end(), 0);
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  GatherBatch(setup.data, batch, images, labels);
  std::vector<float> weights;
  if (s.weighted)
    for (std::int64_t i = 0; i < s.batch; ++i) weights.push_back(*rc::gen::element(0.0f, 0.5f, 1.0f, 2.0f, 0.3f));

  // The replicas.
  const auto split = SplitBatch(batch, s.global_batch, s.replicas, s.rule);
  std::vector<float> coefficients(batch.size()), losses(batch.size());
  std::vector<std::int32_t> predictions(batch.size());
  const auto words_per_replica = static_cast<std::size_t>(setup.model->num_parameter_values() * kExactWords);
  std::vector<std::vector<std::int64_t>> words(split.size(), std::vector<std::int64_t>(words_per_replica));
  std::vector<ExactSegment> segments;
  std::vector<ExactMeanMetric> metrics(split.size());
  std::vector<ExactSum> loss_sums(split.size());
  std::int64_t begin = 0;
  for (std::size_t r = 0; r < split.size(); ++r) {
    const auto count = static_cast<std::int64_t>(split[r].size());
    const auto mine = [&](auto& v) {
      return std::span(v).subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(count));
    };
    AverageLossCoefficients<float>(s.weighted ? std::span<const float>(mine(weights)) : std::span<const float>(), count,
                                   s.global_batch, 1.0f, mine(coefficients));
    segments.push_back({&setup.params, begin, count, words[r]});
    begin += count;
  }
  BatchRunner runner(*setup.model, s.chunk);
  runner.RunExact(images, labels, coefficients, losses, predictions, segments);
  begin = 0;
  for (std::size_t r = 0; r < split.size(); ++r) {
    const auto count = static_cast<std::size_t>(split[r].size());
    for (std::size_t i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(begin) + count; ++i)
      loss_sums[r].AddProduct(coefficients[i], losses[i]);
    metrics[r].UpdateState(std::span(losses).subspan(static_cast<std::size_t>(begin), count),
                           s.weighted ? std::span<const float>(weights).subspan(static_cast<std::size_t>(begin), count)
                                      : std::span<const float>());
    begin += static_cast<std::int64_t>(count);
  }
  std::vector<std::span<std::int64_t>> buffers(words.begin(), words.end());
  CollectiveOptions options;
  options.algorithm = *rc::gen::elementOf(kAllReduceAlgorithms);
  if (options.algorithm == AllReduceAlgorithm::kHierarchical) options.replicas_per_worker = 1;
  AllReduce<std::int64_t>(buffers, ReduceOp::kSum, options);
  std::vector<float> distributed(static_cast<std::size_t>(setup.model->num_parameter_values()));
  ExactToFloats(words[split.size() - 1], distributed);  // any replica: all hold the same words
  ExactSum distributed_loss;
  ExactMeanMetric distributed_metric;
  for (std::size_t r = 0; r < split.size(); ++r) {
    distributed_loss.Merge(loss_sums[r]);
    distributed_metric.Merge(metrics[r]);
  }

  // One device.
  std::vector<float> reference_coefficients(batch.size()), reference_losses(batch.size());
  std::vector<std::int32_t> reference_predictions(batch.size());
  AverageLossCoefficients<float>(weights, s.batch, s.global_batch, 1.0f, reference_coefficients);
  std::vector<std::int64_t> reference_words(words_per_replica);
  const ExactSegment whole{&setup.params, 0, s.batch, reference_words};
  BatchRunner one_device(*setup.model, 16);
  one_device.RunExact(images, labels, reference_coefficients, reference_losses, reference_predictions,
                      std::span(&whole, 1));
  std::vector<float> reference(distributed.size());
  ExactToFloats(reference_words, reference);
  ExactSum reference_loss;
  for (std::size_t i = 0; i < batch.size(); ++i)
    reference_loss.AddProduct(reference_coefficients[i], reference_losses[i]);
  ExactMeanMetric reference_metric;
  reference_metric.UpdateState(reference_losses, weights);

  RC_ASSERT(SameBits(losses, reference_losses));
  RC_ASSERT(predictions == reference_predictions);
  RC_ASSERT(SameBits(distributed, reference));
  ExactNormalizeAll(words[0]);
  ExactNormalizeAll(reference_words);
  RC_ASSERT(words[0] == reference_words);
  RC_ASSERT(distributed_loss == reference_loss);
  RC_ASSERT(distributed_metric.total() == reference_metric.total());
  RC_ASSERT(distributed_metric.count() == reference_metric.count());
  const float a = distributed_metric.Result(), b = reference_metric.Result();
  RC_ASSERT(SameBits(std::span(&a, 1), std::span(&b, 1)));
}

// The same through the real strategy code: Cluster::TrainStep in exact mode checks
// itself bitwise against one device, and a few steps keep every replica's weights
// equal to a one-device run's. Default denominator: equal when every replica is
// full (it then equals the global batch), as TF's.
RC_GTEST_PROP(ExactMode, ClusterStepsEqualOneDeviceRun, ()) {
  const RandomStep s = *GenStep(24);
  const std::int64_t side = s.model == "seed-cnn" ? 10 : 6;
  const std::int64_t total = 2 * s.global_batch;
  Lab setup(s.model, side, total, 4);
  ClusterConfig config;
  config.math = MathMode::kExact;
  config.replicas = s.replicas;
  config.strategy = s.replicas == 1 ? StrategyKind::kOneDevice
                                    : *rc::gen::element(StrategyKind::kMirrored, StrategyKind::kCentralStorage,
                                                        StrategyKind::kTpu, StrategyKind::kMultiWorkerMirrored);
  if (config.strategy == StrategyKind::kMultiWorkerMirrored && s.replicas % 2 == 0) config.workers = 2;
  config.all_reduce = *rc::gen::elementOf(kAllReduceAlgorithms);
  config.fold_above = *rc::gen::element(256, 0, 1);  // the folded reduction, where the strategy takes it
  config.exact_all_reduce = *rc::gen::element(ExactAllReduce::kCompact, ExactAllReduce::kWords);
  config.check_reference = true;
  const bool full = s.global_batch % s.replicas == 0;
  config.denominator = full && *rc::gen::arbitrary<bool>() ? LossDenominator::kDefault : LossDenominator::kGlobal;
  ClusterConfig one = config;
  one.replicas = 1, one.workers = 1, one.strategy = StrategyKind::kOneDevice, one.check_reference = false;
  auto cluster = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, s.chunk)).value();
  auto single = std::move(Cluster::Create(*setup.model, one, "adam", {}, setup.params, 16)).value();
  for (std::int64_t step = 0; step < 2; ++step) {
    std::vector<std::int64_t> batch(static_cast<std::size_t>(s.global_batch));
    std::iota(batch.begin(), batch.end(), step * s.global_batch);
    const auto split = SplitBatch(batch, s.global_batch, s.replicas, s.rule);
    const StepResult r = std::move(cluster->TrainStep(setup.data, split, s.global_batch, 1e-3f, step)).value();
    const StepResult o = std::move(single->TrainStep(setup.data, {batch}, s.global_batch, 1e-3f, step)).value();
    RC_ASSERT(r.check.has_value());
    RC_ASSERT(r.check->within_bound);
    RC_ASSERT(r.check->max_ulp == 0);
    RC_ASSERT(SameBits(std::span(&r.loss, 1), std::span(&o.loss, 1)));
  }
  RC_ASSERT(cluster->ReplicasInSync());
  RC_ASSERT(SameBits(Flatten(cluster->variables()), Flatten(single->variables())));
  const auto a = cluster->MergedAccuracy().state(), b = single->MergedAccuracy().state();
  RC_ASSERT(a.total() == b.total() && a.count() == b.count());
}

// Fast mode on the same random clusters: never bitwise promised, always within the
// rigorous bound (reference_check.h), the error reported in ULPs.
RC_GTEST_PROP(FastMode, ErrorAlwaysWithinItsBound, ()) {
  const RandomStep s = *GenStep(24);
  const std::int64_t side = s.model == "seed-cnn" ? 10 : 6;
  Lab setup(s.model, side, s.global_batch, 6);
  ClusterConfig config;
  config.replicas = s.replicas;
  config.strategy = s.replicas == 1 ? StrategyKind::kOneDevice : StrategyKind::kMirrored;
  config.all_reduce = *rc::gen::elementOf(kAllReduceAlgorithms);
  config.fold_above = *rc::gen::element(256, 0);
  config.check_reference = true;
  auto cluster = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, s.chunk)).value();
  std::vector<std::int64_t> batch(static_cast<std::size_t>(s.batch));
  std::iota(batch.begin(), batch.end(), 0);
  const StepResult r = std::move(cluster->TrainStep(setup.data, SplitBatch(batch, s.global_batch, s.replicas, s.rule),
                                                    s.global_batch, 1e-3f, 0))
                           .value();
  RC_ASSERT(r.check.has_value());
  RC_ASSERT(r.check->within_bound);
  RC_ASSERT(r.check->max_bound_fraction <= 1.0);
}

// Dense kernels sum exact products in a 128-bit window below each element's largest
// product, and send products too far below it (here pixels of 1e-30 and subnormal
// 1e-40 beside pixels near 1) straight to the words. One segment of the batch mixes
// both paths; one segment per example uses only the window. Their merged words
// must be identical.
TEST(ExactMode, TinyFactorsBesideLargeOnesStayExact) {
  Lab lab("linear", 4, 6, 1);
  std::vector<std::int64_t> batch = {0, 1, 2, 3, 4, 5};
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  GatherBatch(lab.data, batch, images, labels);
  const float specials[] = {1e-30f, -1e-40f, 3e-20f, 1.0f, 7e-39f, -2.5e-33f};
  for (std::int64_t e = 0; e < 6; ++e) images[e * 16 + (e % 4)] = specials[e];
  images[5 * 16 + 7] = 1e-44f;
  std::vector<float> coefficients(6, 1.0f / 6);
  const auto size = static_cast<std::size_t>(lab.model->num_parameter_values() * kExactWords);
  std::vector<float> losses(6), single_losses(6);
  std::vector<std::int32_t> predictions(6);
  std::vector<std::int64_t> whole(size);
  BatchRunner runner(*lab.model, 16);
  const ExactSegment one{&lab.params, 0, 6, whole};
  runner.RunExact(images, labels, coefficients, losses, predictions, std::span(&one, 1));
  std::vector<std::vector<std::int64_t>> parts(6, std::vector<std::int64_t>(size));
  std::vector<ExactSegment> singles;
  for (std::int64_t e = 0; e < 6; ++e) singles.push_back({&lab.params, e, 1, parts[static_cast<std::size_t>(e)]});
  runner.RunExact(images, labels, coefficients, single_losses, predictions, singles);
  for (std::size_t e = 1; e < 6; ++e)
    for (std::size_t k = 0; k < size; k += kExactWords) ExactMerge(parts[0].data() + k, parts[e].data() + k);
  ExactNormalizeAll(parts[0]);
  ExactNormalizeAll(whole);
  EXPECT_EQ(parts[0], whole);
  // And the kernel element by element against ExactAddProduct's plain sum of
  // x[e][i] * dlogits[e][j].
  Sequential<float>::Workspace ws;
  const Tensor<float>& logits = lab.model->Forward(lab.params, images, ws);
  Tensor<float> dlogits;
  std::vector<float> plain_losses(6);
  SparseCategoricalCrossentropyFromLogits<float>(logits, labels, plain_losses, coefficients, &dlogits);
  EXPECT_TRUE(SameBits(plain_losses, losses));
  for (std::int64_t i = 0; i < 16; ++i)
    for (std::int64_t j = 0; j < 5; ++j) {
      std::int64_t words[kExactWords] = {};
      for (std::int64_t e = 0; e < 6; ++e) ExactAddProduct(words, images[e * 16 + i], dlogits[e * 5 + j]);
      ExactNormalize(words);
      EXPECT_TRUE(std::equal(words, words + kExactWords, whole.data() + (i * 5 + j) * kExactWords)) << i << "," << j;
    }
}

// Some runs with hundreds of replicas: 1024 replicas of the linear model.
TEST(ExactMode, ThousandReplicasEqualOneDevice) {
  Lab setup("linear", 4, 1500, 9);
  for (const std::int64_t global_batch : {1024, 1500, 700}) {
    ClusterConfig config;
    config.math = MathMode::kExact;
    config.strategy = StrategyKind::kMirrored;
    config.replicas = 1024;
    config.check_reference = true;
    auto cluster = std::move(Cluster::Create(*setup.model, config, "sgd", {}, setup.params, 16)).value();
    std::vector<std::int64_t> batch(static_cast<std::size_t>(global_batch));
    std::iota(batch.begin(), batch.end(), 0);
    const StepResult r =
        std::move(cluster->TrainStep(setup.data, SplitBatch(batch, global_batch, 1024, RebatchRule::kV2), global_batch,
                                     0.1f, 0))
            .value();
    ASSERT_TRUE(r.check.has_value());
    EXPECT_TRUE(r.check->within_bound) << global_batch << ": " << r.check->explanation;
    EXPECT_EQ(r.check->max_ulp, 0);
  }
}

// What a run's bits are compared by: each step's reduced gradient and loss, then the
// final variables, which every replica must hold alike.
void AppendStep(std::vector<float>& all, const ParameterList<float>& reduced, float loss) {
  const std::vector<float> g = Flatten(reduced);
  all.insert(all.end(), g.begin(), g.end());
  all.push_back(loss);
}
std::vector<float> WithVariables(std::vector<float> all, const Cluster& cluster) {
  const std::vector<float> v = Flatten(cluster.variables());
  all.insert(all.end(), v.begin(), v.end());
  EXPECT_TRUE(cluster.ReplicasInSync());
  return all;
}

// The folded reduction (docs/cluster.md) sums the replicas' gradients in waves of
// FoldWave() replicas instead of moving their buffers. Over three steps of 40
// replicas (several waves, short and empty replicas), with 1 and 8 threads (other
// wave sizes): exact mode gives the ring's bits, and fast mode the naive
// all-reduce's, whose order ((g0 + g1) + g2) + ... it keeps; a MEAN (DDP, whose
// short replicas fail the reference check as they should) too. central_storage
// folds into the host's sum: the reduce's words, or its replica order in fast mode,
// applied by the host; its replicas read the host's variables, so a folded step
// sends nothing (not even the broadcast).
TEST(FoldedReduction, GivesTheCollectivesBits) {
  Lab setup("seed-cnn", 10, 120, 3);
  for (const StrategyKind strategy : {StrategyKind::kMirrored, StrategyKind::kCentralStorage})
    for (const MathMode math : {MathMode::kExact, MathMode::kFast})
      for (const Convention convention : {Convention::kTf, Convention::kDdp}) {
        std::vector<std::vector<float>> results;
        std::vector<std::int64_t> bytes;
        for (const int threads : {1, 8})
          for (const std::int32_t fold_above : {0, 256}) {
            tbb::global_control control(tbb::global_control::max_allowed_parallelism,
                                        static_cast<std::size_t>(threads));
            ClusterConfig config;
            config.math = math;
            config.convention = convention;
            config.strategy = strategy;
            config.replicas = 40;
            config.fold_above = fold_above;
            config.all_reduce = math == MathMode::kExact ? AllReduceAlgorithm::kRing : AllReduceAlgorithm::kNaive;
            config.check_reference = true;
            auto cluster = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 4)).value();
            ASSERT_EQ(cluster->folded(), fold_above == 0);
            if (strategy == StrategyKind::kCentralStorage) {
              EXPECT_FALSE(cluster->compacted());  // the reduce to the host moves the words
            }
            std::vector<float> all;
            for (std::int64_t step = 0; step < 3; ++step) {
              const std::int64_t global_batch = step == 1 ? 30 : 70;  // 30: ten empty replicas
              std::vector<std::int64_t> batch(static_cast<std::size_t>(global_batch));
              std::iota(batch.begin(), batch.end(), step * 10);
              ParameterList<float> reduced;
              const StepResult r =
                  std::move(cluster->TrainStep(setup.data, SplitBatch(batch, global_batch, 40, RebatchRule::kV2),
                                               global_batch, 1e-3f, step, &reduced))
                      .value();
              ASSERT_TRUE(r.check.has_value());
              if (convention == Convention::kTf) {
                EXPECT_TRUE(r.check->within_bound) << r.check->explanation;
              }
              EXPECT_EQ(r.folded, fold_above == 0);
              AppendStep(all, reduced, r.loss);
            }
            results.push_back(WithVariables(std::move(all), *cluster));
            bytes.push_back(cluster->message_log().TotalBytes());
          }
        const std::string what = std::string(StrategyName(strategy)) + (math == MathMode::kExact ? " exact" : " fast") +
                                 " convention " + std::to_string(static_cast<int>(convention));
        for (std::size_t k = 1; k < results.size(); ++k)
          EXPECT_TRUE(SameBits(results[k], results[0])) << what << " run " << k;
        EXPECT_EQ(bytes[0], 0) << what;  // folded: no message
        EXPECT_GT(bytes[1], 0) << what;  // the collectives
      }
}

// Exact mode's compact all-reduce (sim/comm/compact_exact.h) against the words: the
// same reduced gradients, losses and weights over three steps (one with empty
// replicas), for every strategy with a collective, with a MEAN (DDP), gradient
// accumulation and several algorithms; and about 2x a float all-reduce's bytes
// (a float per 32 values, then one int64 per value), where the words move 38x.
TEST(CompactExactAllReduce, GivesTheWordsBits) {
  Lab setup("seed-cnn", 10, 120, 3);
  struct Case {
    StrategyKind strategy;
    Convention convention;
    std::int32_t accumulation;
    AllReduceAlgorithm algorithm;
  };
  for (const Case c : {Case{StrategyKind::kMirrored, Convention::kTf, 1, AllReduceAlgorithm::kRing},
                       Case{StrategyKind::kMultiWorkerMirrored, Convention::kDdp, 1, AllReduceAlgorithm::kHierarchical},
                       Case{StrategyKind::kTpu, Convention::kTf, 2, AllReduceAlgorithm::kHalvingDoubling},
                       Case{StrategyKind::kCentralStorage, Convention::kTf, 1, AllReduceAlgorithm::kRing},
                       Case{StrategyKind::kMirrored, Convention::kTf, 1, AllReduceAlgorithm::kDirect}}) {
    std::vector<std::vector<float>> results;
    std::vector<std::int64_t> bytes;
    for (const ExactAllReduce kind : {ExactAllReduce::kWords, ExactAllReduce::kCompact}) {
      ClusterConfig config;
      config.math = MathMode::kExact;
      config.strategy = c.strategy;
      config.convention = c.convention;
      config.replicas = 6;
      if (c.strategy == StrategyKind::kMultiWorkerMirrored) config.workers = 2;
      config.accumulation.steps = c.accumulation;
      config.exact_all_reduce = kind;
      config.all_reduce = c.algorithm;
      auto created = Cluster::Create(*setup.model, config, "adam", {}, setup.params, 4);
      ASSERT_TRUE(created.ok()) << created.status().message();
      auto cluster = std::move(created).value();
      // Encoded gradients in waves wherever the replicas can compute in waves (with
      // accumulation too: each encoding then holds its replica's micro-batch sum); else
      // from the words.
      EXPECT_EQ(cluster->compacted(), kind == ExactAllReduce::kCompact && c.strategy != StrategyKind::kCentralStorage);
      std::vector<float> all;
      for (std::int64_t step = 0; step < 3; ++step) {
        const std::int64_t global_batch = step == 1 ? 4 : 24;  // 4: two empty replicas
        std::vector<std::int64_t> batch(static_cast<std::size_t>(global_batch * c.accumulation));
        std::iota(batch.begin(), batch.end(), step * 30);
        std::vector<ReplicaBatches> micro;
        for (std::int32_t k = 0; k < c.accumulation; ++k)
          micro.push_back(SplitBatch(std::span(batch).subspan(static_cast<std::size_t>(k * global_batch),
                                                              static_cast<std::size_t>(global_batch)),
                                     global_batch, 6, RebatchRule::kV2));
        std::vector<const ReplicaBatches*> group;
        for (const ReplicaBatches& m : micro) group.push_back(&m);
        ParameterList<float> reduced;
        auto result = c.accumulation == 1
                          ? cluster->TrainStep(setup.data, micro[0], global_batch, 1e-3f, step, &reduced)
                          : cluster->TrainAccumulatedStep(setup.data, group, global_batch, 1e-3f, step, &reduced);
        ASSERT_TRUE(result.ok()) << result.status().message();
        AppendStep(all, reduced, result->loss);
      }
      results.push_back(WithVariables(std::move(all), *cluster));
      bytes.push_back(cluster->message_log().TotalBytes());
    }
    const std::string what = std::string(StrategyName(c.strategy)) + " accumulation " + std::to_string(c.accumulation) +
                             " " + std::string(AllReduceAlgorithmName(c.algorithm));
    EXPECT_TRUE(SameBits(results[1], results[0])) << what;
    if (c.strategy == StrategyKind::kCentralStorage) {
      EXPECT_EQ(bytes[1], bytes[0]) << what;  // the reduce to the host keeps the words
    } else {
      // Words: 19 int64 per value; compact: 7 bytes and a float per 32 values.
      const double ratio = static_cast<double>(bytes[0]) / static_cast<double>(bytes[1]);
      EXPECT_GT(ratio, 152.0 / 7.2) << what;
      EXPECT_LT(ratio, 152.0 / 7.0) << what;
    }
  }
}

// Where a configuration needs every replica's own gradient at once, the cluster keeps
// the collective whatever the replica count.
TEST(FoldedReduction, OnlyWhereTheStrategyTakesIt) {
  Lab setup("linear", 4, 8, 1);
  ClusterConfig config;
  config.strategy = StrategyKind::kMirrored;
  config.replicas = 4;
  config.fold_above = 2;
  EXPECT_TRUE(Cluster::FoldsReduction(config, *setup.model, false));
  EXPECT_FALSE(Cluster::FoldsReduction(config, *setup.model, true));  // MPI: the worker group's collective
  config.fold_above = 4;
  EXPECT_FALSE(Cluster::FoldsReduction(config, *setup.model, false));
  config.fold_above = 2;
  ClusterConfig one_device = config;
  one_device.strategy = StrategyKind::kOneDevice;
  EXPECT_FALSE(Cluster::FoldsReduction(one_device, *setup.model, false));
  ClusterConfig host = config;
  host.strategy = StrategyKind::kCentralStorage;
  EXPECT_TRUE(Cluster::FoldsReduction(host, *setup.model, false));  // the one sum is the host's
  ClusterConfig scaled = config;
  scaled.precision.dynamic_loss_scale = true;
  EXPECT_TRUE(Cluster::FoldsReduction(scaled, *setup.model, false));  // each replica keeps its verdict
  ClusterConfig faulty = config;
  faulty.faults.push_back(FaultSpec{});
  EXPECT_FALSE(Cluster::FoldsReduction(faulty, *setup.model, false));
  ClusterConfig accumulating = config;
  accumulating.accumulation.steps = 2;
  EXPECT_FALSE(Cluster::FoldsReduction(accumulating, *setup.model, false));  // fast: each replica's float sum
  accumulating.math = MathMode::kExact;  // exact: the fold adds every micro-batch's words
  EXPECT_TRUE(Cluster::FoldsReduction(accumulating, *setup.model, false));
}

// Exact mode's replicas keep their encodings (compute in waves) wherever the fold
// does not run and the waves can: below the fold, on MPI ranks at any count, with
// gradient accumulation and with injected faults; not with the words all-reduce, in
// fast mode, on one replica (nothing to send) or with the variables on the host.
TEST(FoldedReduction, CompactedBelowTheFoldOnRanksAndWithAccumulation) {
  Lab setup("linear", 4, 8, 1);
  ClusterConfig config;
  config.strategy = StrategyKind::kMirrored;
  config.math = MathMode::kExact;
  config.replicas = 4;
  config.fold_above = 2;
  EXPECT_FALSE(Cluster::CompactsGradients(config, *setup.model, false));  // folded
  EXPECT_TRUE(Cluster::CompactsGradients(config, *setup.model, true));    // MPI ranks never fold
  config.fold_above = 4;
  EXPECT_TRUE(Cluster::CompactsGradients(config, *setup.model, false));
  ClusterConfig accumulating = config;
  accumulating.accumulation.steps = 3;
  EXPECT_TRUE(Cluster::CompactsGradients(accumulating, *setup.model, false));
  EXPECT_TRUE(Cluster::CompactsGradients(accumulating, *setup.model, true));
  ClusterConfig words = config;
  words.exact_all_reduce = ExactAllReduce::kWords;
  EXPECT_FALSE(Cluster::CompactsGradients(words, *setup.model, true));
  ClusterConfig fast = config;
  fast.math = MathMode::kFast;
  EXPECT_FALSE(Cluster::CompactsGradients(fast, *setup.model, false));
  ClusterConfig one = config;
  one.replicas = 1;
  EXPECT_FALSE(Cluster::CompactsGradients(one, *setup.model, false));
  ClusterConfig host = config;
  host.strategy = StrategyKind::kCentralStorage;
  EXPECT_FALSE(Cluster::CompactsGradients(host, *setup.model, true));
  // Injected faults hit the compact all-reduce's collectives; they never fold, so
  // their replicas compact at any count.
  ClusterConfig faulty = config;
  faulty.faults.push_back(FaultSpec{});
  faulty.fold_above = 2;
  EXPECT_TRUE(Cluster::CompactsGradients(faulty, *setup.model, false));
  EXPECT_TRUE(Cluster::CompactsGradients(faulty, *setup.model, true));
}

// An unsynchronized BatchNormalization layer normalizes each replica by its own
// batch, so its replicas compute in waves (a synchronized one sums every replica's
// statistics mid-pass, and keeps them all at once). Over two steps of 40 replicas
// (the second with ten empty ones, whose statistics are NaN), with 1 and 8 threads:
// exact mode's compacted waves and fold give the words' bits, fast mode's fold the
// naive all-reduce's, and every replica's own moving statistics are the same as
// when all replicas computed at once.
TEST(FoldedReduction, UnsynchronizedBatchNormComputesInWaves) {
  const std::string models = std::string(DTLAB_TEST_SOURCE_DIR) + "/tests/models/";
  const ImageDataset data = MakeSyntheticDataset(100, 28, 28, 10, 5);
  const auto model =
      std::move(MakeModel<float>(models + "batch_norm_cnn_unsynchronized.json", {28, 28, 1}, 10)).value();
  const auto synchronized = std::move(MakeModel<float>(models + "batch_norm_cnn.json", {28, 28, 1}, 10)).value();
  const ParameterList<float> initial = model->InitialParameters(5);
  ClusterConfig base;
  base.strategy = StrategyKind::kMirrored;
  base.replicas = 40;
  base.fold_above = 256;
  EXPECT_TRUE(Cluster::ComputesInWaves(base, *model));
  EXPECT_FALSE(Cluster::ComputesInWaves(base, *synchronized));
  for (const MathMode math : {MathMode::kExact, MathMode::kFast}) {
    struct Run {
      ExactAllReduce exact_all_reduce;
      std::int32_t fold_above;
      int threads;
    };
    std::vector<Run> runs = {{ExactAllReduce::kWords, 256, 2}};  // fast mode: words are not read
    for (const int threads : {1, 8}) {
      if (math == MathMode::kExact) runs.push_back({ExactAllReduce::kCompact, 256, threads});
      runs.push_back({ExactAllReduce::kCompact, 0, threads});
    }
    std::vector<std::vector<float>> results;
    for (const Run& run : runs) {
      tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(run.threads));
      ClusterConfig config = base;
      config.math = math;
      config.all_reduce = math == MathMode::kExact ? AllReduceAlgorithm::kRing : AllReduceAlgorithm::kNaive;
      config.exact_all_reduce = run.exact_all_reduce;
      config.fold_above = run.fold_above;
      auto cluster = std::move(Cluster::Create(*model, config, "adam", {}, initial, 4)).value();
      ASSERT_EQ(cluster->folded(), run.fold_above == 0);
      ASSERT_EQ(cluster->compacted(),
                math == MathMode::kExact && run.exact_all_reduce == ExactAllReduce::kCompact && run.fold_above != 0);
      std::vector<float> all;
      for (std::int64_t step = 0; step < 2; ++step) {
        const std::int64_t global_batch = step == 1 ? 30 : 70;
        std::vector<std::int64_t> batch(static_cast<std::size_t>(global_batch));
        std::iota(batch.begin(), batch.end(), step * 30);
        ParameterList<float> reduced;
        const StepResult r = std::move(cluster->TrainStep(data, SplitBatch(batch, global_batch, 40, RebatchRule::kV2),
                                                          global_batch, 1e-3f, step, &reduced))
                                 .value();
        AppendStep(all, reduced, r.loss);
      }
      for (std::size_t k = 0; k < 40; ++k) {
        const std::vector<float> v = Flatten(cluster->replica_variables(k));
        all.insert(all.end(), v.begin(), v.end());
      }
      results.push_back(std::move(all));
    }
    for (std::size_t k = 1; k < results.size(); ++k)
      EXPECT_TRUE(SameBits(results[k], results[0])) << (math == MathMode::kExact ? "exact" : "fast") << " run " << k;
  }
}

// Mixed precision's dynamic loss scale (sim/engines/mixed_precision.h) with the
// fold: each replica decides on its own gradient's overflow in its wave and keeps the
// verdict. Over eight steps of 40 replicas in float16 from a scale of 2^30 (early
// steps overflow on some replicas, and the scale halves; it doubles after 2 finite
// steps), with 1 and 8 threads: the naive all-reduce's bits, losses, scales and
// skipped steps for every --loss-scale-check, or the same refusal where the replicas
// disagree (first-replica, each-replica).
TEST(FoldedReduction, DynamicLossScaleFoldsWithEachReplicasVerdict) {
  Lab setup("seed-cnn", 10, 170, 3);
  setup.model->set_compute_type(ComputeType::kFloat16);
  for (const LossScaleCheck check :
       {LossScaleCheck::kReduced, LossScaleCheck::kFirstReplica, LossScaleCheck::kEachReplica}) {
    std::vector<std::vector<float>> results;
    std::vector<std::string> outcomes;
    std::int64_t skipped = 0, applied = 0;
    for (const int threads : {1, 8})
      for (const std::int32_t fold_above : {256, 0}) {
        tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
        ClusterConfig config;
        config.math = MathMode::kFast;
        config.strategy = StrategyKind::kMirrored;
        config.replicas = 40;
        config.fold_above = fold_above;
        config.all_reduce = AllReduceAlgorithm::kNaive;
        config.precision.compute = ComputeType::kFloat16;
        config.precision.dynamic_loss_scale = true;
        config.precision.initial_scale = 0x1p24f;
        config.precision.growth_steps = 2;
        config.precision.check = check;
        auto cluster = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 4)).value();
        ASSERT_EQ(cluster->folded(), fold_above == 0);
        std::vector<float> all;
        std::string outcome;
        for (std::int64_t step = 0; step < 10 && outcome.empty(); ++step) {
          const std::int64_t global_batch = step == 1 ? 30 : 80;  // 30: ten empty replicas
          std::vector<std::int64_t> batch(static_cast<std::size_t>(global_batch));
          std::iota(batch.begin(), batch.end(), step * 10);
          ParameterList<float> reduced;
          auto r = cluster->TrainStep(setup.data, SplitBatch(batch, global_batch, 40, RebatchRule::kV2), global_batch,
                                      1e-3f, step, &reduced);
          if (!r.ok()) {
            outcome = r.status().message();
            break;
          }
          AppendStep(all, reduced, r->loss);
          all.push_back(r->loss_scale);
          all.push_back(r->skipped ? 1.0f : 0.0f);
          skipped += r->skipped ? 1 : 0;
          applied += r->skipped ? 0 : 1;
        }
        if (outcome.empty()) all = WithVariables(std::move(all), *cluster);
        results.push_back(std::move(all));
        outcomes.push_back(outcome);
      }
    const std::string what(LossScaleCheckName(check));
    EXPECT_GT(skipped, 0) << what;  // the scale overflowed, and came down to apply steps
    if (check == LossScaleCheck::kReduced) {
      EXPECT_GT(applied, 0) << what;
    }
    for (std::size_t k = 1; k < results.size(); ++k) {
      EXPECT_TRUE(SameBits(results[k], results[0])) << what << " run " << k;
      EXPECT_EQ(outcomes[k], outcomes[0]) << what << " run " << k;
    }
  }
}

// Results never depend on the thread count or the chunk size in exact mode.
TEST(ExactMode, IndependentOfThreadsAndChunkSize) {
  Lab setup("seed-cnn", 28, 40, 2);
  std::vector<std::int64_t> batch(40);
  std::iota(batch.begin(), batch.end(), 0);
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  GatherBatch(setup.data, batch, images, labels);
  std::vector<float> coefficients(40, 1.0f / 40);
  std::vector<float> first;
  for (const int threads : {1, 2, 4})
    for (const std::int64_t chunk : {1, 5, 16, 64}) {
      tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      BatchRunner runner(*setup.model, chunk);
      std::vector<float> losses(40);
      std::vector<std::int32_t> predictions(40);
      std::vector<std::int64_t> words;
      ParameterList<float> grads = setup.model->ZeroParameters();
      const float loss =
          runner.ExactGradient(setup.params, images, labels, coefficients, losses, predictions, words, grads);
      std::vector<float> all = Flatten(grads);
      all.push_back(loss);
      all.insert(all.end(), losses.begin(), losses.end());
      if (first.empty()) first = all;
      EXPECT_TRUE(SameBits(all, first)) << threads << " threads, chunk " << chunk;
    }
}

// ExactSegment::regularization adds the regularization terms inside the sums (while
// each element's words are in cache): the same words as adding them after the step
// with AddRegularizationWords, for a replica with examples and for an empty one, at
// a scale that is not a power of two.
TEST(ExactMode, RegularizationInTheSumsGivesTheWordsOfAddingItAfter) {
  Lab setup("seed-cnn", 28, 12, 3);
  const auto& specs = setup.model->parameters();
  ASSERT_TRUE(std::any_of(specs.begin(), specs.end(), [](const auto& p) { return p.spec.l2 != 0.0; }));
  std::vector<std::int64_t> batch(12);
  std::iota(batch.begin(), batch.end(), 0);
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  GatherBatch(setup.data, batch, images, labels);
  std::vector<float> coefficients(12, 1.0f / 12), losses(12);
  std::vector<std::int32_t> predictions(12);
  const auto size = static_cast<std::size_t>(setup.model->num_parameter_values() * kExactWords);
  const float scale = 1.0f / 3;
  for (const std::int64_t count : {12, 0}) {
    std::vector<std::int64_t> fused(size, 5), after(size, 5);
    BatchRunner runner(*setup.model, 5);
    const ExactSegment with{&setup.params, 0, count, fused, scale};
    runner.RunExact(images, labels, coefficients, losses, predictions, std::span(&with, 1));
    const ExactSegment without{&setup.params, 0, count, after};
    runner.RunExact(images, labels, coefficients, losses, predictions, std::span(&without, 1));
    AddRegularizationWords(*setup.model, setup.params, scale, after);
    EXPECT_EQ(fused, after) << count << " examples";
    EXPECT_NE(fused, std::vector<std::int64_t>(size, 0));
  }
}

// Honest about TF's scale_regularization_loss: with 3 replicas each adds 1/3 of the
// regularization gradient, rounded, and the sum of three roundings is not the
// one-device value; the exact split is.
TEST(ExactMode, RegularizationScaledByOneThirdIsNotExactButTheExactSplitIs) {
  Lab setup("mnist-cnn", 6, 12, 5);
  std::vector<std::int64_t> batch(12);
  std::iota(batch.begin(), batch.end(), 0);
  std::int64_t differing_tf = 0;
  for (const RegularizationSplit split : {RegularizationSplit::kTf, RegularizationSplit::kExact}) {
    for (const std::int32_t n : {2, 3, 4, 6}) {
      ClusterConfig config;
      config.math = MathMode::kExact;
      config.strategy = StrategyKind::kMirrored;
      config.replicas = n;
      config.check_reference = true;
      config.regularization_split = split;
      auto cluster = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
      const StepResult r =
          std::move(cluster->TrainStep(setup.data, SplitBatch(batch, 12, n, RebatchRule::kV2), 12, 1e-3f, 0)).value();
      const bool power_of_two = (n & (n - 1)) == 0;
      if (split == RegularizationSplit::kExact || power_of_two) {
        EXPECT_TRUE(r.check->within_bound) << n << " replicas: " << r.check->explanation;
      } else {
        EXPECT_FALSE(r.check->within_bound) << n << " replicas";
        // The regularization term's last bits (l2 * 2w ~ 1e-5, errors ~1e-12) move
        // some rounded totals by one ULP; not a wrong gradient. In ULPs it can look
        // large where the data and regularization gradients nearly cancel.
        EXPECT_LE(r.check->max_abs_diff, 1e-9);  // 1 ULP of a gradient element near 3e-3 is 2.3e-10
        EXPECT_NE(r.check->explanation.find("not a power of two"), std::string::npos) << r.check->explanation;
        for (const auto& v : r.check->variables) differing_tf += v.values_differing;
      }
    }
  }
  EXPECT_GT(differing_tf, 0);
}

// The classic pitfall still shows in exact mode, now as "N times", not a bound.
TEST(ExactMode, PerReplicaDenominatorIsCaught) {
  Lab setup("linear", 6, 8, 5);
  ClusterConfig config;
  config.math = MathMode::kExact;
  config.strategy = StrategyKind::kMirrored;
  config.replicas = 4;
  config.check_reference = true;
  config.denominator = LossDenominator::kPerReplica;
  auto cluster = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
  std::vector<std::int64_t> batch(8);
  std::iota(batch.begin(), batch.end(), 0);
  const StepResult r =
      std::move(cluster->TrainStep(setup.data, SplitBatch(batch, 8, 4, RebatchRule::kV2), 8, 1e-3f, 0)).value();
  EXPECT_FALSE(r.check->within_bound);
  EXPECT_NE(r.check->explanation.find("4 times"), std::string::npos) << r.check->explanation;
}

// DDP's MEAN of per-replica means is exact when N is a power of two (the scaling by
// N is exact) and the replicas are even.
TEST(ExactMode, DdpEqualForPowerOfTwoEvenSplits) {
  Lab setup("mnist-cnn", 6, 16, 5);
  std::vector<std::int64_t> batch(16);
  std::iota(batch.begin(), batch.end(), 0);
  for (const std::int32_t n : {2, 4, 8}) {
    ClusterConfig config;
    config.math = MathMode::kExact;
    config.strategy = StrategyKind::kMirrored;
    config.convention = Convention::kDdp;
    config.replicas = n;
    config.check_reference = true;
    auto cluster = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
    const StepResult r =
        std::move(cluster->TrainStep(setup.data, SplitBatch(batch, 16, n, RebatchRule::kV2), 16, 1e-3f, 0)).value();
    EXPECT_TRUE(r.check->within_bound) << n << ": " << r.check->explanation;
  }
}

// Keras 3's sum_over_batch_size under a strategy: the local mean times 1/N. On an
// even split every example weighs 1/G, so exact mode equals one device bitwise; on
// an uneven split the short replica's examples weigh more, and the check names it.
TEST(ExactMode, Keras3SumOverBatchSizeEqualsOneDeviceOnEvenSplitsOnly) {
  Lab setup("linear", 6, 10, 5);
  ClusterConfig config;
  config.math = MathMode::kExact;
  config.strategy = StrategyKind::kMirrored;
  config.replicas = 4;
  config.check_reference = true;
  config.reduction = LossReduction::kSumOverBatchSize;
  const ClusterConfig::LossScale scale = config.ReplicaLossScale(2, 8, 4);
  EXPECT_EQ(scale.denominator, 2);
  EXPECT_EQ(scale.factor, 0.25f);
  EXPECT_EQ(config.ReplicaLossScale(2, 8, 3).factor, static_cast<float>(1.0 / 3));
  EXPECT_EQ(config.ReplicaLossScale(8, 8, 1).factor, 1.0f);  // the one-device reference
  std::vector<std::int64_t> batch(8);
  std::iota(batch.begin(), batch.end(), 0);
  auto even = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
  const StepResult a =
      std::move(even->TrainStep(setup.data, SplitBatch(batch, 8, 4, RebatchRule::kV2), 8, 1e-3f, 0)).value();
  EXPECT_TRUE(a.check->within_bound) << a.check->explanation;
  EXPECT_TRUE(a.check->exact);
  batch.resize(6);  // split 2/2/1/1
  auto uneven = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
  const StepResult b =
      std::move(uneven->TrainStep(setup.data, SplitBatch(batch, 8, 4, RebatchRule::kV2), 8, 1e-3f, 0)).value();
  EXPECT_FALSE(b.check->within_bound);
  EXPECT_NE(b.check->explanation.find("Keras 3's sum_over_batch_size"), std::string::npos) << b.check->explanation;
}

// TF 2.12: compute_average_loss without global_batch_size on an empty replica
// raises; TF 2.13 and later give it 0; tf.reduce_mean gives NaN in every version.
TEST(ExactMode, EmptyReplicaUnderEachRule) {
  Lab setup("linear", 6, 8, 5);
  std::vector<std::int64_t> batch(3);
  std::iota(batch.begin(), batch.end(), 0);
  const auto split = SplitBatch(batch, 8, 4, RebatchRule::kLegacy);  // [1, 1, 1, 0]
  ASSERT_TRUE(split[3].empty());
  for (const MathMode math : {MathMode::kFast, MathMode::kExact}) {
    ClusterConfig config;
    config.math = math;
    config.strategy = StrategyKind::kMirrored;
    config.replicas = 4;
    config.denominator = LossDenominator::kDefault;
    auto zero = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
    const StepResult r = std::move(zero->TrainStep(setup.data, split, 8, 1e-3f, 1)).value();
    EXPECT_EQ(r.replica_losses[3], 0.0f);
    config.empty_replica = EmptyReplicaLoss::kError;
    auto error = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
    const auto failed = error->TrainStep(setup.data, split, 8, 1e-3f, 1);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), Status::Code::kRuntime);
    EXPECT_NE(failed.status().message().find("InvalidArgumentError: global_batch_size must be positive."),
              std::string::npos)
        << failed.status().message();
    config.denominator = LossDenominator::kGlobal;  // with global_batch_size, 0 in every version
    auto global = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
    EXPECT_EQ(std::move(global->TrainStep(setup.data, split, 8, 1e-3f, 1)).value().replica_losses[3], 0.0f);
    config.denominator = LossDenominator::kPerReplica;
    auto mean = std::move(Cluster::Create(*setup.model, config, "adam", {}, setup.params, 16)).value();
    EXPECT_TRUE(std::isnan(std::move(mean->TrainStep(setup.data, split, 8, 1e-3f, 1)).value().replica_losses[3]));
  }
}

}  // namespace
}  // namespace dtlab
