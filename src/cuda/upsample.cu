// CUDA interpolate (nearest, (bi)linear) and its input gradient, from the formulas of kernels/upsample.h, one
// thread per output (forward) or input (backward) element, on gpu::stream(). The backward gathers each input's
// readers (kernels::AxisMap::readers): no atomics, the CPU's summation order, deterministic.
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/upsample.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::AxisMap;
using kernels::UpsampleParams;

template <class T>
__global__ void upsample_forward_kernel(UpsampleParams p, AxisMap<T> mh, AxisMap<T> mw, const T* __restrict__ x,
                                        T* __restrict__ y, i64 total) {
  GRID_STRIDE(i, total) {
    const i64 ow = i % p.w.out, oh = (i / p.w.out) % p.h.out, plane = i / (p.w.out * p.h.out);
    y[i] = kernels::upsample_value<T>(x + plane * p.h.in * p.w.in, p.w.in, p.linear, mh.tap(oh), mw.tap(ow));
  }
}

template <class T>
__global__ void upsample_backward_kernel(UpsampleParams p, AxisMap<T> mh, AxisMap<T> mw, const T* __restrict__ dy,
                                         T* __restrict__ dx, i64 total) {
  GRID_STRIDE(i, total) {
    const i64 iw = i % p.w.in, ih = (i / p.w.in) % p.h.in, plane = i / (p.w.in * p.h.in);
    dx[i] = kernels::upsample_input_grad<T>(dy + plane * p.h.out * p.w.out, p.w.out, mh, mw, ih, iw, mh.readers(ih),
                                            mw.readers(iw));
  }
}

}  // namespace

template <class T>
void upsample_forward(const UpsampleParams& p, const T* x, T* y) {
  const i64 total = p.planes * p.h.out * p.w.out;
  if (total == 0) return;
  const AxisMap<T> mh(p.h, p.linear, p.align_corners), mw(p.w, p.linear, p.align_corners);
  upsample_forward_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(p, mh, mw, x, y, total);
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void upsample_backward(const UpsampleParams& p, const T* dy, T* dx) {
  const i64 total = p.planes * p.h.in * p.w.in;
  if (total == 0) return;
  const AxisMap<T> mh(p.h, p.linear, p.align_corners), mw(p.w, p.linear, p.align_corners);
  upsample_backward_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(p, mh, mw, dy, dx, total);
  MINIDL_CUDA_KERNEL_CHECK();
}

#define MINIDL_INSTANTIATE_UPSAMPLE(T)                                    \
  template void upsample_forward<T>(const UpsampleParams&, const T*, T*); \
  template void upsample_backward<T>(const UpsampleParams&, const T*, T*);
MINIDL_INSTANTIATE_UPSAMPLE(float)
MINIDL_INSTANTIATE_UPSAMPLE(double)
#undef MINIDL_INSTANTIATE_UPSAMPLE

}  // namespace gpu
}  // namespace minidl
