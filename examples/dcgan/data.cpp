#include "data.h"

#include <minidl/data/mnist.h>
#include <minidl/minidl.h>

#include <random>

#include "model.h"

namespace dcgan {

namespace F = minidl::nn::functional;
using minidl::Tensor;

ImageSet::ImageSet(Tensor images, Tensor labels, std::string description)
    : images_(std::move(images)), labels_(std::move(labels)), description_(std::move(description)) {
  MINIDL_CHECK(images_.dim() == 4 && images_.size(1) == 1 && images_.size(2) == kImageSize &&
                   images_.size(3) == kImageSize && images_.dtype() == minidl::kFloat32,
               minidl::ValueError, "ImageSet: expected float32 images (N, 1, 32, 32), found ",
               minidl::dtype_name(images_.dtype()), " ", minidl::shape_str(images_.sizes()));
  MINIDL_CHECK(labels_.dim() == 1 && labels_.size(0) == images_.size(0), minidl::ValueError,
               "ImageSet: expected one label per image (", images_.size(0), "), found ",
               minidl::shape_str(labels_.sizes()));
}

ImageSet ImageSet::fashion_mnist(const std::string& dir, std::int64_t limit) {
  // Normalisation mean 0.5, std 0.5 maps a byte p to (p / 255 - 0.5) / 0.5 = 2 p / 255 - 1, in [-1, 1].
  minidl::data::Normalization to_tanh_range;
  to_tanh_range.mean = 0.5;
  to_tanh_range.std = 0.5;
  minidl::data::MnistDataset set = minidl::data::MnistDataset::load(dir, true, to_tanh_range);
  if (limit > 0) set.limit(limit);
  const Tensor& raw = set.images();
  MINIDL_CHECK(raw.size(2) == 28 && raw.size(3) == 28, minidl::ValueError, "--data ", dir, ": ", set.images_path(),
               " holds ", raw.size(2), "x", raw.size(3), " images, expected Fashion-MNIST's 28x28");
  const std::int64_t border = (kImageSize - 28) / 2;
  Tensor padded = F::pad(raw, F::PadFuncOptions({border, border, border, border}).value(-1.0)).contiguous();
  return ImageSet(padded, set.labels(),
                  dir + ": " + std::to_string(padded.size(0)) + " training images padded to 32x32");
}

ImageSet ImageSet::synthetic(std::int64_t n, std::uint64_t seed) {
  MINIDL_CHECK(n >= 1, minidl::ValueError, "ImageSet::synthetic: n must be >= 1, found ", n);
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(n * kImageSize * kImageSize));
  for (float& v : values) v = pixel(engine);
  return ImageSet(minidl::from_vector(values, {n, 1, kImageSize, kImageSize}),
                  minidl::zeros({n}, minidl::TensorOptions(minidl::kInt64)),
                  std::to_string(n) + " synthetic images of uniform random pixels");
}

minidl::data::Batch ImageSet::get_batch(const std::vector<std::int64_t>& indices) const {
  const Tensor idx = minidl::from_vector(indices, {static_cast<std::int64_t>(indices.size())});
  return {minidl::index_select(images_, 0, idx), minidl::index_select(labels_, 0, idx)};
}

}  // namespace dcgan
