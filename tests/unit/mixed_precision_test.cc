// Keras's mixed dtype policies in the model (core/model.h: values rounded to the
// half type at every layer boundary) and their options (sim/engines/mixed_precision.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half_precision.h"
#include "core/model.h"
#include "sim/engines/mixed_precision.h"

namespace dtlab {
namespace {

Tensor<float> Images(std::int64_t n) {
  Tensor<float> x({n, 12, 12, 1});
  for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  return x;
}

bool AllRepresentable(const Tensor<float>& t, ComputeType type) {
  for (std::int64_t i = 0; i < t.size(); ++i) {
    float v = t.data()[i];
    RoundToComputeType(std::span(&v, 1), type);
    if (v != t.data()[i] && !(std::isnan(v) && std::isnan(t.data()[i]))) return false;
  }
  return true;
}

TEST(MixedPrecisionModel, EveryLayerBoundaryHoldsHalfValues) {
  for (const ComputeType type : {ComputeType::kFloat16, ComputeType::kBFloat16}) {
    SCOPED_TRACE(std::string(PrecisionName(type)));
    auto model = std::move(MakeModel<float>("seed-cnn", {12, 12, 1}, 10)).value();
    const ParameterList<float> params = model->InitialParameters(5);
    const Tensor<float> x = Images(6);
    Sequential<float>::Workspace full, half;
    const Tensor<float> y32 = model->Forward(params, x, full);
    model->set_compute_type(type);
    const Tensor<float>& y16 = model->Forward(params, x, half);
    for (const Tensor<float>& a : half.activations) EXPECT_TRUE(AllRepresentable(a, type));
    for (const Tensor<float>& p : half.half_params) EXPECT_TRUE(AllRepresentable(p, type));
    // The variables themselves stay float32 and the policy changes the result.
    EXPECT_FALSE(AllRepresentable(params[0], type));
    bool differs = false;
    for (std::int64_t i = 0; i < y32.size(); ++i) differs |= y32.data()[i] != y16.data()[i];
    EXPECT_TRUE(differs);

    // Backward rounds the input gradients between layers; the parameter gradients
    // are float32 sums (the engine rounds a replica's whole gradient).
    Tensor<float> dlogits({6, 10});
    for (std::int64_t i = 0; i < dlogits.size(); ++i) dlogits.data()[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
    ParameterList<float> grads = model->ZeroParameters();
    model->Backward(params, dlogits, half, grads, nullptr);
    EXPECT_TRUE(AllRepresentable(dlogits, type));
    EXPECT_TRUE(AllRepresentable(half.gradient_a, type) || half.gradient_a.size() == 0);
    EXPECT_TRUE(AllRepresentable(half.gradient_b, type) || half.gradient_b.size() == 0);
    model->set_compute_type(ComputeType::kFloat32);
    Sequential<float>::Workspace again;
    const Tensor<float>& y_back = model->Forward(params, x, again);
    for (std::int64_t i = 0; i < y32.size(); ++i) ASSERT_EQ(y32.data()[i], y_back.data()[i]);
  }
}

TEST(MixedPrecisionOptions, NamesRoundTripAndBadValuesAreRefused) {
  for (const char* name : {"float32", "mixed_float16", "mixed_bfloat16"})
    EXPECT_EQ(PrecisionName(ParsePrecision(name).value()), name);
  for (const char* name : {"reduced", "first-replica", "each-replica"})
    EXPECT_EQ(LossScaleCheckName(ParseLossScaleCheck(name).value()), name);
  EXPECT_FALSE(ParsePrecision("float16").ok());
  EXPECT_FALSE(ParseLossScaleCheck("all").ok());

  MixedPrecision precision;
  precision.initial_scale = 0;
  EXPECT_TRUE(precision.Validate().ok());  // no loss scale: its settings are not used
  precision.dynamic_loss_scale = true;
  EXPECT_NE(precision.Validate().message().find("--loss-scale-initial"), std::string::npos);
  precision.initial_scale = std::nanf("");
  EXPECT_FALSE(precision.Validate().ok());
  precision.initial_scale = 1024;
  EXPECT_TRUE(precision.Validate().ok());
  precision.growth_steps = 0;
  EXPECT_NE(precision.Validate().message().find("--loss-scale-growth-steps"), std::string::npos);
}

}  // namespace
}  // namespace dtlab
