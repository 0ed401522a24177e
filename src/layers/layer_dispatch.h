#pragma once
// Routes a layer kernel (templated on the element type, same name in minidl::cpu and minidl::gpu) to the
// tensor's device: MINIDL_LAYER_KERNEL(x, conv2d_forward, p, ptr<T>(x), ...). Inside the call `T` is the
// element type.
#include "kernels/dispatch_types.h"
#include "kernels/layer_kernels.h"
#include "ops/op_utils.h"

namespace minidl {
namespace layers {
/// Typed data pointer of an optional tensor (nullptr when undefined). The layer kernels read and write
/// contiguous memory: a strided tensor here is a missing ops::dense() at the op's entry, reported as such.
template <class T>
T* ptr(const Tensor& t) {
  if (!t.defined()) return nullptr;
  MINIDL_CHECK(t.is_contiguous(), ValueError, "layer kernel: internal error, a tensor of shape ", shape_str(t.sizes()),
               " and strides ", shape_str(t.strides()), " reached a kernel that needs contiguous memory");
  return t.data_ptr<T>();
}
}  // namespace layers
}  // namespace minidl

#define MINIDL_LAYER_KERNEL(tensor, name, ...)                                       \
  ::minidl::kernels::dispatch_floating((tensor).dtype(), #name, [&](auto tag_) {    \
    using T = typename decltype(tag_)::type;                                        \
    MINIDL_ON_BACKEND((tensor).device(), name<T>(__VA_ARGS__));                     \
  })
