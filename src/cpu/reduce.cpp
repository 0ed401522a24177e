// CPU reductions over the middle dimension of an (outer, n, inner) view (see kernels/backend.h), with the
// reducers of kernels/reduce.h. A row (inner == 1) is reduced in 16 interleaved lanes merged pairwise at the end
// (the sums vectorise, and round better than one chain); otherwise rows of up to kColumns accumulators sweep
// down n in order, reading contiguous memory. Plus the backward scatter of the selecting reductions.
#include <algorithm>

#include "cpu/cpu_clones.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {
namespace {

constexpr int kLanes = 16;
constexpr std::int64_t kColumns = 256;

template <class R, class In>
MINIDL_CPU_CLONES typename R::acc_t reduce_row(const R& r, const In* x, std::int64_t n) {
  using A = typename R::acc_t;
  A lane[kLanes];
  for (A& a : lane) a = r.identity();
  std::int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = r.step(lane[l], x[k + l], k + l);
  for (; k < n; ++k) lane[k % kLanes] = r.step(lane[k % kLanes], x[k], k);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lane[l] = r.combine(lane[l], lane[l + width]);
  return lane[0];
}

/// Columns [i0, i0 + w) of slice o: w accumulators stepped through the n rows in order.
template <class R, class In, class Out>
MINIDL_CPU_CLONES void reduce_columns(const R& r, const In* x, std::int64_t n, std::int64_t inner, std::int64_t o,
                                      std::int64_t i0, std::int64_t w, Out* out, std::int64_t* idx) {
  using A = typename R::acc_t;
  A acc[kColumns];
  for (std::int64_t i = 0; i < w; ++i) acc[i] = r.identity();
  for (std::int64_t k = 0; k < n; ++k) {
    const In* row = x + (o * n + k) * inner + i0;
    for (std::int64_t i = 0; i < w; ++i) acc[i] = r.step(acc[i], row[i], k);
  }
  for (std::int64_t i = 0; i < w; ++i) {
    const std::int64_t j = o * inner + i0 + i;
    out[j] = r.template project<Out>(acc[i]);
    kernels::store_index(idx, j, acc[i]);
  }
}

template <class R, class In, class Out>
void reduce_typed(const R& r, const In* x, std::int64_t outer, std::int64_t n, std::int64_t inner, Out* out,
                  std::int64_t* idx) {
  if (inner == 1) {
    parallel_for(outer, static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t o = begin; o < end; ++o) {
        const auto acc = reduce_row(r, x + o * n, n);
        out[o] = r.template project<Out>(acc);
        kernels::store_index(idx, o, acc);
      }
    });
    return;
  }
  const std::int64_t blocks = (inner + kColumns - 1) / kColumns;
  parallel_for(outer * blocks, static_cast<double>(n * std::min(inner, kColumns)),
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t t = begin; t < end; ++t) {
                   const std::int64_t o = t / blocks, i0 = (t % blocks) * kColumns;
                   reduce_columns(r, x, n, inner, o, i0, std::min(kColumns, inner - i0), out, idx);
                 }
               });
}

}  // namespace

void reduce(kernels::ReduceOp op, const kernels::ReduceParams& params, const Tensor& x, std::int64_t outer,
            std::int64_t n, std::int64_t inner, Tensor& out, Tensor* indices) {
  if (outer * inner == 0) return;
  kernels::dispatch_all(x.dtype(), "reduce", [&](auto tag) {
    using In = typename decltype(tag)::type;
    kernels::visit_reducer<In>(op, params, [&](auto r) {
      using R = decltype(r);
      kernels::dispatch_all(out.dtype(), "reduce", [&](auto otag) {
        using Out = typename decltype(otag)::type;
        if constexpr (R::template writes<Out>) {
          reduce_typed(r, x.data_ptr<In>(), outer, n, inner, out.data_ptr<Out>(),
                       indices ? indices->data_ptr<std::int64_t>() : nullptr);
        } else {
          throw TypeError(detail::str("reduce: output dtype ", out.dtype(), " for input ", x.dtype()));
        }
      });
    });
  });
}

void scatter_reduced(const Tensor& grad, const Tensor& indices, std::int64_t outer, std::int64_t n, std::int64_t inner,
                     Tensor& dx) {
  fill(dx, 0.0);
  if (grad.numel() == 0) return;
  const std::int64_t k = grad.numel() / (outer * inner);
  kernels::dispatch_all(grad.dtype(), "scatter_reduced", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = grad.data_ptr<T>();
    const std::int64_t* pi = indices.data_ptr<std::int64_t>();
    T* pd = dx.data_ptr<T>();
    parallel_for(outer, static_cast<double>(k * inner), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t o = begin; o < end; ++o)
        for (std::int64_t j = 0; j < k; ++j)
          for (std::int64_t i = 0; i < inner; ++i) {
            const std::int64_t s = (o * k + j) * inner + i;
            pd[(o * n + pi[s]) * inner + i] = pg[s];
          }
    });
  });
}

}  // namespace cpu
}  // namespace minidl
