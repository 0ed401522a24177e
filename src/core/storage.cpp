#include "core/tensor_impl.h"
#include "cpu/host_allocator.h"
#include "kernels/backend.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/context.h"
#endif

namespace minidl {

namespace detail {
void throw_cuda_not_built() {
  throw TypeError("this build of minidl has no CUDA backend (configured with MINIDL_WITH_CUDA=OFF or without a "
                  "CUDA toolkit/cuDNN); run `minidl info` for details, or use the CPU device");
}
}  // namespace detail

Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cpu()) {
    data_ = cpu::host_allocator().allocate(nbytes);
    return;
  }
#if MINIDL_CUDA_ENABLED
  gpu::DeviceGuard guard(device.index());
  data_ = gpu::device_alloc(nbytes);
#else
  detail::throw_cuda_not_built();
#endif
}

Storage::~Storage() {
  if (device_.is_cpu()) {
    cpu::host_allocator().deallocate(data_, nbytes_);
    return;
  }
#if MINIDL_CUDA_ENABLED
  gpu::DeviceGuard guard(device_.index());
  gpu::device_free(data_);
#endif
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> s, std::size_t offset, Shape sh, DType dt)
    : storage(std::move(s)), byte_offset(offset), shape(std::move(sh)), dtype(dt), numel(shape_numel(shape)) {}

}  // namespace minidl
