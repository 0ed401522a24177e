#pragma once
// The GAN's training images: examples/common's ImageSet (N, 1, 32, 32) in [-1, 1], Tanh's range. Fashion-MNIST's
// 28x28 images are scaled from bytes to [-1, 1] and padded with -1, their background, so that the 4x4 / stride-2
// towers of model.h halve 32 -> 16 -> 8 -> 4 evenly.
#include <cstdint>
#include <string>

#include "image_set.h"

namespace dcgan {

using ImageSet = examples::ImageSet;

/// The training split of the Fashion-MNIST (or any MNIST-format) IDX files in `dir` scaled to [-1, 1] and padded
/// to 32x32; only the first `limit` images when limit > 0. Throws what ImageSet::mnist_format throws.
ImageSet fashion_mnist(const std::string& dir, std::int64_t limit = 0);

}  // namespace dcgan
