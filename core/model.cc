#include "core/model.h"

#include <cmath>
#include <sstream>

#include "core/conv2d.h"
#include "core/dense.h"
#include "core/pooling.h"
#include "core/reshape.h"
#include "core/rng.h"

namespace dtlab {

template <typename T>
Sequential<T>::Sequential(std::string name, Shape example_shape, std::vector<std::unique_ptr<Layer<T>>> layers,
                          double l2)
    : name_(std::move(name)), example_shape_(std::move(example_shape)), layers_(std::move(layers)), l2_(l2) {
  Shape shape = example_shape_;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    first_parameter_.push_back(parameters_.size());
    for (auto& spec : layers_[l]->Parameters(shape))
      parameters_.push_back({layers_[l]->name() + "/" + spec.name, spec, l});
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
    std::string label = layers_[l]->name() + " (" + std::string(layers_[l]->kind()) + ")";
    label.resize(std::max<std::size_t>(label.size(), 32), ' ');
    std::string shape = ShapeToString(layer_output_shapes_[l]);
    shape.resize(std::max<std::size_t>(shape.size(), 18), ' ');
    out << "  " << label << shape << count << "\n";
  }
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
  if (l2_ == 0.0) return total;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (!parameters_[i].spec.is_kernel) continue;
    T squares = 0;
    for (const T w : params[i].span()) squares += w * w;
    total += static_cast<T>(l2_) * squares;
  }
  return total;
}

template <typename T>
void Sequential<T>::AddRegularizationGradient(const ParameterList<T>& params, T scale, ParameterList<T>& grads) const {
  if (l2_ == 0.0) return;
  const T coefficient = scale * static_cast<T>(l2_);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (!parameters_[i].spec.is_kernel) continue;
    const T* w = params[i].data();
    T* g = grads[i].data();
    for (std::int64_t k = 0; k < params[i].size(); ++k) g[k] += coefficient * (w[k] * T(2));
  }
}

template <typename T>
const Tensor<T>& Sequential<T>::Forward(const ParameterList<T>& params, const Tensor<T>& x, Workspace& ws) const {
  ws.activations.resize(layers_.size() + 1);
  ws.caches.resize(layers_.size());
  Shape input_shape = example_shape_;
  input_shape.insert(input_shape.begin(), x.dim(0));
  ws.activations[0].Resize(input_shape);
  std::copy(x.data(), x.data() + x.size(), ws.activations[0].data());
  std::vector<const Tensor<T>*> layer_params;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    layer_params.clear();
    for (std::size_t p = first_parameter_[l]; p < first_parameter_[l + 1]; ++p) layer_params.push_back(&params[p]);
    layers_[l]->Forward(layer_params, ws.activations[l], ws.activations[l + 1], ws.caches[l]);
  }
  return ws.activations.back();
}

template <typename T>
void Sequential<T>::Backward(const ParameterList<T>& params, Tensor<T>& dlogits, Workspace& ws, ParameterList<T>& grads,
                             ParameterList<T>* magnitudes) const {
  Tensor<T>* dy = &dlogits;
  std::vector<const Tensor<T>*> layer_params;
  std::vector<Tensor<T>*> layer_grads, layer_magnitudes;
  for (std::size_t l = layers_.size(); l-- > 0;) {
    layer_params.clear();
    layer_grads.clear();
    layer_magnitudes.clear();
    for (std::size_t p = first_parameter_[l]; p < first_parameter_[l + 1]; ++p) {
      layer_params.push_back(&params[p]);
      layer_grads.push_back(&grads[p]);
      if (magnitudes) layer_magnitudes.push_back(&(*magnitudes)[p]);
    }
    Tensor<T>* dx = l == 0 ? nullptr : (dy == &ws.gradient_a ? &ws.gradient_b : &ws.gradient_a);
    layers_[l]->Backward(layer_params, ws.activations[l], ws.activations[l + 1], *dy, dx, layer_grads, ws.caches[l],
                         layer_magnitudes);
    dy = dx;
  }
}

template <typename T>
void Sequential<T>::BackwardExact(const ParameterList<T>& params, Tensor<T>& dlogits, Workspace& ws,
                                  std::vector<ExampleTerms>& terms) const {
  terms.resize(parameters_.size());
  Tensor<T>* dy = &dlogits;
  std::vector<const Tensor<T>*> layer_params;
  std::vector<ExampleTerms*> layer_terms;
  for (std::size_t l = layers_.size(); l-- > 0;) {
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

std::vector<ModelInfo> ListModels() {
  return {
      {"seed-cnn",
       "Conv2D 32 3x3 relu, MaxPool, Conv2D 64 3x3 relu, MaxPool, Flatten, Dense 64 relu, Dense 10; L2 1e-5 "
       "(the tf.distribute custom-training tutorial's model)"},
      {"mnist-cnn",
       "Reshape 28x28x1, Conv2D 32 3x3 relu, Flatten, Dense 128 relu, Dense 10; L2 1e-5 "
       "(the multi-worker tutorial's model)"},
      {"linear", "Flatten, Dense 10: softmax regression, small enough to follow by hand"},
  };
}

template <typename T>
StatusOr<std::unique_ptr<Sequential<T>>> MakeModel(std::string_view name, const Shape& image_shape, int num_classes) {
  std::vector<std::unique_ptr<Layer<T>>> layers;
  Shape example_shape = image_shape;
  double l2 = 1e-5;
  const auto relu = Activation::kRelu, linear = Activation::kLinear;
  if (name == "seed-cnn") {
    layers.push_back(std::make_unique<Conv2D<T>>("conv2d", 32, 3, 3, relu));
    layers.push_back(std::make_unique<MaxPooling2D<T>>("max_pooling2d"));
    layers.push_back(std::make_unique<Conv2D<T>>("conv2d_1", 64, 3, 3, relu));
    layers.push_back(std::make_unique<MaxPooling2D<T>>("max_pooling2d_1"));
    layers.push_back(std::make_unique<Reshape<T>>("flatten", Shape{}));
    layers.push_back(std::make_unique<Dense<T>>("dense", 64, relu));
    layers.push_back(std::make_unique<Dense<T>>("dense_1", num_classes, linear));
  } else if (name == "mnist-cnn") {
    // The multi-worker tutorial feeds 28x28 images and reshapes them to 28x28x1.
    if (image_shape.size() == 3 && image_shape[2] == 1) example_shape = {image_shape[0], image_shape[1]};
    layers.push_back(std::make_unique<Reshape<T>>("reshape", image_shape));
    layers.push_back(std::make_unique<Conv2D<T>>("conv2d", 32, 3, 3, relu));
    layers.push_back(std::make_unique<Reshape<T>>("flatten", Shape{}));
    layers.push_back(std::make_unique<Dense<T>>("dense", 128, relu));
    layers.push_back(std::make_unique<Dense<T>>("dense_1", num_classes, linear));
  } else if (name == "linear") {
    l2 = 0.0;
    layers.push_back(std::make_unique<Reshape<T>>("flatten", Shape{}));
    layers.push_back(std::make_unique<Dense<T>>("dense", num_classes, linear));
  } else {
    std::string names;
    for (const auto& m : ListModels()) names += (names.empty() ? "" : ", ") + m.name;
    return Status::NotFound("unknown model '" + std::string(name) + "' (available: " + names + ")");
  }
  Shape shape = example_shape;
  for (const auto& layer : layers) {
    shape = layer->OutputShape(shape);
    if (shape.empty())
      return Status::InvalidArgument("model '" + std::string(name) + "' does not fit input images of shape " +
                                     ShapeToString(image_shape) + " (layer " + layer->name() + ")");
  }
  return std::make_unique<Sequential<T>>(std::string(name), example_shape, std::move(layers), l2);
}

template class Sequential<float>;
template class Sequential<double>;
template StatusOr<std::unique_ptr<Sequential<float>>> MakeModel<float>(std::string_view, const Shape&, int);
template StatusOr<std::unique_ptr<Sequential<double>>> MakeModel<double>(std::string_view, const Shape&, int);

}  // namespace dtlab
