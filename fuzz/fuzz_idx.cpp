// libFuzzer target for the IDX reader: any byte string -- raw IDX or gzip -- must either parse, as images and
// as labels, into a complete object that agrees with its own header, or throw minidl::Error. A crash, a
// sanitizer report, another exception type or an inconsistent result is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "minidl/data/idx.h"
#include "minidl/errors.h"

namespace {

using minidl::data::parse_idx_images;
using minidl::data::parse_idx_labels;

void check_images(const std::vector<std::uint8_t>& bytes) {
  try {
    const auto images = parse_idx_images(bytes, "fuzz");
    if (images.count < 1 || images.rows < 1 || images.cols < 1 ||
        images.pixels.size() != static_cast<std::size_t>(images.count * images.rows * images.cols)) {
      std::abort();
    }
  } catch (const minidl::Error&) {
  }
}

void check_labels(const std::vector<std::uint8_t>& bytes, int num_classes) {
  try {
    const auto labels = parse_idx_labels(bytes, "fuzz", num_classes);
    if (labels.count < 1 || labels.labels.size() != static_cast<std::size_t>(labels.count)) std::abort();
    for (const std::uint8_t l : labels.labels) {
      if (l >= num_classes) std::abort();
    }
  } catch (const minidl::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> bytes(data, data + size);
  check_images(bytes);
  // Every input once with MNIST's 10 classes, and once with a class count taken from the input itself (0 and
  // 257 included: the reader must reject them as arguments, not crash).
  check_labels(bytes, 10);
  if (size > 0) check_labels(bytes, data[size - 1] + 2);
  return 0;
}
