#pragma once
// dst = srcᵀ for row-major matrices with their own leading dimensions, in square tiles. An element-by-element
// transpose reads one operand a cache line per element once the matrix outgrows the cache (a convolution's
// weight gradient of 512x512x3x3 is 9 MB); within a tile both operands stay in cache, so every line that is read or
// written is used whole.
#include <algorithm>
#include <cstdint>

namespace minidl {
namespace cpu {

/// dst[j * dst_ld + i] = src[i * src_ld + j] for i < rows, j < cols.
template <class T>
void transpose_blocked(const T* __restrict src, std::int64_t src_ld, std::int64_t rows, std::int64_t cols,
                       T* __restrict dst, std::int64_t dst_ld) {
  constexpr std::int64_t kTile = 16;  // 16 floats: one 64-byte line per tile row
  for (std::int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const std::int64_t i1 = std::min(i0 + kTile, rows);
    for (std::int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const std::int64_t j1 = std::min(j0 + kTile, cols);
      for (std::int64_t j = j0; j < j1; ++j) {
        for (std::int64_t i = i0; i < i1; ++i) dst[j * dst_ld + i] = src[i * src_ld + j];
      }
    }
  }
}

}  // namespace cpu
}  // namespace minidl
