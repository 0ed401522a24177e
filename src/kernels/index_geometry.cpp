#include "kernels/index_geometry.h"

#include "minidl/errors.h"
#include "minidl/tensor.h"

namespace minidl {
namespace kernels {

IndexGeometry index_geometry(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& data_strides,
                             const std::vector<std::int64_t>& other_strides, const std::vector<IndexOperand>& indices,
                             bool wrap_negative, const char* op) {
  MINIDL_CHECK(indices.size() <= static_cast<std::size_t>(kMaxIndices), ValueError, op, ": at most ", kMaxIndices,
               " index tensors are supported, found ", indices.size());
  const std::size_t nops = 2 + indices.size();
  const auto stride_of = [&](std::size_t k, std::size_t d) {
    return k == 0 ? data_strides[d] : k == 1 ? other_strides[d] : indices[k - 2].strides[d];
  };
  // From the innermost dim outwards, appending a dim to the current one when every operand steps through both
  // as through one.
  std::vector<std::int64_t> sizes;
  std::vector<std::vector<std::int64_t>> st;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (std::size_t k = 0; k < nops && merge; ++k) merge = stride_of(k, d) == st.back()[k] * sizes.back();
    if (merge) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    std::vector<std::int64_t> s(nops);
    for (std::size_t k = 0; k < nops; ++k) s[k] = stride_of(k, d);
    st.push_back(std::move(s));
  }
  IndexGeometry g;
  g.ndim = static_cast<int>(sizes.size());
  MINIDL_CHECK(g.ndim <= kMaxDims, ValueError, op, ": the operands of shape ", shape_str(shape), " need ", g.ndim,
               " dimensions after merging, at most ", kMaxDims, " are supported");
  g.nidx = static_cast<int>(indices.size());
  g.numel = shape_numel(shape);
  g.wrap_negative = wrap_negative;
  for (int d = 0; d < g.ndim; ++d) {  // back to outermost-first order
    const auto src = static_cast<std::size_t>(g.ndim - 1 - d);
    g.sizes[d] = sizes[src];
    g.data_strides[d] = st[src][0];
    g.other_strides[d] = st[src][1];
    for (int k = 0; k < g.nidx; ++k) g.index_strides[k][d] = st[src][2 + static_cast<std::size_t>(k)];
  }
  for (int k = 0; k < g.nidx; ++k) {
    const IndexOperand& ix = indices[static_cast<std::size_t>(k)];
    g.index[k] = ix.values;
    g.index_step[k] = ix.step;
    g.index_bound[k] = ix.bound;
  }
  prepare_divisors(g);
  return g;
}

IndexGeometry select_geometry(std::int64_t outer, std::int64_t n, std::int64_t inner, std::int64_t k,
                              const std::int64_t* index) {
  return index_geometry({outer, k, inner}, {n * inner, 0, 1}, {k * inner, inner, 1}, {{index, {0, 1, 0}, inner, n}},
                        false, "index_select");
}

void prepare_divisors(IndexGeometry& g) {
  if (!small_geometry(g) || g.numel == 0) return;
  for (int d = 0; d < g.ndim; ++d) {
    const auto divisor = static_cast<std::uint64_t>(g.sizes[d]);
    std::uint32_t shift = 0;
    while ((std::uint64_t{1} << shift) < divisor) ++shift;
    g.div_shift[d] = shift;
    g.div_magic[d] =
        static_cast<std::uint32_t>(((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - divisor)) / divisor + 1);
  }
}

}  // namespace kernels
}  // namespace minidl
