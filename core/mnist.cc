#include "core/mnist.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "core/idx.h"
#include "core/rng.h"

namespace dtlab {
namespace {

std::string ExpectedFilesList() {
  return std::string(kTrainImagesFile) + "[.gz], " + kTrainLabelsFile + "[.gz], " + kTestImagesFile + "[.gz], " +
         kTestLabelsFile + "[.gz]";
}

bool IsRegularFile(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

bool IsDirectory(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_directory(path, error);
}

// The path of `base_name` in `directory`, preferring the ".gz" file.
StatusOr<std::string> FindIdxFile(const std::string& directory, const std::string& base_name) {
  const std::filesystem::path gzipped = std::filesystem::path(directory) / (base_name + ".gz");
  if (IsRegularFile(gzipped)) return gzipped.string();
  const std::filesystem::path plain = std::filesystem::path(directory) / base_name;
  if (IsRegularFile(plain)) return plain.string();
  return Status::NotFound(directory + ": missing " + base_name + "[.gz]; a data set directory " +
                          "must hold the four IDX files " + ExpectedFilesList());
}

StatusOr<TrainTestData> LoadFromDirectory(const std::string& name, const std::string& directory) {
  DTLAB_ASSIGN_OR_RETURN(const std::string train_images, FindIdxFile(directory, kTrainImagesFile));
  DTLAB_ASSIGN_OR_RETURN(const std::string train_labels, FindIdxFile(directory, kTrainLabelsFile));
  DTLAB_ASSIGN_OR_RETURN(const std::string test_images, FindIdxFile(directory, kTestImagesFile));
  DTLAB_ASSIGN_OR_RETURN(const std::string test_labels, FindIdxFile(directory, kTestLabelsFile));
  constexpr int kNumClasses = 10;
  TrainTestData data;
  DTLAB_ASSIGN_OR_RETURN(data.train, LoadImagesAndLabels(train_images, train_labels, kNumClasses));
  DTLAB_ASSIGN_OR_RETURN(data.test, LoadImagesAndLabels(test_images, test_labels, kNumClasses));
  if (data.train.height != data.test.height || data.train.width != data.test.width) {
    return Status::Corruption(directory + ": training images are " + std::to_string(data.train.height) + "x" +
                              std::to_string(data.train.width) + " but test images are " +
                              std::to_string(data.test.height) + "x" + std::to_string(data.test.width));
  }
  data.name = name;
  data.directory = directory;
  return data;
}

}  // namespace

StatusOr<ImageDataset> LoadImagesAndLabels(const std::string& images_path, const std::string& labels_path,
                                           int num_classes) {
  if (num_classes < 1 || num_classes > 256) {
    return Status::InvalidArgument("num_classes must be in [1, 256], got " + std::to_string(num_classes));
  }
  DTLAB_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  DTLAB_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  if (images.dims.size() != 3) {
    return Status::Corruption(images_path + ": images must have 3 dimensions (count, rows, " + "cols), found " +
                              std::to_string(images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    return Status::Corruption(labels_path + ": labels must have 1 dimension (count), found " +
                              std::to_string(labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    return Status::Corruption("image and label counts differ: " + images_path + " holds " +
                              std::to_string(images.dims[0]) + " images but " + labels_path + " holds " +
                              std::to_string(labels.dims[0]) + " labels");
  }

  ImageDataset data;
  data.count = images.dims[0];
  data.height = images.dims[1];
  data.width = images.dims[2];
  data.channels = 1;
  data.num_classes = num_classes;
  data.labels.resize(labels.values.size());
  for (std::size_t i = 0; i < labels.values.size(); ++i) {
    if (labels.values[i] >= num_classes) {
      return Status::Corruption(labels_path + ": label " + std::to_string(i) + " is " +
                                std::to_string(labels.values[i]) + ", outside [0, " + std::to_string(num_classes) +
                                ")");
    }
    data.labels[i] = labels.values[i];
  }
  data.images.resize(images.values.size());
  constexpr float kScale = 1.0f / 255.0f;
  std::transform(images.values.begin(), images.values.end(), data.images.begin(),
                 [](std::uint8_t byte) { return static_cast<float>(byte) * kScale; });
  return data;
}

StatusOr<TrainTestData> LoadMnistStyleDataset(const std::string& dataset) {
  return LoadMnistStyleDataset(dataset, DTLAB_DATASETS_DIR);
}

StatusOr<TrainTestData> LoadMnistStyleDataset(const std::string& dataset, const std::string& datasets_root) {
  if (dataset == "fashion-mnist" || dataset == "mnist") {
    const std::string directory = (std::filesystem::path(datasets_root) / dataset).string();
    if (!IsDirectory(directory)) {
      const std::string how_to_get =
          dataset == "fashion-mnist" ? "install it with: apt-get install dataset-fashion-mnist (or pass --dataset DIR "
                                       "holding the four IDX files)"
                                     : "pass --dataset DIR holding the four IDX files (" + ExpectedFilesList() + ")";
      return Status::NotFound("data set '" + dataset + "' not found: " + directory + " does not exist; " + how_to_get);
    }
    return LoadFromDirectory(dataset, directory);
  }
  if (IsDirectory(dataset)) return LoadFromDirectory(dataset, dataset);
  return Status::NotFound("unknown data set '" + dataset +
                          "': expected 'fashion-mnist', 'mnist', or a directory holding the " + "four IDX files (" +
                          ExpectedFilesList() + ")");
}

ImageDataset MakeSyntheticDataset(std::int64_t count, std::int64_t height, std::int64_t width, int num_classes,
                                  std::uint64_t seed) {
  count = std::max<std::int64_t>(count, 0);
  height = std::max<std::int64_t>(height, 1);
  width = std::max<std::int64_t>(width, 1);
  num_classes = std::max(num_classes, 1);

  ImageDataset data;
  data.count = count;
  data.height = height;
  data.width = width;
  data.channels = 1;
  data.num_classes = num_classes;
  data.images.resize(static_cast<std::size_t>(count * height * width));
  data.labels.resize(static_cast<std::size_t>(count));

  // Classes own the cells of a grid_rows x grid_cols grid; class c's block fills
  // cell c (cells overlap when the image is smaller than the grid).
  const auto grid_cols = static_cast<std::int64_t>(std::ceil(std::sqrt(double(num_classes))));
  const std::int64_t grid_rows = (num_classes + grid_cols - 1) / grid_cols;
  const std::int64_t cell_height = std::max<std::int64_t>(height / grid_rows, 1);
  const std::int64_t cell_width = std::max<std::int64_t>(width / grid_cols, 1);

  for (std::int64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(i % num_classes);
    data.labels[static_cast<std::size_t>(i)] = label;
    const std::int64_t top = std::min((label / grid_cols) * cell_height, height - cell_height);
    const std::int64_t left = std::min((label % grid_cols) * cell_width, width - cell_width);
    CounterRng rng(seed, RngPurpose::kSynthetic, static_cast<std::uint64_t>(i));
    float* image = data.images.data() + i * height * width;
    for (std::int64_t y = 0; y < height; ++y) {
      for (std::int64_t x = 0; x < width; ++x) {
        const bool in_block = y >= top && y < top + cell_height && x >= left && x < left + cell_width;
        const float noise = rng.UniformFloat() * 0.3f;
        image[y * width + x] = in_block ? 0.7f + noise : noise;
      }
    }
  }
  return data;
}

}  // namespace dtlab
