#pragma once
// The GAN's training images: (N, 1, 32, 32) float32 in [-1, 1] (Tanh's range), held in memory so that a batch is
// one gather. Fashion-MNIST's 28x28 images are scaled from bytes to [-1, 1] and padded by 2 pixels on each side
// with -1, their background, so that the 4x4 / stride-2 towers of model.h halve 32 -> 16 -> 8 -> 4 evenly.
#include <minidl/data/dataset.h>
#include <minidl/tensor.h>

#include <cstdint>
#include <string>

namespace dcgan {

class ImageSet : public minidl::data::Dataset {
 public:
  /// The training split of the Fashion-MNIST (or any MNIST-format) IDX files in `dir`, as minidl's MnistDataset
  /// reads them, padded to 32x32; only the first `limit` images when limit > 0. Throws what MnistDataset::load
  /// throws (IOError listing the paths looked for, FormatError), ValueError for images that are not 28x28.
  static ImageSet fashion_mnist(const std::string& dir, std::int64_t limit = 0);
  /// `n` images of independent uniform [-1, 1] pixels from a std::mt19937_64 seeded with `seed` (speed runs;
  /// minidl's own generators are left alone). n >= 1.
  static ImageSet synthetic(std::int64_t n, std::uint64_t seed);
  /// Images already shaped (N, 1, 32, 32), float32, in [-1, 1]; labels int64 (N) (the class, or 0 when none).
  ImageSet(minidl::Tensor images, minidl::Tensor labels, std::string description);

  std::int64_t size() const override { return images_.size(0); }
  minidl::data::Batch get_batch(const std::vector<std::int64_t>& indices) const override;
  minidl::Shape sample_shape() const override { return {1, 32, 32}; }

  const minidl::Tensor& images() const { return images_; }
  /// Where the images came from, for the log ("/usr/share/datasets/fashion-mnist: 60000 images").
  const std::string& description() const { return description_; }

 private:
  minidl::Tensor images_, labels_;
  std::string description_;
};

}  // namespace dcgan
