#include <cstdlib>
#include <new>

#include "core/tensor_impl.h"
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

namespace {
constexpr std::size_t kHostAlignment = 64;  // one cache line; also what AVX-512 loads like
}

Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cpu()) {
    const std::size_t rounded = ((nbytes + kHostAlignment - 1) / kHostAlignment) * kHostAlignment;
    data_ = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
    if (!data_) throw OutOfMemoryError(detail::str("CPU out of memory: tried to allocate ", nbytes, " bytes"), nbytes, 0, 0);
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
    std::free(data_);
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
