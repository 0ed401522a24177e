// CPU scans along the middle dimension of an (outer, n, inner) view (see kernels/backend.h): each row (inner == 1)
// in one running accumulator, otherwise rows of up to kColumns accumulators stepped down n in order, reading
// contiguous memory; and cumprod's backward slice by slice (kernels/scan.h).
#include <algorithm>
#include <type_traits>

#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {
namespace {

constexpr std::int64_t kColumns = 256;

template <class In, class Out, class A, class F>
void scan_typed(F f, A identity, bool reverse, const In* x, std::int64_t outer, std::int64_t n, std::int64_t inner,
                Out* out) {
  const std::int64_t blocks = (inner + kColumns - 1) / kColumns;
  parallel_for(outer * blocks, static_cast<double>(n * std::min(inner, kColumns)),
               [&](std::int64_t begin, std::int64_t end) {
                 A acc[kColumns];
                 for (std::int64_t t = begin; t < end; ++t) {
                   const std::int64_t o = t / blocks, i0 = (t % blocks) * kColumns;
                   const std::int64_t w = std::min(kColumns, inner - i0);
                   std::fill(acc, acc + w, identity);
                   for (std::int64_t s = 0; s < n; ++s) {
                     const std::int64_t row = (o * n + (reverse ? n - 1 - s : s)) * inner + i0;
                     for (std::int64_t i = 0; i < w; ++i) {
                       acc[i] = f(acc[i], kernels::convert<A>(x[row + i]));
                       out[row + i] = kernels::convert<Out>(acc[i]);
                     }
                   }
                 }
               });
}

}  // namespace

void scan(kernels::ScanOp op, bool reverse, const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
          Tensor& out) {
  if (x.numel() == 0) return;
  kernels::dispatch_all(x.dtype(), "scan", [&](auto tag) {
    using In = typename decltype(tag)::type;
    using A = kernels::sum_acc_t<In>;
    using Out = std::conditional_t<std::is_integral_v<In>, std::int64_t, In>;
    MINIDL_CHECK(out.dtype() == dtype_of<Out>::value, TypeError, "scan: output dtype ", out.dtype(), " for input ",
                 x.dtype());
    kernels::visit_scan<A>(op, [&](auto f, A identity) {
      scan_typed(f, identity, reverse, x.data_ptr<In>(), outer, n, inner, out.data_ptr<Out>());
    });
  });
}

void cumprod_backward(const Tensor& x, const Tensor& grad, std::int64_t outer, std::int64_t n, std::int64_t inner,
                      Tensor& dx) {
  if (x.numel() == 0) return;
  kernels::dispatch_all(x.dtype(), "cumprod_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::is_floating_v<T>) {
      const T* px = x.data_ptr<T>();
      const T* pg = grad.data_ptr<T>();
      T* pd = dx.data_ptr<T>();
      parallel_for(outer * inner, static_cast<double>(4 * n), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t j = begin; j < end; ++j) {
          const std::int64_t off = (j / inner) * n * inner + j % inner;
          kernels::cumprod_backward_slice(px + off, pg + off, pd + off, n, inner);
        }
      });
    } else {
      throw TypeError(detail::str("cumprod_backward: expected a floating tensor, found ", x.dtype()));
    }
  });
}

}  // namespace cpu
}  // namespace minidl
