// The loss-scaling property API (sim/check/loss_check.h): a correct user loss passes, a
// deliberately wrong one is caught with a small counterexample in words, the same
// seed replays the same result, and the built-in properties behave as documented.
#include <gtest/gtest.h>

#include "sim/check/loss_check.h"

namespace dtlab {
namespace {

// A user's loss code as they would write it in a custom training loop.
LossScalingCode UserCode(bool divide_by_global_batch) {
  LossScalingCode code;
  code.loss = [divide_by_global_batch](std::span<const double> losses, std::span<const double> weights,
                                       const ReplicaInfo& replica) {
    double sum = 0;
    for (std::size_t i = 0; i < losses.size(); ++i) sum += losses[i] * (weights.empty() ? 1.0 : weights[i]);
    // The bug: dividing by the replica's own batch (tf.reduce_mean's denominator).
    const double denominator = divide_by_global_batch ? static_cast<double>(replica.global_batch_size)
                                                      : static_cast<double>(replica.local_batch);
    return denominator == 0 ? 0.0 : sum / denominator;
  };
  code.regularization = [](double r, const ReplicaInfo& replica) { return replica.replica_id == 0 ? r : 0.0; };
  return code;
}

TEST(LossCheck, CorrectUserLossPasses) {
  CheckOptions options;
  options.trials = 300;
  options.seed = 17;
  const CheckResult r = CheckLossScaling(UserCode(true), options);
  EXPECT_TRUE(r.passed) << r.counterexample << r.error;
  EXPECT_EQ(r.trials, 300);
}

TEST(LossCheck, WrongUserLossIsCaughtWithASmallCounterexample) {
  CheckOptions options;
  options.trials = 300;
  options.seed = 17;
  const CheckResult r = CheckLossScaling(UserCode(false), options);
  ASSERT_FALSE(r.passed);
  EXPECT_TRUE(r.error.empty()) << r.error;
  // Shrunk to a handful of replicas and examples, and said in words.
  EXPECT_NE(r.counterexample.find("replica"), std::string::npos) << r.counterexample;
  EXPECT_NE(r.counterexample.find("weighs"), std::string::npos) << r.counterexample;
  EXPECT_NE(r.counterexample.find("the distributed gradient differs"), std::string::npos) << r.counterexample;
  EXPECT_EQ(r.counterexample.rfind("1 replica", 0) == 0 || r.counterexample.rfind("2 replicas", 0) == 0, true)
      << r.counterexample;
  // The same seed replays the same failure.
  const CheckResult again = CheckLossScaling(UserCode(false), options);
  EXPECT_EQ(again.counterexample, r.counterexample);
}

TEST(LossCheck, NonLinearLossCodeIsReported) {
  LossScalingCode code = UserCode(true);
  code.loss = [](std::span<const double> losses, std::span<const double>, const ReplicaInfo&) {
    return 1.0 + (losses.empty() ? 0.0 : losses[0]);
  };
  CheckOptions options;
  options.trials = 20;
  options.seed = 3;
  const CheckResult r = CheckLossScaling(code, options);
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.counterexample.find("not linear"), std::string::npos) << r.counterexample;
}

// A hand-made case: the example of the default denominator.
TEST(LossCheck, DefaultDenominatorOnAShortReplicaInWords) {
  CheckCase c;
  c.replicas = 2;
  c.global_batch = 3;
  c.batch = 3;
  c.split = {2, 1};
  const std::string text = EvaluateLossScalingCase(DefaultDenominatorScaling(), c, true);
  EXPECT_NE(text.find("2 replicas (1 worker), global batch 3 split [2, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("example 3 (on replica 1) weighs 1.5x"), std::string::npos) << text;
  EXPECT_TRUE(EvaluateLossScalingCase(TfCorrectScaling(), c, true).empty());
}

// TF's 1/N regularization share is right in real numbers; with N = 3 it is not
// bitwise (docs/exact.md), and the check says so unless bitwise is off.
TEST(LossCheck, TfRegularizationSplitIsRightButNotBitwiseForThreeReplicas) {
  LossScalingCode code = TfCorrectScaling();
  code.regularization = [](double r, const ReplicaInfo& replica) { return r / replica.num_replicas_in_sync; };
  CheckCase c;
  c.replicas = 3;
  c.global_batch = 6;
  c.batch = 6;
  c.split = {2, 2, 2};
  const std::string text = EvaluateLossScalingCase(code, c, true);
  EXPECT_NE(text.find("every weight is right but"), std::string::npos) << text;
  EXPECT_TRUE(EvaluateLossScalingCase(code, c, false).empty());
  c.replicas = 2;
  c.split = {3, 3};
  EXPECT_TRUE(EvaluateLossScalingCase(code, c, true).empty());
}

TEST(LossCheck, BuiltinPropertiesBehaveAsDocumented) {
  CheckOptions options;
  options.trials = 200;
  options.seed = 99;
  for (const BuiltinProperty& p : BuiltinProperties()) {
    const CheckResult r = p.run(options);
    EXPECT_TRUE(r.error.empty()) << p.name << ": " << r.error;
    EXPECT_EQ(r.passed, p.expect_pass) << p.name << ": " << r.counterexample;
    if (!p.expect_pass) {
      // At most a handful of replicas: the counterexample starts with the count.
      const int replicas = std::atoi(r.counterexample.c_str());
      EXPECT_GE(replicas, 1) << p.name << ": " << r.counterexample;
      EXPECT_LE(replicas, 4) << p.name << ": " << r.counterexample;
    }
  }
}

}  // namespace
}  // namespace dtlab
