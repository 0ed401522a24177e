// CPU elementwise kernels (see kernels/backend.h): unary, binary and ternary ops from the functors of
// kernels/elementwise.h, on the library's thread pool. Broadcasting with arbitrary strides indexes by hand.
#include "cpu/cpu_clones.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"
#include "kernels/strided_index.h"

namespace minidl {
namespace cpu {
namespace {

/// out[i] = f(x[i]), or f(x[i], y[i]) with a binary f, for i in [begin, end); out may be x or y (in-place ops).
/// Elements convert to the functor's type on the way in and to out's on the way out (bfloat16 / float16 compute
/// in float, comparisons store bool). Compiled per instruction set: Eigen's expressions are built for the
/// portable baseline, and it has no vector form of the library's functors, so it ran them four floats at a time.
template <class S, class O, class F>
MINIDL_CPU_CLONES void map_unary(F f, const S* x, O* out, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i]);
}
template <class S, class O, class F>
MINIDL_CPU_CLONES void map_binary(F f, const S* x, const S* y, O* out, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i], y[i]);
}
template <class S, class O, class F>
MINIDL_CPU_CLONES void map_ternary(F f, const S* x, const S* y, const S* z, O* out, std::int64_t begin,
                                   std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i], y[i], z[i]);
}

/// Cycles per element of a functor (an estimate for parallel_for's split), and of one through index arithmetic.
constexpr double kElementwiseCost = 10;
constexpr double kStridedCost = 20;
/// Shortest repeated block binary() runs as whole blocks: below it a call per block costs more than indexing.
constexpr std::int64_t kMinRepeatPeriod = 16;

}  // namespace

void unary(kernels::UnaryOp op, const kernels::OpScalars& s, const Tensor& x, Tensor& out) {
  kernels::dispatch_in_out(x.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_unary<S, O>(op, s, [&](auto f) {
      const S* px = x.data_ptr<S>();
      O* po = out.data_ptr<O>();
      if (x.is_contiguous() && out.is_contiguous()) {
        parallel_for(out.numel(), kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) { map_unary(f, px, po, begin, end); });
        return;
      }
      const auto si = kernels::strided_index<2>(out.sizes(), {out.strides(), x.strides()}, kernels::op_name(op));
      parallel_for(out.numel(), kStridedCost, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t off[2];
          si.offsets(i, off);
          po[off[0]] = f(px[off[1]]);
        }
      });
    });
  });
}

void binary(kernels::BinaryOp op, const kernels::OpScalars& s, const Tensor& a, const Tensor& b, Tensor& out) {
  kernels::dispatch_in_out(a.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_binary<S, O>(op, s, [&](auto f) {
      const S* pa = a.data_ptr<S>();
      const S* pb = b.data_ptr<S>();
      O* po = out.data_ptr<O>();
      const bool dense = a.is_contiguous() && b.is_contiguous() && out.is_contiguous();
      if (dense && a.sizes() == out.sizes() && b.sizes() == out.sizes()) {
        parallel_for(out.numel(), kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) { map_binary(f, pa, pb, po, begin, end); });
        return;
      }
      // One operand of out's shape, the other a block repeated along the leading dims (a bias row over a
      // batch): the plain loop per block instead of index arithmetic per element.
      const bool a_full = a.sizes() == out.sizes(), b_full = b.sizes() == out.sizes();
      const std::int64_t period = !dense  ? 0
                                  : a_full ? kernels::repeat_period(b.sizes(), out.sizes())
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
      const auto si = kernels::strided_index<3>(
          out.sizes(),
          {out.strides(), kernels::broadcast_strides(a.sizes(), a.strides(), out.sizes()),
           kernels::broadcast_strides(b.sizes(), b.strides(), out.sizes())},
          kernels::op_name(op));
      parallel_for(out.numel(), kStridedCost, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t off[3];
          si.offsets(i, off);
          po[off[0]] = f(pa[off[1]], pb[off[2]]);
        }
      });
    });
  });
}

void ternary(kernels::TernaryOp op, const kernels::OpScalars& s, const Tensor& a, const Tensor& b, const Tensor& c,
             Tensor& out) {
  kernels::dispatch_in_out(a.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_ternary<S, O>(op, s, [&](auto f) {
      const S* pa = a.data_ptr<S>();
      const S* pb = b.data_ptr<S>();
      const S* pc = c.data_ptr<S>();
      O* po = out.data_ptr<O>();
      const Shape& shape = out.sizes();
      if (a.is_contiguous() && b.is_contiguous() && c.is_contiguous() && out.is_contiguous() && a.sizes() == shape &&
          b.sizes() == shape && c.sizes() == shape) {
        parallel_for(out.numel(), kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) { map_ternary(f, pa, pb, pc, po, begin, end); });
        return;
      }
      const auto si = kernels::strided_index<4>(
          shape,
          {out.strides(), kernels::broadcast_strides(a.sizes(), a.strides(), shape),
           kernels::broadcast_strides(b.sizes(), b.strides(), shape),
           kernels::broadcast_strides(c.sizes(), c.strides(), shape)},
          kernels::op_name(op));
      parallel_for(out.numel(), kStridedCost, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t off[4];
          si.offsets(i, off);
          po[off[0]] = f(pa[off[1]], pb[off[2]], pc[off[3]]);
        }
      });
    });
  });
}

}  // namespace cpu
}  // namespace minidl
