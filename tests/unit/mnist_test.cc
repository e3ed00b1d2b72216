// Tests of loading MNIST-style data sets, the synthetic data set and GatherBatch.
#include "core/mnist.h"

#include <gtest/gtest.h>

#include "tests/unit/test_util.h"
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/tensor.h"

namespace dtlab {
namespace {

using Bytes = std::vector<std::uint8_t>;

void AppendBigEndian(Bytes& bytes, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<std::uint8_t>(value >> shift));
}

// count images of rows x cols whose pixel (i, y, x) is (i + y * cols + x) mod 256.
Bytes MakeImagesIdx(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  Bytes bytes = {0, 0, 0x08, 3};
  AppendBigEndian(bytes, count);
  AppendBigEndian(bytes, rows);
  AppendBigEndian(bytes, cols);
  for (std::uint32_t i = 0; i < count; ++i) {
    for (std::uint32_t p = 0; p < rows * cols; ++p) bytes.push_back(static_cast<std::uint8_t>(i + p));
  }
  return bytes;
}

Bytes MakeLabelsIdx(const std::vector<std::uint8_t>& labels) {
  Bytes bytes = {0, 0, 0x08, 1};
  AppendBigEndian(bytes, static_cast<std::uint32_t>(labels.size()));
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  return bytes;
}

void WriteFile(const std::string& path, const Bytes& bytes, bool gzip) {
  if (gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr) << path;
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(file), Z_OK);
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

class MnistTest : public ::testing::Test {
 protected:
  void SetUp() override { directory_ = ::dtlab::testing::FreshTestDirectory().string(); }
  std::string PathFor(const std::string& name) const { return directory_ + "/" + name; }

  // Writes a complete small data set: 12 training and 5 test images of 4x3.
  void WriteDataset(bool gzip) {
    const std::string suffix = gzip ? ".gz" : "";
    WriteFile(PathFor(std::string(kTrainImagesFile) + suffix), MakeImagesIdx(12, 4, 3), gzip);
    WriteFile(PathFor(std::string(kTrainLabelsFile) + suffix), MakeLabelsIdx({9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0}),
              gzip);
    WriteFile(PathFor(std::string(kTestImagesFile) + suffix), MakeImagesIdx(5, 4, 3), gzip);
    WriteFile(PathFor(std::string(kTestLabelsFile) + suffix), MakeLabelsIdx({1, 2, 3, 4, 5}), gzip);
  }

  std::string directory_;
};

void ExpectContains(const Status& status, const std::vector<std::string>& words) {
  for (const std::string& word : words) {
    EXPECT_NE(status.message().find(word), std::string::npos) << "'" << word << "' not in: " << status.message();
  }
}

TEST_F(MnistTest, LoadImagesAndLabelsScalesPixels) {
  WriteFile(PathFor("images"), MakeImagesIdx(3, 2, 2), false);
  WriteFile(PathFor("labels.gz"), MakeLabelsIdx({0, 2, 1}), true);
  const StatusOr<ImageDataset> data = LoadImagesAndLabels(PathFor("images"), PathFor("labels.gz"), 3);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->count, 3);
  EXPECT_EQ(data->height, 2);
  EXPECT_EQ(data->width, 2);
  EXPECT_EQ(data->channels, 1);
  EXPECT_EQ(data->num_classes, 3);
  EXPECT_EQ(data->labels, (std::vector<std::int32_t>{0, 2, 1}));
  ASSERT_EQ(data->images.size(), 12u);
  for (int i = 0; i < 3; ++i) {
    for (int p = 0; p < 4; ++p) EXPECT_FLOAT_EQ(data->images[i * 4 + p], (i + p) / 255.0f);
  }
}

TEST_F(MnistTest, CountMismatchNamesBothCountsAndFiles) {
  WriteFile(PathFor("images"), MakeImagesIdx(3, 2, 2), false);
  WriteFile(PathFor("labels"), MakeLabelsIdx({0, 1}), false);
  const StatusOr<ImageDataset> data = LoadImagesAndLabels(PathFor("images"), PathFor("labels"), 10);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kCorruption);
  ExpectContains(data.status(), {"3 images", "2 labels", PathFor("images"), PathFor("labels")});
}

TEST_F(MnistTest, LabelOutOfRangeNamesIndexAndValue) {
  WriteFile(PathFor("images"), MakeImagesIdx(4, 2, 2), false);
  WriteFile(PathFor("labels"), MakeLabelsIdx({0, 1, 10, 200}), false);
  const StatusOr<ImageDataset> data = LoadImagesAndLabels(PathFor("images"), PathFor("labels"), 10);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kCorruption);
  ExpectContains(data.status(), {PathFor("labels"), "label 2 is 10"});
}

TEST_F(MnistTest, WrongRanksAreCorruption) {
  WriteFile(PathFor("images"), MakeImagesIdx(4, 2, 2), false);
  WriteFile(PathFor("labels"), MakeLabelsIdx({0, 1, 2, 3}), false);
  StatusOr<ImageDataset> data = LoadImagesAndLabels(PathFor("labels"), PathFor("labels"), 10);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kCorruption);
  ExpectContains(data.status(), {"3 dimensions"});
  data = LoadImagesAndLabels(PathFor("images"), PathFor("images"), 10);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kCorruption);
  ExpectContains(data.status(), {"1 dimension"});
}

TEST_F(MnistTest, BadNumClassesIsInvalidArgument) {
  const StatusOr<ImageDataset> data = LoadImagesAndLabels(PathFor("a"), PathFor("b"), 0);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kInvalidArgument);
}

TEST_F(MnistTest, LoadsDirectoryOfPlainFiles) {
  WriteDataset(/*gzip=*/false);
  const StatusOr<TrainTestData> data = LoadMnistStyleDataset(directory_);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->directory, directory_);
  EXPECT_EQ(data->train.count, 12);
  EXPECT_EQ(data->test.count, 5);
  EXPECT_EQ(data->train.height, 4);
  EXPECT_EQ(data->train.width, 3);
  EXPECT_EQ(data->train.labels[0], 9);
  EXPECT_EQ(data->test.labels[4], 5);
}

TEST_F(MnistTest, PrefersGzipFiles) {
  WriteDataset(/*gzip=*/true);
  // A broken plain file next to the .gz one must be ignored.
  WriteFile(PathFor(kTrainImagesFile), {1, 2, 3}, false);
  const StatusOr<TrainTestData> data = LoadMnistStyleDataset(directory_);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->train.count, 12);
}

TEST_F(MnistTest, MissingFileNamesItAndTheExpectedFiles) {
  WriteDataset(/*gzip=*/true);
  std::filesystem::remove(PathFor(std::string(kTestLabelsFile) + ".gz"));
  const StatusOr<TrainTestData> data = LoadMnistStyleDataset(directory_);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kNotFound);
  ExpectContains(data.status(), {"missing t10k-labels-idx1-ubyte", "train-images-idx3-ubyte[.gz]",
                                 "train-labels-idx1-ubyte[.gz]", "t10k-images-idx3-ubyte[.gz]"});
}

TEST_F(MnistTest, MissingFashionMnistNamesTheDebianPackage) {
  const StatusOr<TrainTestData> data = LoadMnistStyleDataset("fashion-mnist", PathFor("no-root"));
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kNotFound);
  ExpectContains(data.status(), {"apt-get install dataset-fashion-mnist", "--dataset DIR"});
}

TEST_F(MnistTest, MissingMnistSuggestsADirectory) {
  const StatusOr<TrainTestData> data = LoadMnistStyleDataset("mnist", PathFor("no-root"));
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kNotFound);
  ExpectContains(data.status(), {"--dataset DIR", "train-images-idx3-ubyte[.gz]"});
}

TEST_F(MnistTest, NamedDatasetIsLookedUpUnderTheRoot) {
  std::filesystem::create_directories(PathFor("root/mnist"));
  const std::string saved = directory_;
  directory_ = PathFor("root/mnist");
  WriteDataset(/*gzip=*/false);
  directory_ = saved;
  const StatusOr<TrainTestData> data = LoadMnistStyleDataset("mnist", PathFor("root"));
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->name, "mnist");
  EXPECT_EQ(data->train.count, 12);
}

TEST_F(MnistTest, UnknownNameListsTheAcceptedNames) {
  const StatusOr<TrainTestData> data = LoadMnistStyleDataset(PathFor("cifar-11"));
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Status::Code::kNotFound);
  ExpectContains(data.status(), {"unknown data set", "'fashion-mnist'", "'mnist'", "directory"});
}

TEST(FashionMnistTest, RealDataSet) {
  const std::string directory = DTLAB_DATASETS_DIR "/fashion-mnist";
  if (!std::filesystem::is_directory(directory)) {
    GTEST_SKIP() << directory << " is absent (apt-get install dataset-fashion-mnist)";
  }
  const StatusOr<TrainTestData> data = LoadMnistStyleDataset("fashion-mnist");
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->name, "fashion-mnist");
  EXPECT_EQ(data->train.count, 60000);
  EXPECT_EQ(data->test.count, 10000);
  for (const ImageDataset* split : {&data->train, &data->test}) {
    EXPECT_EQ(split->height, 28);
    EXPECT_EQ(split->width, 28);
    EXPECT_EQ(split->channels, 1);
    EXPECT_EQ(split->images.size(), static_cast<std::size_t>(split->count * 28 * 28));
    EXPECT_EQ(split->labels.size(), static_cast<std::size_t>(split->count));
    for (const std::int32_t label : split->labels) {
      ASSERT_GE(label, 0);
      ASSERT_LE(label, 9);
    }
  }
  EXPECT_EQ(data->train.labels[0], 9);  // Ankle boot
  float max_pixel = 0;
  for (const float pixel : data->train.images) max_pixel = std::max(max_pixel, pixel);
  EXPECT_FLOAT_EQ(max_pixel, 1.0f);
}

TEST(SyntheticDatasetTest, DeterministicAndLabelled) {
  const ImageDataset a = MakeSyntheticDataset(50, 8, 6, 10, 7);
  const ImageDataset b = MakeSyntheticDataset(50, 8, 6, 10, 7);
  const ImageDataset c = MakeSyntheticDataset(50, 8, 6, 10, 8);
  EXPECT_EQ(a.count, 50);
  EXPECT_EQ(a.height, 8);
  EXPECT_EQ(a.width, 6);
  EXPECT_EQ(a.channels, 1);
  EXPECT_EQ(a.num_classes, 10);
  ASSERT_EQ(a.images.size(), 50u * 8 * 6);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images, c.images);
  for (std::int64_t i = 0; i < 50; ++i) EXPECT_EQ(a.labels[i], i % 10);
  for (const float pixel : a.images) {
    EXPECT_GE(pixel, 0.0f);
    EXPECT_LT(pixel, 1.0f);
  }
  // A prefix of a larger synthetic set is the smaller set.
  const ImageDataset longer = MakeSyntheticDataset(60, 8, 6, 10, 7);
  EXPECT_TRUE(std::equal(a.images.begin(), a.images.end(), longer.images.begin()));
}

TEST(SyntheticDatasetTest, ClassesAreSeparableByTheirMeanImage) {
  // Nearest class mean must classify every image correctly: the data is learnable.
  const int num_classes = 10;
  const ImageDataset data = MakeSyntheticDataset(200, 12, 12, num_classes, 3);
  const std::int64_t size = data.image_size();
  std::vector<double> means(static_cast<std::size_t>(num_classes * size), 0.0);
  std::vector<int> counts(num_classes, 0);
  for (std::int64_t i = 0; i < data.count; ++i) {
    ++counts[data.labels[i]];
    for (std::int64_t p = 0; p < size; ++p) means[data.labels[i] * size + p] += data.images[i * size + p];
  }
  for (int c = 0; c < num_classes; ++c) {
    for (std::int64_t p = 0; p < size; ++p) means[c * size + p] /= counts[c];
  }
  for (std::int64_t i = 0; i < data.count; ++i) {
    int best = -1;
    double best_distance = 1e300;
    for (int c = 0; c < num_classes; ++c) {
      double distance = 0;
      for (std::int64_t p = 0; p < size; ++p) {
        const double d = data.images[i * size + p] - means[c * size + p];
        distance += d * d;
      }
      if (distance < best_distance) {
        best_distance = distance;
        best = c;
      }
    }
    EXPECT_EQ(best, data.labels[i]) << "image " << i;
  }
}

TEST(GatherBatchTest, CopiesChosenImagesAndLabels) {
  const ImageDataset data = MakeSyntheticDataset(20, 5, 4, 10, 1);
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  const std::vector<std::int64_t> indices = {7, 0, 19, 7};
  GatherBatch(data, indices, images, labels);
  EXPECT_EQ(images.shape(), (Shape{4, 5, 4, 1}));
  ASSERT_EQ(labels.size(), 4u);
  for (std::size_t k = 0; k < indices.size(); ++k) {
    EXPECT_EQ(labels[k], data.labels[indices[k]]);
    for (std::int64_t p = 0; p < 20; ++p) {
      EXPECT_EQ(images[static_cast<std::int64_t>(k) * 20 + p], data.images[indices[k] * 20 + p]);
    }
  }
  // Reusing the outputs for a smaller batch.
  GatherBatch(data, std::span<const std::int64_t>(indices).first(1), images, labels);
  EXPECT_EQ(images.shape(), (Shape{1, 5, 4, 1}));
  EXPECT_EQ(labels, (std::vector<std::int32_t>{data.labels[7]}));
}

}  // namespace
}  // namespace dtlab
