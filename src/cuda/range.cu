// CUDA range kernels (see kernels/backend.h): arange, linspace and logspace, element i computed on its own from
// the formulas of kernels/range.h (the CPU's values bitwise, up to the device's pow), on gpu::stream().
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/range.h"

namespace minidl {
namespace gpu {
namespace {

template <class T, class F>
__global__ void indexed_kernel(T* out, i64 n, F f) {
  GRID_STRIDE(i, n) out[i] = f(i);
}

template <class T, class F>
void launch_indexed(Tensor& out, const F& f) {
  if (out.numel() == 0) return;
  indexed_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(out.data_ptr<T>(), out.numel(), f);
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace

void arange(Tensor& out, double start, double step) {
  kernels::dispatch_all(out.dtype(), "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_indexed<T>(out, kernels::Arange<T>{start, step});
  });
}

void linspace(Tensor& out, double start, double end) {
  kernels::dispatch(kernels::RangeTypes{}, out.dtype(), "linspace", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_indexed<T>(out, kernels::Linspace<T>{kernels::LinspaceTerm<T>(start, end, out.numel())});
  });
}

void logspace(Tensor& out, double start, double end, double base) {
  kernels::dispatch(kernels::RangeTypes{}, out.dtype(), "logspace", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_indexed<T>(out, kernels::Logspace<T>(start, end, out.numel(), base));
  });
}

}  // namespace gpu
}  // namespace minidl
