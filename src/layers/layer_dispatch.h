#pragma once
// Routes a layer kernel (templated on the element type, same name in minidl::cpu and minidl::gpu) to the
// tensor's device: MINIDL_LAYER_KERNEL(x, conv2d_forward, p, ptr<T>(x), ...). Inside the call `T` is the
// element type.
#include "kernels/dispatch_types.h"
#include "kernels/layer_kernels.h"
#include "ops/op_utils.h"

namespace minidl {
namespace layers {
/// Typed data pointer of an optional tensor (nullptr when undefined).
template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
}  // namespace layers
}  // namespace minidl

#define MINIDL_LAYER_KERNEL(tensor, name, ...)                                       \
  ::minidl::kernels::dispatch_floating((tensor).dtype(), #name, [&](auto tag_) {    \
    using T = typename decltype(tag_)::type;                                        \
    MINIDL_ON_BACKEND((tensor).device(), name<T>(__VA_ARGS__));                     \
  })
