#include "core/tensor_impl.h"

#include <algorithm>

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

Storage::Storage(void* data, std::size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), external_(true), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (external_) {
    if (deleter_) deleter_(data_);
    return;
  }
  if (device_.is_cpu()) {
    cpu::host_allocator().deallocate(data_, nbytes_);
    return;
  }
#if MINIDL_CUDA_ENABLED
  gpu::DeviceGuard guard(device_.index());
  gpu::device_free(data_);
#endif
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

bool strides_are_contiguous(const Shape& shape, const Shape& strides) {
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> s, std::size_t offset, Shape sh, DType dt)
    : storage(std::move(s)),
      byte_offset(offset),
      shape(std::move(sh)),
      strides(contiguous_strides(shape)),
      dtype(dt),
      numel(shape_numel(shape)),
      contiguous(true) {}

TensorImpl::TensorImpl(std::shared_ptr<Storage> s, std::size_t offset, Shape sh, Shape st, DType dt)
    : storage(std::move(s)),
      byte_offset(offset),
      shape(std::move(sh)),
      strides(std::move(st)),
      dtype(dt),
      numel(shape_numel(shape)),
      contiguous(strides_are_contiguous(shape, strides)) {}

}  // namespace minidl
