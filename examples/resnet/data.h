#pragma once
// resnet's images: Fashion-MNIST's training or test split normalised with its training statistics (mean 0.2860,
// std 0.3530) and padded with the background to 32x32, one channel per image; the network's three input channels
// are made on the device, per batch (augment.h), which keeps the resident set a third of the size.
#include <cstdint>
#include <string>

#include "image_set.h"

namespace resnet {

/// Where Debian's dataset-fashion-mnist package puts the IDX files.
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

/// The training (`train`) or test split of the Fashion-MNIST IDX files in `dir`; only the first `limit` images when
/// limit > 0. Throws what examples::ImageSet::mnist_format throws.
examples::ImageSet fashion_mnist(const std::string& dir, bool train, std::int64_t limit = 0);

}  // namespace resnet
