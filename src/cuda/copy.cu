// CUDA copy-family kernels (see kernels/backend.h): fill, copy with dtype conversion, arange, transpose, and
// copy_bytes between devices; everything runs on gpu::stream().
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

template <class S, class D> __global__ void cast_kernel(const S* in, D* out, i64 n) {
  GRID_STRIDE(i, n) out[i] = static_cast<D>(in[i]);
}

template <class T> __global__ void arange_kernel(T* out, i64 n, double start, double step) {
  GRID_STRIDE(i, n) out[i] = static_cast<T>(start + step * static_cast<double>(i));
}

template <class T> __global__ void transpose_kernel(const T* x, T* y, i64 total, i64 d0, i64 B, i64 d1, i64 C) {
  GRID_STRIDE(o, total) {
    // o indexes y as (A, d1, B, d0, C)
    i64 r = o;
    const i64 c = r % C; r /= C;
    const i64 i0 = r % d0; r /= d0;
    const i64 b = r % B; r /= B;
    const i64 i1 = r % d1; r /= d1;
    const i64 a = r;
    y[o] = x[(((a * d0 + i0) * B + b) * d1 + i1) * C + c];
  }
}

}  // namespace

void fill(Tensor& out, double value) {
  if (out.numel() == 0) return;
  kernels::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(out.data_ptr<T>(), out.numel(), Constant<T>{static_cast<T>(value)});
  });
}

void copy(const Tensor& src, Tensor& dst) {
  if (src.numel() == 0) return;
  if (src.dtype() == dst.dtype()) {
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  kernels::dispatch_all(src.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    kernels::dispatch_all(dst.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      cast_kernel<<<blocks_for(src.numel()), kThreads, 0, stream()>>>(src.data_ptr<S>(), dst.data_ptr<D>(), src.numel());
    });
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void arange(Tensor& out, double start, double step) {
  if (out.numel() == 0) return;
  kernels::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    arange_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(out.data_ptr<T>(), out.numel(), start, step);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void transpose(const Tensor& x, Tensor& out, i64 A, i64 d0, i64 B, i64 d1, i64 C) {
  const i64 total = A * d0 * B * d1 * C;
  if (total == 0) return;
  kernels::dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    transpose_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(x.data_ptr<T>(), out.data_ptr<T>(), total, d0, B, d1, C);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (bytes == 0) return;
  if (src_device.is_cpu()) {
    DeviceGuard g(dst_device.index());
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
    return;
  }
  if (dst_device.is_cpu()) {
    DeviceGuard g(src_device.index());
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
    MINIDL_CUDA_CHECK(cudaStreamSynchronize(stream()));  // the caller reads the host memory next
    return;
  }
  if (src_device == dst_device) {
    DeviceGuard g(dst_device.index());
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  {
    DeviceGuard g(src_device.index());
    MINIDL_CUDA_CHECK(cudaStreamSynchronize(stream()));  // the source must be complete before the peer copy
  }
  DeviceGuard g(dst_device.index());
  MINIDL_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index(), src, src_device.index(), bytes, stream()));
}

}  // namespace gpu
}  // namespace minidl
