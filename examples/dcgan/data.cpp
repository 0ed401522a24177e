#include "data.h"

namespace dcgan {

ImageSet fashion_mnist(const std::string& dir, std::int64_t limit) {
  // Normalisation mean 0.5, std 0.5 maps a byte p to (p / 255 - 0.5) / 0.5 = 2 p / 255 - 1, in [-1, 1].
  minidl::data::Normalization to_tanh_range;
  to_tanh_range.mean = 0.5;
  to_tanh_range.std = 0.5;
  return ImageSet::mnist_format(dir, true, to_tanh_range, limit);
}

}  // namespace dcgan
