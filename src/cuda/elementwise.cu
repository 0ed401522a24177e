// CUDA elementwise kernels (see kernels/backend.h): unary, binary and ternary ops from the functors of
// kernels/elementwise.h, shared with the CPU backend, and the in-place activation of cuda/activation.h; on
// gpu::stream(). Contiguous operands of out's shape run the flat map (16-byte packs where aligned); any other
// geometry goes through a StridedIndex.
#include "cuda/activation.h"
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {

void unary(kernels::UnaryOp op, const kernels::OpScalars& s, const Tensor& x, Tensor& out) {
  if (x.numel() == 0) return;
  kernels::dispatch_in_out(x.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_unary<S, O>(op, s, [&](auto f) {
      if (x.is_contiguous() && out.is_contiguous()) return launch_map(out.data_ptr<O>(), x.numel(), f, x.data_ptr<S>());
      launch_strided_map(out.data_ptr<O>(), out.numel(),
                         kernels::strided_index<2>(out.sizes(), {out.strides(), x.strides()}, kernels::op_name(op)),
                         f, x.data_ptr<S>());
    });
  });
}

template <class T>
void activate_in_place(kernels::Activation act, T* y, i64 n) {
  if (act == kernels::Activation::None) return;
  using C = kernels::opmath_t<T>;
  launch_map(y, n, kernels::Relu<C>{C(0)}, static_cast<const T*>(y));
}
template void activate_in_place<float>(kernels::Activation, float*, i64);
template void activate_in_place<double>(kernels::Activation, double*, i64);
template void activate_in_place<BFloat16>(kernels::Activation, BFloat16*, i64);
template void activate_in_place<Half>(kernels::Activation, Half*, i64);

void binary(kernels::BinaryOp op, const kernels::OpScalars& s, const Tensor& a, const Tensor& b, Tensor& out) {
  const i64 n = out.numel();
  if (n == 0) return;
  kernels::dispatch_in_out(a.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_binary<S, O>(op, s, [&](auto f) {
      if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous() && a.sizes() == out.sizes() &&
          b.sizes() == out.sizes()) {
        return launch_map(out.data_ptr<O>(), n, f, a.data_ptr<S>(), b.data_ptr<S>());
      }
      const auto si = kernels::strided_index<3>(
          out.sizes(),
          {out.strides(), kernels::broadcast_strides(a.sizes(), a.strides(), out.sizes()),
           kernels::broadcast_strides(b.sizes(), b.strides(), out.sizes())},
          kernels::op_name(op));
      launch_strided_map(out.data_ptr<O>(), n, si, f, a.data_ptr<S>(), b.data_ptr<S>());
    });
  });
}

void ternary(kernels::TernaryOp op, const kernels::OpScalars& s, const Tensor& a, const Tensor& b, const Tensor& c,
             Tensor& out) {
  const i64 n = out.numel();
  if (n == 0) return;
  kernels::dispatch_in_out(a.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_ternary<S, O>(op, s, [&](auto f) {
      const Shape& shape = out.sizes();
      if (a.is_contiguous() && b.is_contiguous() && c.is_contiguous() && out.is_contiguous() && a.sizes() == shape &&
          b.sizes() == shape && c.sizes() == shape) {
        return launch_map(out.data_ptr<O>(), n, f, a.data_ptr<S>(), b.data_ptr<S>(), c.data_ptr<S>());
      }
      const auto si = kernels::strided_index<4>(
          shape,
          {out.strides(), kernels::broadcast_strides(a.sizes(), a.strides(), shape),
           kernels::broadcast_strides(b.sizes(), b.strides(), shape),
           kernels::broadcast_strides(c.sizes(), c.strides(), shape)},
          kernels::op_name(op));
      launch_strided_map(out.data_ptr<O>(), n, si, f, a.data_ptr<S>(), b.data_ptr<S>(), c.data_ptr<S>());
    });
  });
}

}  // namespace gpu
}  // namespace minidl
