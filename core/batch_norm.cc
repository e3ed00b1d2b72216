#include "core/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/exact_sum.h"

namespace dtlab {

namespace {

// The layer computes its own statistics over x (no runner gave them) into mean[C]
// and variance[C]: the runner's sums in float (so one chunk holding the whole batch
// gives the runner's bits), plain double sums in the tests' double models.
template <typename T>
void OwnForwardMoments(const Tensor<T>& x, std::int64_t channels, T* mean, T* variance) {
  const std::int64_t batch = x.dim(0);
  const std::int64_t positions = batch == 0 ? 0 : x.size() / batch / channels;
  if constexpr (std::is_same_v<T, float>) {
    std::vector<std::int64_t> words(static_cast<std::size_t>(BatchNormWords(channels)), 0);
    AddForwardSums(x, words);
    BatchNormStatistics stats;
    FinishForwardSums(words, positions, stats);
    std::copy(stats.mean.begin(), stats.mean.end(), mean);
    std::copy(stats.variance.begin(), stats.variance.end(), variance);
  } else {
    const auto C = static_cast<std::size_t>(channels);
    std::vector<double> s1(C, 0), s2(C, 0);
    for (std::int64_t i = 0; i < x.size(); ++i) {
      const auto c = static_cast<std::size_t>(i % channels);
      s1[c] += x[i];
      s2[c] += x[i] * x[i];
    }
    const double n = static_cast<double>(batch * positions);
    for (std::size_t c = 0; c < C; ++c) {
      mean[c] = s1[c] / n;
      variance[c] = std::max(s2[c] / n - mean[c] * mean[c], 0.0);
    }
  }
}

template <typename T>
void OwnBackwardMoments(const Tensor<T>& x, const Tensor<T>& dy, std::span<const T> mean, std::span<const T> variance,
                        double epsilon, std::int64_t channels, std::vector<T>& mean_dy, std::vector<T>& centered_dy) {
  const std::int64_t batch = x.dim(0);
  const std::int64_t positions = batch == 0 ? 0 : x.size() / batch / channels;
  if constexpr (std::is_same_v<T, float>) {
    std::vector<std::int64_t> words(static_cast<std::size_t>(BatchNormWords(channels)), 0);
    AddBackwardSums(x, dy, mean, words);
    BatchNormStatistics stats;
    stats.variance.assign(variance.begin(), variance.end());
    FinishBackwardSums(words, positions, epsilon, stats);
    mean_dy = stats.mean_dy;
    centered_dy = stats.centered_dy;
  } else {
    const auto C = static_cast<std::size_t>(channels);
    std::vector<double> b1(C, 0), b2(C, 0);
    for (std::int64_t i = 0; i < x.size(); ++i) {
      const auto c = static_cast<std::size_t>(i % channels);
      b1[c] += dy[i];
      b2[c] += dy[i] * (x[i] - mean[c]);
    }
    const double n = static_cast<double>(batch * positions);
    mean_dy.resize(C);
    centered_dy.resize(C);
    for (std::size_t c = 0; c < C; ++c) {
      mean_dy[c] = b1[c] / n;
      centered_dy[c] = b2[c] / (n * (variance[c] + static_cast<T>(epsilon)));
    }
  }
}

}  // namespace

template <typename T>
std::vector<ParameterSpec> BatchNormalization<T>::Parameters(const Shape& example_input) const {
  const Shape shape{example_input.empty() ? 0 : example_input.back()};
  std::vector<ParameterSpec> specs;
  auto add = [&](const char* name, float initial, bool trainable) {
    ParameterSpec spec;
    spec.name = name;
    spec.shape = shape;
    spec.initial_value = initial;
    spec.trainable = trainable;
    specs.push_back(std::move(spec));
  };
  if (config_.scale) add("gamma", 1.0f, true);
  if (config_.center) add("beta", 0.0f, true);
  add("moving_mean", 0.0f, false);
  add("moving_variance", 1.0f, false);
  return specs;
}

// cache.buffer: [2, C], the mean and variance the pass normalized with; cache.indices:
// {1} for a training pass (batch statistics), {0} otherwise (moving statistics).
template <typename T>
void BatchNormalization<T>::Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
                                    LayerCache<T>& cache) const {
  y.Resize(x.shape());
  const std::int64_t C = x.shape().back();
  const auto channels = static_cast<std::size_t>(C);
  const ForwardContext* context = cache.context;
  const bool training = context != nullptr && context->training;
  cache.indices.assign(1, training ? 1 : 0);
  cache.buffer.Resize({2, C});
  T* mean = cache.buffer.data();
  T* variance = mean + C;
  const std::size_t moving = moving_mean_index();
  if (!training) {
    std::copy_n(params[moving]->data(), C, mean);
    std::copy_n(params[moving + 1]->data(), C, variance);
  } else if (cache.layer < context->batch_norm.size() && context->batch_norm[cache.layer].forward_ready) {
    const BatchNormStatistics& stats = context->batch_norm[cache.layer];
    std::copy_n(stats.mean.begin(), C, mean);
    std::copy_n(stats.variance.begin(), C, variance);
  } else {
    OwnForwardMoments(x, C, mean, variance);
  }
  // tf.nn.batch_normalization: inv = rsqrt(variance + epsilon) * scale;
  // y = x * inv + (offset - mean * inv).
  std::vector<T> inv(channels), shift(channels);
  const T epsilon = static_cast<T>(config_.epsilon);
  for (std::size_t c = 0; c < channels; ++c) {
    T r = T(1) / std::sqrt(variance[c] + epsilon);
    if (config_.scale) r = r * (*params[0])[static_cast<std::int64_t>(c)];
    inv[c] = r;
    const T centered = mean[c] * r;
    shift[c] = config_.center ? (*params[config_.scale ? 1 : 0])[static_cast<std::int64_t>(c)] - centered : -centered;
  }
  const std::int64_t rows = x.size() / std::max<std::int64_t>(C, 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* in = x.data() + r * C;
    T* out = y.data() + r * C;
    for (std::size_t c = 0; c < channels; ++c) out[c] = in[c] * inv[c] + shift[c];
  }
}

template <typename T>
void BatchNormalization<T>::BackwardTerms(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& dy,
                                          Tensor<T>* dx, LayerCache<T>& cache, Tensor<T>& gamma_terms,
                                          Tensor<T>& beta_terms) const {
  const std::int64_t C = x.shape().back(), batch = x.dim(0);
  const std::int64_t per_example = batch == 0 ? 0 : x.size() / batch;
  const auto channels = static_cast<std::size_t>(C);
  const T* mean = cache.buffer.data();
  const T* variance = mean + C;
  const bool training = !cache.indices.empty() && cache.indices[0] != 0;
  const T epsilon = static_cast<T>(config_.epsilon);
  std::vector<T> r(channels), inv(channels), mean_dy(channels, T(0)), centered_dy(channels, T(0));
  for (std::size_t c = 0; c < channels; ++c) {
    r[c] = T(1) / std::sqrt(variance[c] + epsilon);
    inv[c] = config_.scale ? r[c] * (*params[0])[static_cast<std::int64_t>(c)] : r[c];
  }
  if (training) {
    const ForwardContext* context = cache.context;
    if (context != nullptr && cache.layer < context->batch_norm.size() &&
        context->batch_norm[cache.layer].backward_ready) {
      const BatchNormStatistics& stats = context->batch_norm[cache.layer];
      std::copy_n(stats.mean_dy.begin(), C, mean_dy.begin());
      std::copy_n(stats.centered_dy.begin(), C, centered_dy.begin());
    } else {
      OwnBackwardMoments<T>(x, dy, std::span<const T>(mean, channels), std::span<const T>(variance, channels),
                            config_.epsilon, C, mean_dy, centered_dy);
    }
  }
  gamma_terms.Resize({batch, C});
  beta_terms.Resize({batch, C});
  gamma_terms.SetZero();
  beta_terms.SetZero();
  if (dx != nullptr) dx->Resize(x.shape());
  const std::int64_t positions = per_example / std::max<std::int64_t>(C, 1);
  for (std::int64_t e = 0; e < batch; ++e) {
    T* __restrict__ g = gamma_terms.data() + e * C;
    T* __restrict__ b = beta_terms.data() + e * C;
    for (std::int64_t p = 0; p < positions; ++p) {
      const std::int64_t first = (e * positions + p) * C;
      const T* __restrict__ xs = x.data() + first;
      const T* __restrict__ dys = dy.data() + first;
      T* __restrict__ dxs = dx != nullptr ? dx->data() + first : nullptr;
      if (dxs != nullptr && training) {  // the training pass: one loop the compiler vectorizes
        for (std::size_t c = 0; c < channels; ++c) {
          const T centered = xs[c] - mean[c];
          g[c] += dys[c] * (centered * r[c]);
          b[c] += dys[c];
          dxs[c] = inv[c] * ((dys[c] - mean_dy[c]) - centered * centered_dy[c]);
        }
        continue;
      }
      for (std::size_t c = 0; c < channels; ++c) {
        const T centered = xs[c] - mean[c];
        g[c] += dys[c] * (centered * r[c]);
        b[c] += dys[c];
        if (dxs != nullptr) {
          T t = dys[c];
          if (training) t = (t - mean_dy[c]) - centered * centered_dy[c];
          dxs[c] = inv[c] * t;
        }
      }
    }
  }
}

template <typename T>
void BatchNormalization<T>::Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x,
                                     const Tensor<T>& /*y*/, Tensor<T>& dy, Tensor<T>* dx,
                                     std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                                     std::span<Tensor<T>* const> param_grad_magnitudes) const {
  Tensor<T> gamma_terms, beta_terms;
  BackwardTerms(params, x, dy, dx, cache, gamma_terms, beta_terms);
  const std::int64_t C = x.shape().back(), batch = x.dim(0);
  std::size_t p = 0;
  // One chain per channel over the rows' terms; the magnitudes sum every term's |.|.
  auto sum_rows = [&](const Tensor<T>& terms, bool gamma) {
    Tensor<T>& grad = *param_grads[p];
    grad.Resize({C});
    grad.SetZero();
    for (std::int64_t e = 0; e < batch; ++e)
      for (std::int64_t c = 0; c < C; ++c) grad[c] += terms[e * C + c];
    if (!param_grad_magnitudes.empty()) {
      Tensor<T>& magnitude = *param_grad_magnitudes[p];
      magnitude.Resize({C});
      magnitude.SetZero();
      const T* mean = cache.buffer.data();
      const T* variance = mean + C;
      std::vector<T> r(static_cast<std::size_t>(C));
      for (std::int64_t c = 0; c < C; ++c) r[c] = T(1) / std::sqrt(variance[c] + static_cast<T>(config_.epsilon));
      for (std::int64_t row = 0; row < x.size() / std::max<std::int64_t>(C, 1); ++row)
        for (std::int64_t c = 0; c < C; ++c) {
          const std::int64_t i = row * C + c;
          magnitude[c] += std::abs(gamma ? dy[i] * ((x[i] - mean[c]) * r[c]) : dy[i]);
        }
    }
    ++p;
  };
  if (config_.scale) sum_rows(gamma_terms, true);
  if (config_.center) sum_rows(beta_terms, false);
  for (; p < param_grads.size(); ++p) {  // the moving statistics: not trainable
    param_grads[p]->Resize({C});
    param_grads[p]->SetZero();
    if (!param_grad_magnitudes.empty()) {
      param_grad_magnitudes[p]->Resize({C});
      param_grad_magnitudes[p]->SetZero();
    }
  }
}

template <typename T>
void BatchNormalization<T>::BackwardExact(std::span<const Tensor<T>* const> params, const Tensor<T>& x,
                                          const Tensor<T>& /*y*/, Tensor<T>& dy, Tensor<T>* dx,
                                          std::span<ExampleTerms* const> terms, LayerCache<T>& cache) const {
  if constexpr (std::is_same_v<T, float>) {
    Tensor<float> gamma_terms, beta_terms;
    BackwardTerms(params, x, dy, dx, cache, gamma_terms, beta_terms);
    std::size_t p = 0;
    if (config_.scale) {
      terms[p]->kind = ExampleTerms::Kind::kValues;
      terms[p++]->values = std::move(gamma_terms);
    }
    if (config_.center) {
      terms[p]->kind = ExampleTerms::Kind::kValues;
      terms[p++]->values = std::move(beta_terms);
    }
    for (; p < terms.size(); ++p) {
      terms[p]->kind = ExampleTerms::Kind::kValues;
      terms[p]->values.Resize(Shape{x.dim(0), x.shape().back()});
      terms[p]->values.SetZero();
    }
  } else {
    Layer<T>::BackwardExact(params, x, x, dy, dx, terms, cache);
  }
}

std::int64_t BatchNormWords(std::int64_t channels) { return channels * kBatchNormSums * kExactWords + 1; }

namespace {

// Per example and channel, the sums over the example's positions are double chains
// in position order (a function of the example alone), and the sums over examples
// exact: one ExactAddDouble per example, not one exact add per value.
template <typename Terms>
void AddPerExample(std::int64_t examples, std::int64_t positions, std::int64_t C, std::span<std::int64_t> words,
                   Terms terms) {
  std::vector<double> first(static_cast<std::size_t>(C)), second(static_cast<std::size_t>(C));
  for (std::int64_t e = 0; e < examples; ++e) {
    std::fill(first.begin(), first.end(), 0.0);
    std::fill(second.begin(), second.end(), 0.0);
    for (std::int64_t p = 0; p < positions; ++p) terms((e * positions + p) * C, first.data(), second.data());
    std::int64_t* w = words.data();
    for (std::int64_t c = 0; c < C; ++c, w += kBatchNormSums * kExactWords) {
      ExactAddDouble(w, first[static_cast<std::size_t>(c)]);
      ExactAddDouble(w + kExactWords, second[static_cast<std::size_t>(c)]);
    }
  }
  words.back() += examples;
}

}  // namespace

void AddForwardSums(const Tensor<float>& x, std::span<std::int64_t> words) {
  const std::int64_t C = x.shape().back(), examples = x.dim(0);
  const std::int64_t positions = examples == 0 ? 0 : x.size() / examples / C;
  AddPerExample(examples, positions, C, words, [&](std::int64_t at, double* sum, double* squares) {
    const float* xs = x.data() + at;
    for (std::int64_t c = 0; c < C; ++c) {
      const auto v = static_cast<double>(xs[c]);
      sum[c] += v;
      squares[c] += v * v;  // exact in double
    }
  });
}

void AddBackwardSums(const Tensor<float>& x, const Tensor<float>& dy, std::span<const float> mean,
                     std::span<std::int64_t> words) {
  const std::int64_t C = x.shape().back(), examples = x.dim(0);
  const std::int64_t positions = examples == 0 ? 0 : x.size() / examples / C;
  AddPerExample(examples, positions, C, words, [&](std::int64_t at, double* sum, double* products) {
    const float* xs = x.data() + at;
    const float* dys = dy.data() + at;
    for (std::int64_t c = 0; c < C; ++c) {
      const auto g = static_cast<double>(dys[c]);
      sum[c] += g;
      products[c] += g * static_cast<double>(xs[c] - mean[static_cast<std::size_t>(c)]);  // the float difference
    }
  });
}

namespace {

// The two sums of channel c, rounded to double (exactly rounded from the words).
std::pair<double, double> ChannelSums(std::span<const std::int64_t> words, std::int64_t c) {
  std::int64_t first[kExactWords], second[kExactWords];
  std::copy_n(words.data() + c * kBatchNormSums * kExactWords, kExactWords, first);
  std::copy_n(words.data() + (c * kBatchNormSums + 1) * kExactWords, kExactWords, second);
  ExactNormalize(first);
  ExactNormalize(second);
  return {ExactToDouble(first), ExactToDouble(second)};
}

std::int64_t Channels(std::span<const std::int64_t> words) {
  return (static_cast<std::int64_t>(words.size()) - 1) / (kBatchNormSums * kExactWords);
}

}  // namespace

void FinishForwardSums(std::span<const std::int64_t> words, std::int64_t positions, BatchNormStatistics& stats) {
  const std::int64_t C = Channels(words);
  const double n = static_cast<double>(words.back() * positions);  // 0 for a replica without examples: NaN
  stats.mean.resize(static_cast<std::size_t>(C));
  stats.variance.resize(static_cast<std::size_t>(C));
  for (std::int64_t c = 0; c < C; ++c) {
    const auto [s1, s2] = ChannelSums(words, c);
    const double mean = s1 / n;
    const double variance = s2 / n - mean * mean;
    stats.mean[static_cast<std::size_t>(c)] = static_cast<float>(mean);
    // Clamped at +0 where rounding makes it negative; NaN (no example) stays NaN.
    stats.variance[static_cast<std::size_t>(c)] =
        static_cast<float>(std::isnan(variance) ? variance : std::max(variance, 0.0));
  }
  stats.forward_ready = true;
}

void FinishBackwardSums(std::span<const std::int64_t> words, std::int64_t positions, double epsilon,
                        BatchNormStatistics& stats) {
  const std::int64_t C = Channels(words);
  const double n = static_cast<double>(words.back() * positions);
  const auto eps = static_cast<float>(epsilon);
  stats.mean_dy.resize(static_cast<std::size_t>(C));
  stats.centered_dy.resize(static_cast<std::size_t>(C));
  for (std::int64_t c = 0; c < C; ++c) {
    const auto k = static_cast<std::size_t>(c);
    const auto [b1, b2] = ChannelSums(words, c);
    stats.mean_dy[k] = static_cast<float>(b1 / n);
    stats.centered_dy[k] = static_cast<float>(b2 / (n * static_cast<double>(stats.variance[k] + eps)));
  }
  stats.backward_ready = true;
}

std::vector<std::size_t> BatchNormLayers(const Sequential<float>& model) {
  std::vector<std::size_t> layers;
  for (std::size_t l = 0; l < model.layers().size(); ++l)
    if (model.layers()[l]->kind() == "BatchNormalization") layers.push_back(l);
  return layers;
}

bool HasSynchronizedBatchNorm(const Sequential<float>& model) {
  for (const std::size_t l : BatchNormLayers(model))
    if (static_cast<const BatchNormalization<float>&>(*model.layers()[l]).config().synchronized) return true;
  return false;
}

void UpdateMovingStatistics(const Sequential<float>& model, std::span<const BatchNormStatistics> statistics,
                            ParameterList<float>& weights) {
  for (const std::size_t l : BatchNormLayers(model)) {
    if (l >= statistics.size() || !statistics[l].forward_ready) continue;
    const auto& layer = static_cast<const BatchNormalization<float>&>(*model.layers()[l]);
    const std::size_t moving = model.first_parameter(l) + layer.moving_mean_index();
    // Keras: moving * momentum + batch * (1 - momentum), the factors as float32.
    const auto momentum = static_cast<float>(layer.config().momentum);
    const auto complement = static_cast<float>(1.0 - layer.config().momentum);
    for (int k = 0; k < 2; ++k) {
      const std::vector<float>& batch = k == 0 ? statistics[l].mean : statistics[l].variance;
      Tensor<float>& target = weights[moving + static_cast<std::size_t>(k)];
      for (std::int64_t c = 0; c < target.size(); ++c)
        target[c] = target[c] * momentum + batch[static_cast<std::size_t>(c)] * complement;
    }
  }
}

template class BatchNormalization<float>;
template class BatchNormalization<double>;

}  // namespace dtlab
