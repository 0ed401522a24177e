#pragma once
// The 32x32 image examples' data (dcgan, resnet): (N, 1, 32, 32) float32 images held in memory, so that a batch is
// one gather, with int64 labels. MNIST-format 28x28 images (Fashion-MNIST) are normalised and padded by 2 pixels on
// each side with their background (a 0 pixel, normalised), so that stride-2 towers halve 32 -> 16 -> 8 -> 4 evenly.
#include <minidl/data/dataset.h>
#include <minidl/data/mnist.h>
#include <minidl/tensor.h>

#include <cstdint>
#include <string>

namespace examples {

/// Side of the padded images.
inline constexpr std::int64_t kPaddedImageSize = 32;

class ImageSet : public minidl::data::Dataset {
 public:
  /// The training (`train`) or test split of the MNIST-format IDX files in `dir`, as minidl's MnistDataset reads
  /// them with `norm`, padded to 32x32; only the first `limit` images when limit > 0. Throws what
  /// MnistDataset::load throws (IOError listing the paths looked for, FormatError), ValueError for images that are
  /// not 28x28.
  static ImageSet mnist_format(const std::string& dir, bool train, const minidl::data::Normalization& norm,
                               std::int64_t limit = 0);
  /// `n` images of independent uniform [-1, 1] pixels and then `n` labels uniform in [0, classes), from a
  /// std::mt19937_64 seeded with `seed` (speed runs; minidl's own generators are left alone). n, classes >= 1.
  static ImageSet synthetic(std::int64_t n, std::uint64_t seed, std::int64_t classes = 10);
  /// Images already shaped (N, 1, 32, 32), float32; labels int64 (N). `background`: the value of a blank pixel.
  ImageSet(minidl::Tensor images, minidl::Tensor labels, std::string description, double background);

  std::int64_t size() const override { return images_.size(0); }
  minidl::data::Batch get_batch(const std::vector<std::int64_t>& indices) const override;
  minidl::Shape sample_shape() const override { return {1, kPaddedImageSize, kPaddedImageSize}; }

  const minidl::Tensor& images() const { return images_; }
  const minidl::Tensor& labels() const { return labels_; }
  /// The value of a blank pixel (the padding's), for padding more of it.
  double background() const { return background_; }
  /// Where the images came from, for the log ("/usr/share/datasets/fashion-mnist: 60000 training images ...").
  const std::string& description() const { return description_; }

 private:
  minidl::Tensor images_, labels_;
  std::string description_;
  double background_;
};

}  // namespace examples
