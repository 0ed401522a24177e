#pragma once
// MNIST-format datasets (MNIST, Fashion-MNIST, any IDX image/label pair of unsigned bytes), held in memory
// already normalised, so a batch is a plain gather.
#include <cstdint>
#include <string>
#include <vector>

#include "minidl/data/dataset.h"

namespace minidl::data {

/// Per-dataset pixel statistics: a pixel byte p becomes ((p / 255) - mean) / std.
struct Normalization {
  double mean = 0.0;
  double std = 1.0;
  /// The training-set statistics of MNIST (0.1307, 0.3081) and Fashion-MNIST (0.2860, 0.3530).
  static Normalization mnist();
  static Normalization fashion_mnist();
  /// By name, for command-line flags: "mnist", "fashion-mnist" (or "fashion_mnist", "fashion"), or "none"
  /// (mean 0, std 1: pixels scaled to [0, 1] only). Throws ValueError listing the accepted names.
  static Normalization from_name(const std::string& name);
};

/// What the data calls for when nobody named the dataset: see MnistDataset::choose_normalization.
struct NormalizationChoice {
  Normalization normalization;
  std::string dataset;  ///< "MNIST", "Fashion-MNIST", or "unrecognised data"
  std::string reason;   ///< one sentence: the file, its measured statistics and what they matched
};

class MnistDataset : public Dataset {
 public:
  /// Reads the training (train-*) or test (t10k-*) split from `dir`: `<split>-images-idx3-ubyte` and
  /// `<split>-labels-idx1-ubyte`, each raw or with a `.gz` suffix (the raw file wins when both exist).
  /// Throws IOError listing every path looked for when a file is missing, FormatError when a file is
  /// malformed or the two counts differ, ValueError for a non-finite mean or a std that is not > 0.
  /// The caller picks `norm`, e.g. with choose_normalization().
  static MnistDataset load(const std::string& dir, bool train, Normalization norm);
  /// Decides from the training images in `dir` (the file load(dir, true, ...) reads), not from the path's name,
  /// which says nothing reliable: the pixel mean and standard deviation (pixels scaled to [0, 1]) of the whole
  /// file are measured and compared with MNIST's and Fashion-MNIST's (Normalization::mnist(), fashion_mnist()),
  /// which lie far apart (means 0.13 and 0.29). Data that matches neither within kStatisticsTolerance is
  /// normalised with its own measured statistics (std 1 if all pixels are equal). Reads the file once more than
  /// load() does. Throws what load() throws for that file.
  static NormalizationChoice choose_normalization(const std::string& dir);
  /// How far (in units of pixel/255) a measured mean and std may lie from a known dataset's and still count as
  /// that dataset: subsets of the real files stay well within it, the two datasets are 0.15 apart.
  static constexpr double kStatisticsTolerance = 0.02;

  /// Keeps only the first min(n, size()) samples (e.g. for a quick run on part of the data); n >= 1.
  MnistDataset& limit(std::int64_t n);

  std::int64_t size() const override;
  Batch get_batch(const std::vector<std::int64_t>& indices) const override;
  Shape sample_shape() const override;

  /// float32 (N, 1, rows, cols), normalised.
  const Tensor& images() const { return images_; }
  /// int64 (N), each in [0, 10).
  const Tensor& labels() const { return labels_; }
  const Normalization& normalization() const { return norm_; }
  /// The images file that was read, for error messages about its content.
  const std::string& images_path() const { return images_path_; }

 private:
  MnistDataset(Tensor images, Tensor labels, Normalization norm, std::string images_path);
  Tensor images_, labels_;
  Normalization norm_;
  std::string images_path_;
};

}  // namespace minidl::data
