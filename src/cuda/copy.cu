// CUDA copy-family kernels (see kernels/backend.h): fill and copy (any strides, any two dtypes, the
// conversions of kernels/convert.h) and copy_bytes between devices; everything runs on gpu::stream().
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

template <class S, class D> struct Convert {
  __device__ D operator()(S s) const { return kernels::convert<D>(s); }
};

}  // namespace

void fill(Tensor& out, double value) {
  if (out.numel() == 0) return;
  kernels::dispatch_all(out.dtype(), "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Constant<T> f{kernels::convert<T>(value)};
    if (out.is_contiguous()) return launch_map(out.data_ptr<T>(), out.numel(), f);
    launch_strided_map(out.data_ptr<T>(), out.numel(), kernels::strided_index<1>(out.sizes(), {out.strides()}, "fill_"),
                       f);
  });
}

void copy(const Tensor& src, Tensor& dst) {
  if (src.numel() == 0) return;
  const bool dense = src.is_contiguous() && dst.is_contiguous();
  if (dense && src.dtype() == dst.dtype()) {
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  kernels::dispatch_all(src.dtype(), "copy", [&](auto stag) {
    using S = typename decltype(stag)::type;
    kernels::dispatch_all(dst.dtype(), "copy", [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      const Convert<S, D> f;
      if (dense) return launch_map(dst.data_ptr<D>(), dst.numel(), f, src.data_ptr<S>());
      launch_strided_map(dst.data_ptr<D>(), dst.numel(),
                         kernels::strided_index<2>(dst.sizes(), {dst.strides(), src.strides()}, "copy"), f,
                         src.data_ptr<S>());
    });
  });
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
