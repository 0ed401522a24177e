#pragma once
// Which elements tril / triu keep, for both backends, as torch.tril / torch.triu: element (i, j) of a matrix lies
// in the lower triangle of `diagonal` when j - i <= diagonal (diagonal 0 is the main diagonal, > 0 above it, < 0
// below), in the upper one when j - i >= diagonal. Row i keeps one range of columns.
#include <cstdint>

#ifdef __CUDACC__
#define MINIDL_TRIANGLE_HD __host__ __device__ __forceinline__
#else
#define MINIDL_TRIANGLE_HD inline
#endif

namespace minidl {
namespace kernels {

struct ColumnRange {
  std::int64_t begin, end;
};

/// The columns [begin, end) that row i of an m-column matrix keeps: [0, i + diagonal] (lower) or
/// [i + diagonal, m) (upper), clamped to the row.
MINIDL_TRIANGLE_HD ColumnRange kept_columns(std::int64_t i, std::int64_t m, std::int64_t diagonal, bool upper) {
  const std::int64_t edge = i + diagonal;
  const auto clamp = [m](std::int64_t v) { return v < 0 ? std::int64_t{0} : (v > m ? m : v); };
  return upper ? ColumnRange{clamp(edge), m} : ColumnRange{0, clamp(edge + 1)};
}

}  // namespace kernels
}  // namespace minidl
