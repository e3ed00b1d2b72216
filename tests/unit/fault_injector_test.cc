// FaultInjector (sim/engines/fault_injector.h) around a compute backend, without a Cluster:
// the compute it wraps runs, then the step's throw fault stops the step and its nan
// fault lands in the named replica's gradient; the step's message faults and
// stragglers are prepared for the transport; other steps are left alone.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/batch.h"
#include "core/exact_sum.h"
#include "sim/engines/fault_injector.h"

namespace dtlab {
namespace {

// A compute backend that counts its calls and fills the gradients with ones.
class CountingCompute final : public ComputeBackend {
 public:
  int calls = 0;
  std::string Description() const override { return "counting"; }
  Status Run(const Tensor<float>&, std::span<const std::int32_t>, std::span<const float>, std::span<float>,
             std::span<std::int32_t>, std::span<const BatchSegment> segments) override {
    ++calls;
    for (const BatchSegment& s : segments)
      for (auto& g : *s.grads) std::fill(g.data(), g.data() + g.size(), 1.0f);
    return Status::Ok();
  }
  Status RunExact(const Tensor<float>&, std::span<const std::int32_t>, std::span<const float>, std::span<float>,
                  std::span<std::int32_t>, std::span<const ExactSegment> segments) override {
    ++calls;
    for (const ExactSegment& s : segments) std::fill(s.grad_words.begin(), s.grad_words.end(), 0);
    return Status::Ok();
  }
};

struct Fixture {
  std::unique_ptr<Sequential<float>> model = std::move(MakeModel<float>("linear", {4, 4, 1}, 3)).value();
  ParameterList<float> params = model->InitialParameters(1);
  std::vector<ParameterList<float>> grads{model->ZeroParameters(), model->ZeroParameters()};
  std::vector<BatchSegment> segments{{&params, 0, 0, &grads[0], nullptr}, {&params, 0, 0, &grads[1], nullptr}};
  Tensor<float> images;
  FaultSpec Fault(const std::string& text) { return *ParseFaultSpec(text); }
  Status Step(FaultInjector& faults, CountingCompute& base, std::int64_t step) {
    return faults.WrapCompute(base, 0, step)->Run(images, {}, {}, {}, {}, segments);
  }
};

TEST(FaultInjector, AThrowFaultStopsItsStepOnly) {
  Fixture f;
  FaultInjector faults({f.Fault("throw:replica=1,step=3")}, *f.model, 2, 60);
  CountingCompute base;
  EXPECT_TRUE(f.Step(faults, base, 2).ok());
  const Status thrown = f.Step(faults, base, 3);
  EXPECT_EQ(thrown.code(), Status::Code::kRuntime);
  EXPECT_NE(thrown.message().find("step 3: replica 1 raised an exception in layer"), std::string::npos)
      << thrown.message();
  EXPECT_NE(thrown.message().find("; the step was not applied"), std::string::npos);
  EXPECT_EQ(base.calls, 2) << "the compute it wraps still runs";
}

TEST(FaultInjector, ANanFaultLandsInItsReplicasGradient) {
  Fixture f;
  const std::string variable = f.model->parameters().back().name;
  FaultInjector faults({f.Fault("nan:replica=1,step=2,variable=" + variable + ",value=inf")}, *f.model, 2, 60);
  CountingCompute base;
  ASSERT_TRUE(f.Step(faults, base, 2).ok());
  EXPECT_TRUE(std::isinf(f.grads[1].back().data()[0]));
  EXPECT_EQ(f.grads[0].back().data()[0], 1.0f) << "another replica";
  EXPECT_EQ(faults.injected_nan(), "nan:replica=1,step=2,variable=" + variable + ",value=inf");
}

TEST(FaultInjector, PreparesMessageFaultsAndStragglers) {
  Fixture f;
  FaultInjector faults({f.Fault("drop:replica=1,step=2"), f.Fault("die:replica=0,step=1"),
                        f.Fault("straggler:replica=1,step=2,seconds=5")},
                       *f.model, 2, 60);
  std::vector<double> stragglers;
  ASSERT_TRUE(faults.BeginStep(2, stragglers).ok());
  EXPECT_EQ(faults.message_faults()->messages.size(), 1u);
  EXPECT_EQ(faults.message_faults()->dead, (std::vector<char>{1, 0}));
  EXPECT_EQ(stragglers, (std::vector<double>{0, 5}));
  FaultInjector late({f.Fault("straggler:replica=1,step=1,seconds=90")}, *f.model, 2, 60);
  const Status timed_out = late.BeginStep(1, stragglers);
  EXPECT_EQ(timed_out.code(), Status::Code::kRuntime);
  EXPECT_NE(timed_out.message().find("timed out after 60 s"), std::string::npos) << timed_out.message();
}

TEST(FaultInjector, RefusesLayersAndVariablesTheModelLacks) {
  Fixture f;
  EXPECT_FALSE(FaultInjector::CheckAgainstModel({f.Fault("throw:replica=0,step=1,layer=nowhere")}, *f.model).ok());
  EXPECT_FALSE(FaultInjector::CheckAgainstModel({f.Fault("nan:replica=0,step=1,variable=nowhere")}, *f.model).ok());
  EXPECT_TRUE(FaultInjector::CheckAgainstModel({f.Fault("die:replica=0,step=1")}, *f.model).ok());
}

}  // namespace
}  // namespace dtlab
