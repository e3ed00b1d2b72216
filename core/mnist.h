// Image classification data sets in the MNIST layout: four IDX files holding the
// training and test images (count x rows x cols unsigned bytes) and their labels.
//
// Fashion-MNIST is installed by the Debian package dataset-fashion-mnist under
// DTLAB_DATASETS_DIR "/fashion-mnist"; any directory with the same four files
// (MNIST, KMNIST, ...) can be loaded by path. MakeSyntheticDataset makes a small
// learnable stand-in for fast tests.
//
// Thread safety: the functions are reentrant; the structs are values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dtlab {

/// A set of labelled images, stored NHWC as floats in [0, 1].
struct ImageDataset {
  std::int64_t count = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t channels = 1;
  int num_classes = 10;
  /// [count, height, width, channels] row-major; pixel byte values / 255.
  std::vector<float> images;
  /// count labels, each in [0, num_classes).
  std::vector<std::int32_t> labels;

  /// Floats per image: height * width * channels.
  std::int64_t image_size() const { return height * width * channels; }
};

/// A data set's training and test splits, and where they came from.
struct TrainTestData {
  ImageDataset train;
  ImageDataset test;
  /// "fashion-mnist", "mnist", or the directory path as given.
  std::string name;
  /// The directory the files were read from.
  std::string directory;
};

/// The file names (without the optional ".gz") LoadMnistStyleDataset looks for.
inline constexpr const char* kTrainImagesFile = "train-images-idx3-ubyte";
inline constexpr const char* kTrainLabelsFile = "train-labels-idx1-ubyte";
inline constexpr const char* kTestImagesFile = "t10k-images-idx3-ubyte";
inline constexpr const char* kTestLabelsFile = "t10k-labels-idx1-ubyte";

/// Loads images from the IDX file `images_path` (3-D: count, rows, cols) and labels
/// from `labels_path` (1-D: count), each plain or gzip-compressed.
///
/// On success the data set has channels == 1 and the given num_classes.
/// Failures: InvalidArgument if num_classes is not in [1, 256]; any error of
/// ReadIdxFile; Corruption if the images are not 3-D or the labels not 1-D, if the
/// counts differ (the message names both counts and both files), or if a label is
/// >= num_classes (the message names the first bad index and its value).
StatusOr<ImageDataset> LoadImagesAndLabels(const std::string& images_path, const std::string& labels_path,
                                           int num_classes);

/// Loads a training and a test split with 10 classes. `dataset` is
///   "fashion-mnist"  the directory DTLAB_DATASETS_DIR "/fashion-mnist",
///   "mnist"          the directory DTLAB_DATASETS_DIR "/mnist", or
///   a directory path holding the four IDX files.
/// Each file may be plain or end in ".gz"; if both exist the ".gz" one is read.
///
/// Failures: NotFound if a named data set's directory is missing (the message says
/// how to install it or to pass --dataset DIR), if `dataset` is neither a known
/// name nor a directory (the message lists the accepted names), or if one of the
/// four files is missing (the message names it and all four expected names); any
/// error of LoadImagesAndLabels.
StatusOr<TrainTestData> LoadMnistStyleDataset(const std::string& dataset);

/// As above, but named data sets are looked up under `datasets_root` instead of
/// DTLAB_DATASETS_DIR (for relocated installs and tests).
StatusOr<TrainTestData> LoadMnistStyleDataset(const std::string& dataset, const std::string& datasets_root);

/// A deterministic, learnable synthetic data set of `count` single-channel images.
///
/// Image i has label i % num_classes and is a function of (seed, i) alone, drawn
/// from CounterRng(seed, RngPurpose::kSynthetic, i): uniform noise in [0, 0.3)
/// plus a bright block (values in [0.7, 1)) whose position in the image depends
/// on the label. REQUIRES: count >= 0, height >= 1, width >= 1, num_classes >= 1.
ImageDataset MakeSyntheticDataset(std::int64_t count, std::int64_t height, std::int64_t width, int num_classes,
                                  std::uint64_t seed);

}  // namespace dtlab
