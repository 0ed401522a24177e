#pragma once
// The geometry of an elementwise kernel's operands: one shape, and for each of N operands (the output first) its
// strides in elements, 0 along a dim it is broadcast over. A flat index i of the output's elements in row-major
// order maps to each operand's element offset. Both backends walk strided, broadcast and offset views with it;
// contiguous operands of one shape take the flat fast paths instead.
#include <array>
#include <cstdint>
#include <vector>

#ifdef __CUDACC__
#define MINIDL_STRIDED_HD __host__ __device__ __forceinline__
#else
#define MINIDL_STRIDED_HD inline
#endif

namespace minidl {
namespace kernels {

/// Dims left after merging (strided_index merges dims that every operand walks as one).
constexpr int kMaxDims = 12;

template <int N> struct StridedIndex {
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[N][kMaxDims] = {};
  /// Offsets into each operand of the element with flat index i.
  MINIDL_STRIDED_HD void offsets(std::int64_t i, std::int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t idx = i % sizes[d];
      i /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += idx * strides[k][d];
    }
  }
};

/// The strides with which an operand of `sizes` / `strides` is read as a tensor of `shape` it broadcasts to
/// (shapes aligned at the right, as NumPy does): 0 along dims it is repeated over.
std::vector<std::int64_t> broadcast_strides(const std::vector<std::int64_t>& sizes,
                                            const std::vector<std::int64_t>& strides,
                                            const std::vector<std::int64_t>& shape);

/// Dims of size 1 dropped and neighbouring dims merged where every operand steps through them as through one
/// (stride[d] == stride[d + 1] * size[d + 1]); throws ValueError naming `op` if more than kMaxDims remain.
template <int N>
StridedIndex<N> strided_index(const std::vector<std::int64_t>& shape,
                              const std::array<std::vector<std::int64_t>, N>& strides, const char* op);

/// When `operand` broadcast to `out` repeats one block along out's leading dims (its shape, leading 1s aside, is
/// out's trailing dims: a bias row added to a batch), the block's length; 0 otherwise.
std::int64_t repeat_period(const std::vector<std::int64_t>& operand, const std::vector<std::int64_t>& out);

}  // namespace kernels
}  // namespace minidl
