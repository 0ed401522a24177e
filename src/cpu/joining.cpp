// CPU cat (see kernels/backend.h): the inputs' bytes, one block of columns of out's rows each, copied by memcpy
// in one parallel_for over all bytes of all inputs, so that one long row (cat along dim 0) is split over the
// threads as well as many short ones.
#include <algorithm>
#include <cstring>

#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/joining.h"

namespace minidl {
namespace cpu {
namespace {
constexpr double kByteCost = 0.25;  // cycles per byte moved by memcpy
}  // namespace

void cat(const std::vector<Tensor>& inputs, const std::vector<std::int64_t>& starts, std::int64_t dim, Tensor& out) {
  const auto d = static_cast<std::size_t>(dim);
  const Shape& shape = out.sizes();
  std::int64_t rows = 1, inner = static_cast<std::int64_t>(out.element_size());
  for (std::size_t i = 0; i < d; ++i) rows *= shape[i];
  for (std::size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  const std::int64_t row_bytes = shape[d] * inner;
  // Input k's bytes are [first[k], first[k + 1]) of the concatenation of all inputs' bytes.
  std::vector<std::int64_t> width(inputs.size()), pitch(inputs.size()), first(inputs.size() + 1, 0);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    width[k] = inputs[k].size(dim) * inner;
    pitch[k] = kernels::cat_row_stride(inputs[k], dim) * static_cast<std::int64_t>(out.element_size());
    first[k + 1] = first[k] + rows * width[k];
  }
  auto* dst = static_cast<char*>(out.data_ptr());
  parallel_for(first.back(), kByteCost, [&](std::int64_t begin, std::int64_t end) {
    auto k = static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), begin) - first.begin()) - 1;
    while (begin < end) {
      while (first[k + 1] <= begin) ++k;  // skips inputs without elements
      const std::int64_t local = begin - first[k], row = local / width[k], col = local - row * width[k];
      const std::int64_t bytes = std::min(width[k] - col, end - begin);
      const char* src = static_cast<const char*>(inputs[k].data_ptr()) + row * pitch[k] + col;
      std::memcpy(dst + row * row_bytes + starts[k] * inner + col, src, static_cast<std::size_t>(bytes));
      begin += bytes;
    }
  });
}

}  // namespace cpu
}  // namespace minidl
