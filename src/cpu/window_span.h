#pragma once
// Window geometry shared by the CPU convolution and pooling kernels.
#include <algorithm>
#include <cstdint>

namespace minidl {
namespace cpu {

/// The outputs o in [lo, hi) of one axis whose tap o * stride - pad + offset lands inside [0, in); the other
/// outputs read padding.
struct Span {
  std::int64_t lo, hi;
};
inline Span inside(std::int64_t out, std::int64_t in, std::int64_t stride, std::int64_t pad, std::int64_t offset) {
  const std::int64_t first = pad - offset;         // smallest o * stride that lands inside
  const std::int64_t last = in - 1 + pad - offset;  // largest o * stride that lands inside
  if (last < 0) return {0, 0};
  const std::int64_t lo = std::min(out, first <= 0 ? std::int64_t{0} : (first + stride - 1) / stride);
  const std::int64_t hi = std::min(out, last / stride + 1);
  return {lo, std::max(lo, hi)};
}

}  // namespace cpu
}  // namespace minidl
