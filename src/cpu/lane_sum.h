#pragma once
// The sum of a contiguous run of values in 16 interleaved partial sums, added pairwise at the end. One running
// sum is a chain of dependent adds (one per add latency, no vectorisation without reassociation); the
// partial sums vectorise as they are written, and round better besides.
#include <cstdint>

namespace minidl {
namespace cpu {

template <class T>
inline T lane_sum(const T* x, std::int64_t n) {
  constexpr int kLanes = 16;
  T part[kLanes] = {};
  std::int64_t r = 0;
  for (; r + kLanes <= n; r += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] += x[r + l];
  for (; r < n; ++r) part[r % kLanes] += x[r];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) part[l] += part[l + width];
  return part[0];
}

}  // namespace cpu
}  // namespace minidl
