// CPU reductions over the middle dimension of an (outer, n, inner) view (see kernels/backend.h): sum, max with
// its index (plain loops: Eigen has no argmax along a middle dimension), and the max's backward scatter.
#include <algorithm>
#include <cmath>

#include "cpu/cpu_clones.h"
#include "cpu/lane_sum.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {
namespace {

/// out[o, i] = sum over r of x[o, r, i] for o in [begin, end), x viewed as (outer, n, inner). Rows (inner == 1,
/// the sum over an image plane) go through lane_sum; otherwise the rows of x are added up in order,
/// vectorised along inner.
template <class T>
MINIDL_CPU_CLONES void sum_middle(const T* x, std::int64_t n, std::int64_t inner, T* out, std::int64_t begin,
                                  std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    const T* xo = x + o * n * inner;
    T* oo = out + o * inner;
    if (inner == 1) {
      oo[0] = lane_sum(xo, n);
      continue;
    }
    std::fill(oo, oo + inner, T(0));
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t i = 0; i < inner; ++i) oo[i] += xo[r * inner + i];
  }
}

}  // namespace

void reduce(kernels::ReduceOp op, const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
            Tensor& out, Tensor* indices) {
  kernels::dispatch(kernels::SumTypes{}, x.dtype(), "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* po = out.data_ptr<T>();
    if (op == kernels::ReduceOp::Sum) {
      parallel_for(outer, static_cast<double>(n * inner), [&](std::int64_t begin, std::int64_t end) {
        sum_middle(px, n, inner, po, begin, end);
      });
      return;
    }
    std::int64_t* pi = indices ? indices->data_ptr<std::int64_t>() : nullptr;
    // Max with the index of the first maximum (NaN wins, as in PyTorch); Eigen has no argmax along one axis
    // of a 3-D view.
    parallel_for(outer * inner, static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t j = begin; j < end; ++j) {
        const std::int64_t o = j / inner, i = j % inner;
        const T* base = px + o * n * inner + i;
        T best = base[0];
        std::int64_t arg = 0;
        for (std::int64_t r = 1; r < n && !kernels::m_isnan(best); ++r) {
          const T v = base[r * inner];
          if (kernels::replaces_max(v, best)) {
            best = v;
            arg = r;
          }
        }
        po[j] = best;
        if (pi) pi[j] = arg;
      }
    });
  });
}

void scatter_reduced(const Tensor& grad, const Tensor& indices, std::int64_t outer, std::int64_t n,
                     std::int64_t inner, Tensor& dx) {
  fill(dx, 0.0);
  kernels::dispatch(kernels::SumTypes{}, grad.dtype(), "scatter_reduced", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = grad.data_ptr<T>();
    const std::int64_t* pi = indices.data_ptr<std::int64_t>();
    T* pd = dx.data_ptr<T>();
    for (std::int64_t j = 0; j < outer * inner; ++j) {
      const std::int64_t o = j / inner, i = j % inner;
      pd[(o * n + pi[j]) * inner + i] = pg[j];
    }
  });
}

}  // namespace cpu
}  // namespace minidl
