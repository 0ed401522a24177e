#include "kernels/elementwise.h"
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

}  // namespace kernels
}  // namespace minidl
