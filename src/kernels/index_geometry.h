#pragma once
// The geometry of every indexed access (gather, scatter, index_select, index_add, x.index(...), index_put_): an
// iteration space of `sizes`, and for each element i
//   data offset  = data_strides . coord(i) + sum_k index_k[index_strides[k] . coord(i)] * index_step[k]
//   other offset = other_strides . coord(i)
// where `data` is the tensor an index picks elements of (read by a gather, written by a scatter) and `other` the
// tensor walked in order (a gather's output, a scatter's values). gather(self, dim, index) is one index tensor
// walking the output, with step self.stride(dim) and self's stride 0 along dim; index_select broadcasts a 1-d
// index along the other dims; advanced indexing has one index tensor per indexed dim, all broadcast over the
// result's index dims. One description, so both backends run the same two loops (and one CPU / GPU reference).
//
// Index values must lie in [0, bound) (or [-bound, bound) with wrap_negative, negative ones counting from the end
// as in PyTorch's x[idx]); an element with an index outside is skipped and reported as an IndexFault.
#include <cstdint>
#include <vector>

#include "kernels/convert.h"
#include "kernels/strided_index.h"

#ifdef __CUDA_ARCH__
#define MINIDL_INDEX_UNROLL _Pragma("unroll")
#else
#define MINIDL_INDEX_UNROLL
#endif

namespace minidl {
namespace kernels {

/// Index tensors one access can take: x.index() with more is split by the op (ops/indexing.cpp).
constexpr int kMaxIndices = 8;

/// The first index found out of range: which index tensor (-1: none) and its value.
struct IndexFault {
  std::int64_t index = -1;
  std::int64_t value = 0;
  bool any() const { return index >= 0; }
};

struct IndexGeometry {
  int ndim = 0;
  int nidx = 0;
  std::int64_t numel = 0;
  bool wrap_negative = false;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t data_strides[kMaxDims] = {};
  std::int64_t other_strides[kMaxDims] = {};
  std::int64_t index_strides[kMaxIndices][kMaxDims] = {};
  const std::int64_t* index[kMaxIndices] = {};  // device pointers on the GPU
  std::int64_t index_step[kMaxIndices] = {};
  std::int64_t index_bound[kMaxIndices] = {};
  // Division by sizes[d] as a multiply and shift (PyTorch's IntDivider), valid while numel < 2^31: the GPU's
  // 64-bit division costs more than the memory access it locates.
  std::uint32_t div_magic[kMaxDims] = {};
  std::uint32_t div_shift[kMaxDims] = {};

  /// The offsets of flat element i (row-major over sizes): the data offset before its indices (`data`), the other
  /// operand's, and each index tensor's. The loops run over the maximal counts with the actual ones as guards,
  /// so that every array stays in registers on the GPU.
  template <bool Small>
  MINIDL_STRIDED_HD void locate(std::int64_t i, std::int64_t& data, std::int64_t& other,
                                std::int64_t (&at)[kMaxIndices]) const {
    data = 0;
    other = 0;
MINIDL_INDEX_UNROLL
    for (int k = 0; k < kMaxIndices; ++k) at[k] = 0;
MINIDL_INDEX_UNROLL
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d < ndim) {
        std::int64_t r;
        if constexpr (Small) {
          const auto n = static_cast<std::uint32_t>(i);
          const std::uint32_t q = div_small(n, d);
          r = n - q * static_cast<std::uint32_t>(sizes[d]);
          i = q;
        } else {
          r = i % sizes[d];
          i /= sizes[d];
        }
        data += r * data_strides[d];
        other += r * other_strides[d];
MINIDL_INDEX_UNROLL
        for (int k = 0; k < kMaxIndices; ++k) {
          if (k < nidx) at[k] += r * index_strides[k][d];
        }
      }
    }
  }

  /// Adds the indices' part to a data offset; false (with the first index tensor out of range and its value) when
  /// one is out of range. Every index is read before the result is known, with no branch on a value read, so that
  /// a GPU thread's index loads of several elements are in flight together.
  MINIDL_STRIDED_HD bool resolve(std::int64_t& data, const std::int64_t (&at)[kMaxIndices], int& bad_k,
                                 std::int64_t& bad_value) const {
    bool ok = true;
MINIDL_INDEX_UNROLL
    for (int k = 0; k < kMaxIndices; ++k) {
      if (k < nidx) {
        const std::int64_t raw = index[k][at[k]];
        std::int64_t v;
        const bool in = position(k, raw, v);
        if (ok && !in) {
          bad_k = k;
          bad_value = raw;
        }
        ok = ok && in;
        data += v * index_step[k];
      }
    }
    return ok;
  }

  /// Index tensor k's value `raw` as a position along the dim it picks (a negative one counted from the end under
  /// wrap_negative); false when that lies outside [0, bound).
  MINIDL_STRIDED_HD bool position(int k, std::int64_t raw, std::int64_t& v) const {
    v = wrap_negative && raw < 0 ? raw + index_bound[k] : raw;
    return v >= 0 && v < index_bound[k];
  }

  MINIDL_STRIDED_HD std::uint32_t div_small(std::uint32_t n, int d) const {
#ifdef __CUDA_ARCH__
    return (__umulhi(n, div_magic[d]) + n) >> div_shift[d];
#else
    return static_cast<std::uint32_t>(((static_cast<std::uint64_t>(n) * div_magic[d]) >> 32) + n) >> div_shift[d];
#endif
  }
};

/// One index tensor of an access: its int64 values (contiguous or not), its strides over the iteration space (0
/// along dims it is broadcast over), the data's stride along the dim it picks and that dim's size.
struct IndexOperand {
  const std::int64_t* values;
  std::vector<std::int64_t> strides;
  std::int64_t step;
  std::int64_t bound;
};

/// The geometry of an access over `shape` (all strides in elements, one per dim of shape): size-1 dims dropped,
/// neighbouring dims merged where every operand allows it, and the divisors prepared. ValueError naming `op` when
/// more than kMaxDims dims or kMaxIndices index tensors remain.
IndexGeometry index_geometry(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& data_strides,
                             const std::vector<std::int64_t>& other_strides, const std::vector<IndexOperand>& indices,
                             bool wrap_negative, const char* op);

/// Whether flat element counts of g fit the 32-bit division (IndexGeometry::locate<true>).
inline bool small_geometry(const IndexGeometry& g) { return g.numel < (std::int64_t{1} << 31); }

/// The gather out (outer, k, inner)[o, j, i] = src (outer, n, inner)[o, index[j], i] of contiguous tensors.
IndexGeometry select_geometry(std::int64_t outer, std::int64_t n, std::int64_t inner, std::int64_t k,
                              const std::int64_t* index);

/// Sets g's divisors from its sizes (index_geometry does; a backend that reshapes a geometry calls it again).
void prepare_divisors(IndexGeometry& g);

/// a + b in T as the accumulating scatters add (computed in OpMath; bool: logical or).
template <class T> MINIDL_CONVERT_HD T accumulate_add(T a, T b) {
  using M = opmath_t<T>;
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else {
    return convert<T>(convert<M>(a) + convert<M>(b));
  }
}

}  // namespace kernels
}  // namespace minidl
