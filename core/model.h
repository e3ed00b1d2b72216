// Sequential: a stack of layers with named parameters, the models dtlab trains.
//
// A model owns layer descriptions only; parameter values are passed in as a
// ParameterList (one per replica). Parameter i has name parameter_names()[i], e.g.
// "conv2d/kernel"; the order is layer order, kernel before bias.
//
// Thread safety: const methods may run concurrently, each with its own Workspace.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/half_precision.h"
#include "core/layer.h"
#include "core/math_mode.h"
#include "core/status.h"

namespace dtlab {

template <typename T>
using ParameterList = std::vector<Tensor<T>>;

/// One trainable variable of a model.
struct ModelParameter {
  std::string name;  // "<layer>/<kernel|bias>"
  ParameterSpec spec;
  std::size_t layer;  // index of the owning layer
};

/// Whether a model as written ends in a softmax that the loss applies (a strong
/// type, so that no number converts to it by mistake).
enum class FinalSoftmax { kNone, kAppliedByLoss };

template <typename T>
class Sequential {
 public:
  /// Per-chunk scratch: activations of every layer and their caches.
  struct Workspace {
    std::vector<Tensor<T>> activations;  // activations[0] = input, [i+1] = layer i output
    std::vector<LayerCache<T>> caches;
    Tensor<T> gradient_a, gradient_b;            // ping-pong buffers for the backward pass
    ForwardContext context;                      // the chunk's step and examples (the runner's to fill)
    std::vector<std::uint64_t> example_streams;  // storage the context's example_streams may view
    ParameterList<T> half_params;                // a mixed policy: the parameters rounded to the half type
  };

  /// `example_shape` is one input example's shape. Each parameter's L2 regularizer
  /// factor is its layer's (ParameterSpec::l2). kAppliedByLoss: the model as
  /// written ends in a softmax that is not among `layers`: the loss applies it
  /// (docs/models.md, "A final softmax"); Forward's result is the logits either way.
  /// REQUIRES: the layers fit together (use MakeModel, which checks).
  Sequential(std::string name, Shape example_shape, std::vector<std::unique_ptr<Layer<T>>> layers,
             FinalSoftmax final_softmax = FinalSoftmax::kNone);

  const std::string& name() const { return name_; }
  const Shape& example_shape() const { return example_shape_; }
  std::int64_t num_classes() const { return num_classes_; }
  /// True if any parameter has an L2 regularizer (the model has `losses`).
  bool regularized() const { return regularized_; }
  bool softmax_output() const { return softmax_output_; }
  /// The description a model read from a file was built from, in dtlab's canonical
  /// Keras JSON (core/keras_model.h), which checkpoints record; empty for the
  /// built-in models, which their name identifies.
  const std::string& description_json() const { return description_json_; }
  void set_description_json(std::string json) { description_json_ = std::move(json); }
  /// The type the layers compute in (Keras's dtype policy): float32, or the half type
  /// of mixed_float16 / mixed_bfloat16. With a half type, Forward and Backward round
  /// to it at every layer boundary: the input, the parameters as a layer reads them
  /// (Keras's autocast), every layer's output, the gradient that reaches the logits
  /// and every input gradient between layers (docs/mixed_precision.md). Inside a
  /// layer the chains stay float32. The parameter gradients Backward writes are not
  /// rounded: the engine rounds a replica's whole gradient (sim/engines/cluster.cc).
  /// Float models only (the double instantiation ignores it).
  ComputeType compute_type() const { return compute_type_; }
  void set_compute_type(ComputeType type) { compute_type_ = type; }
  const std::vector<std::unique_ptr<Layer<T>>>& layers() const { return layers_; }
  const std::vector<ModelParameter>& parameters() const { return parameters_; }
  /// One example's input shape at layer `layer` (no batch dimension).
  const Shape& layer_input_shape(std::size_t layer) const {
    return layer == 0 ? example_shape_ : layer_output_shapes_[layer - 1];
  }
  /// The index of layer `layer`'s first parameter in parameters().
  std::size_t first_parameter(std::size_t layer) const { return first_parameter_[layer]; }
  std::int64_t num_parameter_values() const;
  /// A Keras-like summary table (layer, output shape, parameter count).
  std::string Summary() const;

  /// glorot_uniform kernels and zero biases; parameter i draws from
  /// CounterRng(seed, kWeightInit, i), so each is independent of all others.
  ParameterList<T> InitialParameters(std::uint64_t seed) const;
  /// How many terms one example adds to each element of parameter `p`'s gradient:
  /// the output positions of its layer (OH*OW for a convolution, 1 for a dense layer).
  std::int64_t GradientTermsPerExample(std::size_t p) const;
  /// Zero tensors shaped like the parameters (gradient buffers).
  ParameterList<T> ZeroParameters() const;

  /// Sum over the regularized parameters, in parameter order, of l2 * sum(w^2): the
  /// model's `losses`.
  T RegularizationLoss(const ParameterList<T>& params) const;
  /// grads[k] += (scale * l2) * (2 * w_k) for every element of every regularized
  /// parameter (its own l2), as TF differentiates scale * l2 * sum(w^2).
  void AddRegularizationGradient(const ParameterList<T>& params, T scale, ParameterList<T>& grads) const;

  /// Forward pass of a batch x [B, example_shape...]; returns the logits [B, classes]
  /// (stored in the workspace). ws.context says whether it is a training step (see
  /// ForwardContext); only Dropout reads it. In float the same for fast and exact mode: fixed-order
  /// chains, so an example's logits do not depend on its batch or the machine.
  const Tensor<T>& Forward(const ParameterList<T>& params, const Tensor<T>& x, Workspace& ws) const;
  /// Forward in pieces, for a runner that stops between layers (BatchNormalization's
  /// statistics, sim/compute/batch_runner.h): ForwardBegin takes the input (rounded
  /// under a half policy), ForwardLayers runs layers [from, to). Forward is
  /// ForwardBegin then ForwardLayers(0, layers().size()).
  void ForwardBegin(const ParameterList<T>& params, const Tensor<T>& x, Workspace& ws) const;
  void ForwardLayers(const ParameterList<T>& params, std::size_t from, std::size_t to, Workspace& ws) const;
  /// Backward in pieces: BackwardBegin gives the gradient at the logits (rounded under
  /// a half policy); BackwardLayers runs layers from-1 down to `to`, writing their
  /// parameters' gradients, and moves `dy` to the gradient at layer `to`'s input
  /// (null once layer 0 ran). Backward is BackwardBegin then BackwardLayers(size, 0).
  Tensor<T>* BackwardBegin(Tensor<T>& dlogits) const;
  void BackwardLayers(const ParameterList<T>& params, std::size_t from, std::size_t to, Tensor<T>*& dy, Workspace& ws,
                      ParameterList<T>& grads, ParameterList<T>* magnitudes = nullptr) const;
  /// BackwardExact in pieces, as BackwardLayers.
  void BackwardExactLayers(const ParameterList<T>& params, std::size_t from, std::size_t to, Tensor<T>*& dy,
                           Workspace& ws, std::vector<ExampleTerms>& terms) const;
  /// Backward pass after Forward: given dL/dlogits (used as scratch), overwrites
  /// grads with dL/dparams. The input gradient of the first layer is not computed.
  /// If `magnitudes` is not null, also overwrites it with each gradient element's
  /// sum of absolute terms (see Layer::Backward), for error bounds.
  void Backward(const ParameterList<T>& params, Tensor<T>& dlogits, Workspace& ws, ParameterList<T>& grads,
                ParameterList<T>* magnitudes = nullptr) const;
  /// Exact mode's backward pass after Forward: writes each parameter's
  /// per-example gradient terms into terms[p] (resized to the parameter count).
  void BackwardExact(const ParameterList<T>& params, Tensor<T>& dlogits, Workspace& ws,
                     std::vector<ExampleTerms>& terms) const;

 private:
  std::string name_;
  Shape example_shape_;
  std::vector<std::unique_ptr<Layer<T>>> layers_;
  bool softmax_output_ = false;
  bool regularized_ = false;
  std::string description_json_;
  std::int64_t num_classes_ = 0;
  std::vector<ModelParameter> parameters_;
  std::vector<std::size_t> first_parameter_;  // per layer, index into parameters_
  std::vector<Shape> layer_output_shapes_;
  ComputeType compute_type_ = ComputeType::kFloat32;
};

/// Name and one-line description of a built-in model.
struct ModelInfo {
  std::string name;
  std::string description;
};
std::vector<ModelInfo> ListModels();

/// True if `--model`'s value names a file rather than a built-in model: it holds a
/// '/' or ends in ".json".
bool IsModelFile(std::string_view name_or_file);

/// Builds a model for examples of `image_shape` {H, W, C} and `num_classes`
/// classes: a built-in model ("seed-cnn", "mnist-cnn", "linear"; its input and its
/// last Dense follow the data), or a Keras model.to_json() file (IsModelFile;
/// core/keras_model.h), whose input must hold the data's examples. NotFound for an
/// unknown name (the message lists the models); InvalidArgument for a file dtlab
/// cannot read or does not support (the message names the layer) and if the image
/// is too small. Defined in core/model_catalog.cc.
template <typename T>
StatusOr<std::unique_ptr<Sequential<T>>> MakeModel(std::string_view name, const Shape& image_shape, int num_classes);

}  // namespace dtlab
