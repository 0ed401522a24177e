#include "image_set.h"

#include <minidl/minidl.h>

#include <random>

#include "seeded_draws.h"

namespace examples {

namespace F = minidl::nn::functional;
using minidl::Tensor;

ImageSet::ImageSet(Tensor images, Tensor labels, std::string description, double background)
    : images_(std::move(images)), labels_(std::move(labels)), description_(std::move(description)),
      background_(background) {
  MINIDL_CHECK(images_.dim() == 4 && images_.size(1) == 1 && images_.size(2) == kPaddedImageSize &&
                   images_.size(3) == kPaddedImageSize && images_.dtype() == minidl::kFloat32,
               minidl::ValueError, "ImageSet: expected float32 images (N, 1, 32, 32), found ",
               minidl::dtype_name(images_.dtype()), " ", minidl::shape_str(images_.sizes()));
  MINIDL_CHECK(labels_.dim() == 1 && labels_.size(0) == images_.size(0), minidl::ValueError,
               "ImageSet: expected one label per image (", images_.size(0), "), found ",
               minidl::shape_str(labels_.sizes()));
}

ImageSet ImageSet::mnist_format(const std::string& dir, bool train, const minidl::data::Normalization& norm,
                                std::int64_t limit) {
  minidl::data::MnistDataset set = minidl::data::MnistDataset::load(dir, train, norm);
  if (limit > 0) set.limit(limit);
  const Tensor& raw = set.images();
  MINIDL_CHECK(raw.size(2) == 28 && raw.size(3) == 28, minidl::ValueError, "--data ", dir, ": ", set.images_path(),
               " holds ", raw.size(2), "x", raw.size(3), " images, expected Fashion-MNIST's 28x28");
  const double background = (0.0 - norm.mean) / norm.std;
  const std::int64_t border = (kPaddedImageSize - 28) / 2;
  Tensor padded = F::pad(raw, F::PadFuncOptions({border, border, border, border}).value(background)).contiguous();
  return ImageSet(
      padded, set.labels(),
      dir + ": " + std::to_string(padded.size(0)) + (train ? " training" : " test") + " images padded to 32x32",
      background);
}

ImageSet ImageSet::synthetic(std::int64_t n, std::uint64_t seed, std::int64_t classes) {
  MINIDL_CHECK(n >= 1 && classes >= 1, minidl::ValueError, "ImageSet::synthetic: n and classes must be >= 1, found ", n,
               " and ", classes);
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(n * kPaddedImageSize * kPaddedImageSize));
  for (float& v : values) v = pixel(engine);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (std::int64_t& label : labels) {
    label = static_cast<std::int64_t>(uniform_below(engine, static_cast<std::uint64_t>(classes)));
  }
  return ImageSet(minidl::from_vector(values, {n, 1, kPaddedImageSize, kPaddedImageSize}),
                  minidl::from_vector(labels, {n}), std::to_string(n) + " synthetic images of uniform random pixels",
                  0.0);
}

minidl::data::Batch ImageSet::get_batch(const std::vector<std::int64_t>& indices) const {
  const Tensor idx = minidl::from_vector(indices, {static_cast<std::int64_t>(indices.size())});
  return {minidl::index_select(images_, 0, idx), minidl::index_select(labels_, 0, idx)};
}

}  // namespace examples
