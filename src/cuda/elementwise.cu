// CUDA elementwise kernels (see kernels/backend.h): unary and binary ops from the functors of
// kernels/elementwise.h, shared with the CPU backend, and the in-place activation of cuda/activation.h; on
// gpu::stream().
#include "cuda/activation.h"
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

template <class T, class F>
__global__ void binary_broadcast_kernel(const T* a, const T* b, T* y, i64 n, kernels::BroadcastIndex bi, F f) {
  GRID_STRIDE(i, n) {
    i64 oa, ob;
    bi.offsets(i, oa, ob);
    y[i] = f(a[oa], b[ob]);
  }
}

}  // namespace

void unary(kernels::UnaryOp op, double alpha, const Tensor& x, Tensor& out) {
  if (x.numel() == 0) return;
  if (x.dtype() == kInt64 && op == kernels::UnaryOp::AddScalar) {  // counters; the only integer op
    return launch_map(out.data_ptr<i64>(), x.numel(), kernels::AddScalar<i64>{static_cast<i64>(alpha)},
                      x.data_ptr<i64>());
  }
  kernels::dispatch_floating(x.dtype(), "unary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_unary<T>(op, static_cast<T>(alpha),
                            [&](auto f) { launch_map(out.data_ptr<T>(), x.numel(), f, x.data_ptr<T>()); });
  });
}

template <class T>
void activate_in_place(kernels::Activation act, T* y, i64 n) {
  if (act == kernels::Activation::None) return;
  launch_map(y, n, kernels::Relu<T>{T(0)}, static_cast<const T*>(y));
}
template void activate_in_place<float>(kernels::Activation, float*, i64);
template void activate_in_place<double>(kernels::Activation, double*, i64);

void binary(kernels::BinaryOp op, double alpha, const Tensor& a, const Tensor& b, Tensor& out) {
  const i64 n = out.numel();
  if (n == 0) return;
  kernels::dispatch_floating(out.dtype(), "binary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_binary<T>(op, static_cast<T>(alpha), [&](auto f) {
      if (a.sizes() == out.sizes() && b.sizes() == out.sizes()) {
        launch_map(out.data_ptr<T>(), n, f, a.data_ptr<T>(), b.data_ptr<T>());
      } else {
        binary_broadcast_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(
            a.data_ptr<T>(), b.data_ptr<T>(), out.data_ptr<T>(), n, kernels::broadcast_index(a.sizes(), b.sizes(), out.sizes()), f);
        MINIDL_CUDA_KERNEL_CHECK();
      }
    });
  });
}

}  // namespace gpu
}  // namespace minidl
