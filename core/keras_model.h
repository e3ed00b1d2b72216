// Sequential models from Keras's model.to_json() (docs/models.md): the JSON walk,
// the input shape, the checks that a model fits the data and memory, and the build.
//
// Nothing read is trusted: the file is a regular file of at most kMaxModelFileBytes,
// its nesting is checked before nlohmann parses it, every number is range-checked,
// names stay names ([A-Za-z0-9_.-], unique), and the built model's activations,
// patch matrices and parameters are bounded, with overflow-checked products, before
// anything is allocated. Every refusal is InvalidArgument (exit 2) naming the layer
// ("layers[3] 'conv2d_1' (Conv2D): ...") and what is supported.
//
// Thread safety: pure functions (ReadKerasModelFile reads the file system).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/keras_layers.h"
#include "core/model.h"
#include "core/status.h"

namespace dtlab {

inline constexpr std::size_t kMaxModelFileBytes = std::size_t{4} << 20;
inline constexpr int kMaxModelJsonDepth = 12;  // Keras nests 8 levels (a layer's initializer's config's list)
inline constexpr std::size_t kMaxModelLayers = 256;
/// One example's values in any activation or convolution patch matrix (256 MiB of
/// floats); a chunk of 16 then still indexes with int32 (MaxPooling2D's argmax).
inline constexpr std::int64_t kMaxValuesPerExample = std::int64_t{1} << 26;
/// Values of one parameter, and of all of them (1 GiB of floats).
inline constexpr std::int64_t kMaxParameterValues = std::int64_t{1} << 28;

/// A Sequential model as a Keras JSON text describes it: checked, not yet built.
struct KerasModel {
  std::string name;                 // the model's name ("sequential")
  Shape input_shape;                // one example: the InputLayer's batch_shape without the batch
  std::vector<LayerRecipe> layers;  // in order; an activation='softmax' adds a layer
  std::string canonical_json;       // the text written compactly with sorted keys: what a checkpoint records
};

/// Parses and checks a model.to_json() text. `source` names it in messages (a path).
StatusOr<KerasModel> ParseKerasModel(std::string_view text, std::string_view source);

/// Reads `path` (a regular file of at most kMaxModelFileBytes) and parses it.
StatusOr<KerasModel> ReadKerasModelFile(const std::string& path);

/// Builds `model` for examples of `image_shape` {H, W, C} and `num_classes` classes.
/// The model's input must hold an example's values in order: {H, W, C}, {H, W}
/// when C = 1, or {H * W * C}. Each layer must fit its input; the output must be a
/// vector of at least num_classes logits (a final softmax is left to the loss,
/// Sequential::softmax_output); sizes are bounded as above. The Sequential's name
/// is `name`. Errors are InvalidArgument, prefixed with `source`.
template <typename T>
StatusOr<std::unique_ptr<Sequential<T>>> BuildKerasModel(const KerasModel& model, const Shape& image_shape,
                                                         std::int64_t num_classes, const std::string& name,
                                                         std::string_view source);

/// ParseKerasModel, then BuildKerasModel named after the Keras model, which keeps
/// the canonical JSON (Sequential::description_json): a model file, or the
/// description a checkpoint recorded.
template <typename T>
StatusOr<std::unique_ptr<Sequential<T>>> LoadKerasModel(std::string_view text, std::string_view source,
                                                        const Shape& image_shape, std::int64_t num_classes);

}  // namespace dtlab
