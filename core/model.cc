#include "core/model.h"

#include <cmath>
#include <sstream>
#include <type_traits>

#include "core/rng.h"

namespace dtlab {

template <typename T>
Sequential<T>::Sequential(std::string name, Shape example_shape, std::vector<std::unique_ptr<Layer<T>>> layers,
                          FinalSoftmax final_softmax)
    : name_(std::move(name)),
      example_shape_(std::move(example_shape)),
      layers_(std::move(layers)),
      softmax_output_(final_softmax == FinalSoftmax::kAppliedByLoss) {
  Shape shape = example_shape_;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    first_parameter_.push_back(parameters_.size());
    for (auto& spec : layers_[l]->Parameters(shape)) {
      regularized_ |= spec.l2 != 0.0;
      parameters_.push_back({layers_[l]->name() + "/" + spec.name, spec, l});
    }
    shape = layers_[l]->OutputShape(shape);
    layer_output_shapes_.push_back(shape);
  }
  first_parameter_.push_back(parameters_.size());
  num_classes_ = shape.size() == 1 ? shape[0] : 0;
}

template <typename T>
std::int64_t Sequential<T>::num_parameter_values() const {
  std::int64_t n = 0;
  for (const auto& p : parameters_) n += NumElements(p.spec.shape);
  return n;
}

template <typename T>
std::string Sequential<T>::Summary() const {
  std::ostringstream out;
  out << "Model: \"" << name_ << "\"  (input " << ShapeToString(example_shape_) << ")\n";
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    std::int64_t count = 0;
    for (std::size_t p = first_parameter_[l]; p < first_parameter_[l + 1]; ++p)
      count += NumElements(parameters_[p].spec.shape);
    // Columns of 32 and 18 characters, and at least one space after a longer cell.
    std::string label = layers_[l]->name() + " (" + std::string(layers_[l]->kind()) + ")";
    label.resize(std::max<std::size_t>(label.size() + 1, 32), ' ');
    std::string shape = ShapeToString(layer_output_shapes_[l]);
    shape.resize(std::max<std::size_t>(shape.size() + 1, 18), ' ');
    out << "  " << label << shape << count << "\n";
  }
  if (softmax_output_) out << "  (softmax)                       applied by the loss, as Keras does\n";
  out << "  Total params: " << num_parameter_values() << "\n";
  return out.str();
}

template <typename T>
ParameterList<T> Sequential<T>::InitialParameters(std::uint64_t seed) const {
  ParameterList<T> params;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const ParameterSpec& spec = parameters_[i].spec;
    Tensor<T> t(spec.shape);
    if (spec.is_kernel) {
      // Keras GlorotUniform: limit = sqrt(6 / (fan_in + fan_out)), uniform(-limit, limit),
      // computed in float32 as minval + (maxval - minval) * u.
      const float limit = static_cast<float>(std::sqrt(6.0 / static_cast<double>(spec.fan_in + spec.fan_out)));
      CounterRng rng(seed, RngPurpose::kWeightInit, i);
      for (std::int64_t k = 0; k < t.size(); ++k) t[k] = static_cast<T>(-limit + (limit + limit) * rng.UniformFloat());
    } else if (spec.initial_value != 0.0f) {
      for (std::int64_t k = 0; k < t.size(); ++k) t[k] = static_cast<T>(spec.initial_value);
    }
    params.push_back(std::move(t));
  }
  return params;
}

template <typename T>
std::int64_t Sequential<T>::GradientTermsPerExample(std::size_t p) const {
  const Shape& out = layer_output_shapes_[parameters_[p].layer];
  return NumElements(Shape(out.begin(), out.end() - 1));
}

template <typename T>
ParameterList<T> Sequential<T>::ZeroParameters() const {
  ParameterList<T> params;
  for (const auto& p : parameters_) params.emplace_back(p.spec.shape);
  return params;
}

template <typename T>
T Sequential<T>::RegularizationLoss(const ParameterList<T>& params) const {
  T total = 0;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const double l2 = parameters_[i].spec.l2;
    if (l2 == 0.0) continue;
    T squares = 0;
    for (const T w : params[i].span()) squares += w * w;
    total += static_cast<T>(l2) * squares;
  }
  return total;
}

template <typename T>
void Sequential<T>::AddRegularizationGradient(const ParameterList<T>& params, T scale, ParameterList<T>& grads) const {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const double l2 = parameters_[i].spec.l2;
    if (l2 == 0.0) continue;
    const T coefficient = scale * static_cast<T>(l2);
    const T* w = params[i].data();
    T* g = grads[i].data();
    for (std::int64_t k = 0; k < params[i].size(); ++k) g[k] += coefficient * (w[k] * T(2));
  }
}

namespace {

// The compute type a float model rounds to (float32: none); a double model never rounds.
template <typename T>
ComputeType RoundingType(ComputeType type) {
  return std::is_same_v<T, float> ? type : ComputeType::kFloat32;
}

template <typename T>
void RoundTensor(Tensor<T>& t, ComputeType type) {
  if constexpr (std::is_same_v<T, float>) RoundToComputeType(t.span(), type);
}

}  // namespace

template <typename T>
const Tensor<T>& Sequential<T>::Forward(const ParameterList<T>& params, const Tensor<T>& x, Workspace& ws) const {
  ForwardBegin(params, x, ws);
  ForwardLayers(params, 0, layers_.size(), ws);
  return ws.activations.back();
}

template <typename T>
void Sequential<T>::ForwardBegin(const ParameterList<T>& params, const Tensor<T>& x, Workspace& ws) const {
  const ComputeType type = RoundingType<T>(compute_type_);
  ws.activations.resize(layers_.size() + 1);
  ws.caches.resize(layers_.size());
  Shape input_shape = example_shape_;
  input_shape.insert(input_shape.begin(), x.dim(0));
  ws.activations[0].Resize(input_shape);
  std::copy(x.data(), x.data() + x.size(), ws.activations[0].data());
  if (type != ComputeType::kFloat32) {
    RoundTensor(ws.activations[0], type);
    ws.half_params = params;
    for (Tensor<T>& p : ws.half_params) RoundTensor(p, type);
  }
}

template <typename T>
void Sequential<T>::ForwardLayers(const ParameterList<T>& params, std::size_t from, std::size_t to,
                                  Workspace& ws) const {
  const ComputeType type = RoundingType<T>(compute_type_);
  const ParameterList<T>& used = type != ComputeType::kFloat32 ? ws.half_params : params;
  std::vector<const Tensor<T>*> layer_params;
  for (std::size_t l = from; l < to; ++l) {
    layer_params.clear();
    for (std::size_t p = first_parameter_[l]; p < first_parameter_[l + 1]; ++p) layer_params.push_back(&used[p]);
    ws.caches[l].context = &ws.context;
    ws.caches[l].layer = l;
    layers_[l]->Forward(layer_params, ws.activations[l], ws.activations[l + 1], ws.caches[l]);
    if (type != ComputeType::kFloat32) RoundTensor(ws.activations[l + 1], type);
  }
}

template <typename T>
void Sequential<T>::Backward(const ParameterList<T>& params, Tensor<T>& dlogits, Workspace& ws, ParameterList<T>& grads,
                             ParameterList<T>* magnitudes) const {
  Tensor<T>* dy = BackwardBegin(dlogits);
  BackwardLayers(params, layers_.size(), 0, dy, ws, grads, magnitudes);
}

template <typename T>
Tensor<T>* Sequential<T>::BackwardBegin(Tensor<T>& dlogits) const {
  // A half policy: the gradient that reaches the logits is rounded too.
  const ComputeType type = RoundingType<T>(compute_type_);
  if (type != ComputeType::kFloat32) RoundTensor(dlogits, type);
  return &dlogits;
}

template <typename T>
void Sequential<T>::BackwardLayers(const ParameterList<T>& params, std::size_t from, std::size_t to, Tensor<T>*& dy,
                                   Workspace& ws, ParameterList<T>& grads, ParameterList<T>* magnitudes) const {
  // A half policy: the layers read the parameters Forward rounded, and the gradient
  // that crosses a layer boundary is rounded too.
  const ComputeType type = RoundingType<T>(compute_type_);
  const ParameterList<T>& used = type != ComputeType::kFloat32 ? ws.half_params : params;
  std::vector<const Tensor<T>*> layer_params;
  std::vector<Tensor<T>*> layer_grads, layer_magnitudes;
  for (std::size_t l = from; l-- > to;) {
    layer_params.clear();
    layer_grads.clear();
    layer_magnitudes.clear();
    for (std::size_t p = first_parameter_[l]; p < first_parameter_[l + 1]; ++p) {
      layer_params.push_back(&used[p]);
      layer_grads.push_back(&grads[p]);
      if (magnitudes) layer_magnitudes.push_back(&(*magnitudes)[p]);
    }
    Tensor<T>* dx = l == 0 ? nullptr : (dy == &ws.gradient_a ? &ws.gradient_b : &ws.gradient_a);
    layers_[l]->Backward(layer_params, ws.activations[l], ws.activations[l + 1], *dy, dx, layer_grads, ws.caches[l],
                         layer_magnitudes);
    if (dx != nullptr && type != ComputeType::kFloat32) RoundTensor(*dx, type);
    dy = dx;
  }
}

template <typename T>
void Sequential<T>::BackwardExact(const ParameterList<T>& params, Tensor<T>& dlogits, Workspace& ws,
                                  std::vector<ExampleTerms>& terms) const {
  Tensor<T>* dy = &dlogits;
  BackwardExactLayers(params, layers_.size(), 0, dy, ws, terms);
}

template <typename T>
void Sequential<T>::BackwardExactLayers(const ParameterList<T>& params, std::size_t from, std::size_t to,
                                        Tensor<T>*& dy, Workspace& ws, std::vector<ExampleTerms>& terms) const {
  terms.resize(parameters_.size());
  std::vector<const Tensor<T>*> layer_params;
  std::vector<ExampleTerms*> layer_terms;
  for (std::size_t l = from; l-- > to;) {
    layer_params.clear();
    layer_terms.clear();
    for (std::size_t p = first_parameter_[l]; p < first_parameter_[l + 1]; ++p) {
      layer_params.push_back(&params[p]);
      layer_terms.push_back(&terms[p]);
    }
    Tensor<T>* dx = l == 0 ? nullptr : (dy == &ws.gradient_a ? &ws.gradient_b : &ws.gradient_a);
    layers_[l]->BackwardExact(layer_params, ws.activations[l], ws.activations[l + 1], *dy, dx, layer_terms,
                              ws.caches[l]);
    dy = dx;
  }
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace dtlab
