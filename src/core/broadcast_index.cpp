#include "kernels/elementwise.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "minidl/errors.h"

namespace minidl {
namespace kernels {

BroadcastIndex broadcast_index(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b,
                               const std::vector<std::int64_t>& out) {
  BroadcastIndex bi;
  bi.ndim = static_cast<int>(out.size());
  MINIDL_CHECK(bi.ndim <= kMaxDims, ValueError, "broadcast: at most ", kMaxDims, " dimensions supported, found ", bi.ndim);
  auto strides_of = [&](const std::vector<std::int64_t>& s, std::int64_t* st) {
    const int off = bi.ndim - static_cast<int>(s.size());
    std::int64_t stride = 1;
    for (int d = bi.ndim - 1; d >= 0; --d) {
      const int sd = d - off;
      st[d] = (sd < 0 || s[sd] == 1) ? 0 : stride;  // a broadcast dim re-reads the same element
      if (sd >= 0) stride *= s[sd];
    }
  };
  for (int d = 0; d < bi.ndim; ++d) bi.out_sizes[d] = out[d];
  strides_of(a, bi.a_strides);
  strides_of(b, bi.b_strides);
  return bi;
}

std::int64_t repeat_period(const std::vector<std::int64_t>& operand, const std::vector<std::int64_t>& out) {
  const auto first = std::find_if(operand.begin(), operand.end(), [](std::int64_t d) { return d != 1; });
  const auto dims = static_cast<std::size_t>(operand.end() - first);
  if (dims > out.size() || !std::equal(first, operand.end(), out.end() - static_cast<std::ptrdiff_t>(dims))) return 0;
  return std::accumulate(first, operand.end(), std::int64_t{1}, std::multiplies<>());
}

}  // namespace kernels
}  // namespace minidl
