#include "data.h"

namespace resnet {

examples::ImageSet fashion_mnist(const std::string& dir, bool train, std::int64_t limit) {
  return examples::ImageSet::mnist_format(dir, train, minidl::data::Normalization::fashion_mnist(), limit);
}

}  // namespace resnet
