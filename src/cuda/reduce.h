#pragma once
// Sums other GPU code calls on raw device pointers, with the sum op's deterministic reduction kernels
// (reduce.cu): fixed chunks and a fixed order, so results are bitwise reproducible.
#include <cstdint>

namespace minidl {
namespace gpu {

/// out[c] = the sum over n and pq of dy laid out [n][k][pq] (a convolution's bias gradient), for c < k, on
/// gpu::stream(): rows over pq, then columns over n. float and double.
template <class T>
void channel_sum(const T* dy, std::int64_t n, std::int64_t k, std::int64_t pq, T* out);

}  // namespace gpu
}  // namespace minidl
