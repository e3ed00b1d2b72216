// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/mnist.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "sim/comm/message_log.h"

namespace dtlab::testing {

/// A tensor of uniform values in [-scale, scale), drawn from CounterRng(seed, kTest, index).
inline Tensor<float> RandomFloats(Shape shape, std::uint64_t seed, std::uint64_t index, float scale = 1.0f) {
  Tensor<float> t(std::move(shape));
  CounterRng rng(seed, RngPurpose::kTest, index);
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = scale * (2.0f * rng.UniformFloat() - 1.0f);
  return t;
}

/// Bit-for-bit equality, naming the first element that differs.
inline ::testing::AssertionResult SameBits(const Tensor<float>& got, const std::vector<float>& want) {
  if (static_cast<std::size_t>(got.size()) != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got.data()[i], &want[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << got.data()[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

/// The record a ring all-reduce of `bytes` per replica leaves on n replicas:
/// 2(n-1) phases in each of which replica i sends bytes/n to i+1.
inline CollectiveRecord RingAllReduceRecord(std::int32_t n, std::int64_t bytes, std::int64_t step = 0) {
  CollectiveRecord record;
  record.name = "all_reduce/ring";
  record.step = step;
  record.num_replicas = n;
  record.num_phases = 2 * (n - 1);
  record.bytes_per_replica = bytes;
  for (std::int32_t phase = 0; phase < record.num_phases; ++phase)
    for (std::int32_t i = 0; i < n; ++i) record.messages.push_back({phase, i, (i + 1) % n, bytes / n});
  return record;
}

/// A tiny training set of 96 and a test set of 32 4x4 images in 3 classes, quick to train on.
inline TrainTestData TinyTrainTestData() {
  TrainTestData data;
  data.name = "tiny";
  for (ImageDataset* set : {&data.train, &data.test}) {
    set->count = set == &data.train ? 96 : 32;
    set->height = set->width = 4;
    set->num_classes = 3;
    for (std::int64_t i = 0; i < set->count; ++i) {
      set->labels.push_back(static_cast<std::int32_t>((i * 7) % 3));
      for (std::int64_t k = 0; k < 16; ++k)
        set->images.push_back(static_cast<float>((i * 31 + k * 17 + set->labels.back() * 5) % 23) / 23.0f);
    }
  }
  return data;
}

/// A fresh, empty directory for the running test: DTLAB_TEST_TMPDIR/<suite>.<test>.<pid>.
inline std::filesystem::path FreshTestDirectory() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir =
      std::filesystem::path(DTLAB_TEST_TMPDIR) /
      (std::string(info->test_suite_name()) + "." + info->name() + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// The whole file as bytes ("" if it cannot be read).
inline std::string ReadFileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace dtlab::testing
