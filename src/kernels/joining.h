#pragma once
// The layout cat's kernels read an input in (kernels/backend.h), for the op layer, which decides which inputs take
// them, and for both backends: an input is `rows` rows (the product of its sizes before dim) of its elements from
// dim on, which must lie contiguously; the rows follow each other at one stride, so a narrow of a contiguous tensor
// (roll's pieces, slices) and an expanded one (stride 0) are read in place, as contiguous inputs are.
#include <cstdint>

#include "minidl/tensor.h"

namespace minidl {
namespace kernels {

/// The stride in elements between t's rows as cat reads them, or -1 when t is not laid out as such rows.
inline std::int64_t cat_row_stride(const Tensor& t, std::int64_t dim) {
  const Shape& sizes = t.sizes();
  const Shape& strides = t.strides();
  const auto d = static_cast<std::size_t>(dim);
  std::int64_t width = 1;  // a row's elements, contiguous
  for (std::size_t i = sizes.size(); i-- > d;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != width) return -1;
    width *= sizes[i];
  }
  std::int64_t row_stride = -1, next = 0;  // next: the stride the next outer dim needs to continue the rows
  for (std::size_t i = d; i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (row_stride >= 0 && strides[i] != next) return -1;
    if (row_stride < 0) row_stride = strides[i];
    next = strides[i] * sizes[i];
  }
  return row_stride >= 0 ? row_stride : width;  // one row: any stride serves
}

}  // namespace kernels
}  // namespace minidl
