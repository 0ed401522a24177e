#include "kernels/strided_index.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "minidl/errors.h"
#include "minidl/tensor.h"

namespace minidl {
namespace kernels {

std::vector<std::int64_t> broadcast_strides(const std::vector<std::int64_t>& sizes,
                                            const std::vector<std::int64_t>& strides,
                                            const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> r(shape.size(), 0);
  const std::size_t lead = shape.size() - sizes.size();
  for (std::size_t d = lead; d < shape.size(); ++d) r[d] = sizes[d - lead] == 1 ? 0 : strides[d - lead];
  return r;
}

template <int N>
StridedIndex<N> strided_index(const std::vector<std::int64_t>& shape,
                              const std::array<std::vector<std::int64_t>, N>& strides, const char* op) {
  // Walk from the innermost dim outwards, appending a dim to the current one when every operand allows it.
  std::vector<std::int64_t> sizes;
  std::vector<std::array<std::int64_t, N>> st;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    std::array<std::int64_t, N> s;
    for (int k = 0; k < N; ++k) s[k] = strides[k][d];
    bool merge = !sizes.empty();
    for (int k = 0; k < N && merge; ++k) merge = s[k] == st.back()[k] * sizes.back();
    if (merge) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    st.push_back(s);
  }
  StridedIndex<N> r;
  r.ndim = static_cast<int>(sizes.size());
  MINIDL_CHECK(r.ndim <= kMaxDims, ValueError, op, ": the operands of shape ", shape_str(shape), " need ", r.ndim,
               " dimensions after merging, at most ", kMaxDims, " are supported");
  for (int d = 0; d < r.ndim; ++d) {  // back to outermost-first order
    const auto src = static_cast<std::size_t>(r.ndim - 1 - d);
    r.sizes[d] = sizes[src];
    for (int k = 0; k < N; ++k) r.strides[k][d] = st[src][k];
  }
  return r;
}

template StridedIndex<1> strided_index<1>(const std::vector<std::int64_t>&,
                                          const std::array<std::vector<std::int64_t>, 1>&, const char*);
template StridedIndex<2> strided_index<2>(const std::vector<std::int64_t>&,
                                          const std::array<std::vector<std::int64_t>, 2>&, const char*);
template StridedIndex<3> strided_index<3>(const std::vector<std::int64_t>&,
                                          const std::array<std::vector<std::int64_t>, 3>&, const char*);
template StridedIndex<4> strided_index<4>(const std::vector<std::int64_t>&,
                                          const std::array<std::vector<std::int64_t>, 4>&, const char*);

std::int64_t repeat_period(const std::vector<std::int64_t>& operand, const std::vector<std::int64_t>& out) {
  const auto first = std::find_if(operand.begin(), operand.end(), [](std::int64_t d) { return d != 1; });
  const auto dims = static_cast<std::size_t>(operand.end() - first);
  if (dims > out.size() || !std::equal(first, operand.end(), out.end() - static_cast<std::ptrdiff_t>(dims))) return 0;
  return std::accumulate(first, operand.end(), std::int64_t{1}, std::multiplies<>());
}

}  // namespace kernels
}  // namespace minidl
