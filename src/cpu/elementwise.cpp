// CPU elementwise kernels (see kernels/backend.h): unary and binary ops from the functors of
// kernels/elementwise.h, on the library's thread pool. Broadcasting with arbitrary strides indexes by hand.
#include "cpu/cpu_clones.h"
#include "cpu/parallel.h"
#include "cpu/tensor_map.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {
namespace {

/// out[i] = f(x[i]), or f(x[i], y[i]) with a binary f, for i in [begin, end); out may be x or y (in-place ops).
/// Compiled per instruction set: Eigen's expressions are built for the portable baseline, and it has no vector
/// form of the library's functors, so it ran them four floats at a time.
template <class T, class F>
MINIDL_CPU_CLONES void map_unary(F f, const T* x, T* out, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i]);
}
template <class T, class F>
MINIDL_CPU_CLONES void map_binary(F f, const T* x, const T* y, T* out, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i], y[i]);
}

/// Eigen's cost estimate for a functor it knows nothing about (cycles per element).
constexpr double kElementwiseCost = 10;
/// Shortest repeated block binary() runs as whole blocks: below it a call per block costs more than indexing.
constexpr std::int64_t kMinRepeatPeriod = 16;

}  // namespace

void unary(kernels::UnaryOp op, double alpha, const Tensor& x, Tensor& out) {
  if (x.dtype() == kInt64 && op == kernels::UnaryOp::AddScalar) {  // counters; the only integer op
    vec<std::int64_t>(out).device(device()) = cvec<std::int64_t>(x) + static_cast<std::int64_t>(alpha);
    return;
  }
  kernels::dispatch_floating(x.dtype(), "unary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_unary<T>(op, static_cast<T>(alpha), [&](auto f) {
      const T* px = x.data_ptr<T>();
      T* po = out.data_ptr<T>();
      parallel_for(out.numel(), kElementwiseCost,
                   [&](std::int64_t begin, std::int64_t end) { map_unary(f, px, po, begin, end); });
    });
  });
}

void binary(kernels::BinaryOp op, double alpha, const Tensor& a, const Tensor& b, Tensor& out) {
  kernels::dispatch_floating(out.dtype(), "binary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_binary<T>(op, static_cast<T>(alpha), [&](auto f) {
      const T* pa = a.data_ptr<T>();
      const T* pb = b.data_ptr<T>();
      T* po = out.data_ptr<T>();
      if (a.sizes() == out.sizes() && b.sizes() == out.sizes()) {
        parallel_for(out.numel(), kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) { map_binary(f, pa, pb, po, begin, end); });
        return;
      }
      // One operand of out's shape, the other a block repeated along the leading dims (a bias row over a
      // batch): the plain loop per block instead of index arithmetic per element (fc1's bias + ReLU, 64 x 128:
      // 42 -> 5 us on 2 threads of the H200 host, 2026-11-30).
      const bool a_full = a.sizes() == out.sizes(), b_full = b.sizes() == out.sizes();
      const std::int64_t period = a_full   ? kernels::repeat_period(b.sizes(), out.sizes())
                                  : b_full ? kernels::repeat_period(a.sizes(), out.sizes())
                                           : 0;
      if (period >= kMinRepeatPeriod) {
        parallel_for(out.numel() / period, static_cast<double>(period) * kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) {
                       for (std::int64_t r = begin; r < end; ++r) {
                         const std::int64_t o = r * period;
                         map_binary(f, a_full ? pa + o : pa, a_full ? pb : pb + o, po + o, 0, period);
                       }
                     });
        return;
      }
      // Broadcasting with arbitrary rank: Eigen's broadcast needs the rank at compile time, so index by hand.
      const kernels::BroadcastIndex bi = kernels::broadcast_index(a.sizes(), b.sizes(), out.sizes());
      parallel_for(out.numel(), 20, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t oa, ob;
          bi.offsets(i, oa, ob);
          po[i] = f(pa[oa], pb[ob]);
        }
      });
    });
  });
}

}  // namespace cpu
}  // namespace minidl
