#pragma once
// Helpers of the layer ops. A layer kernel is routed to the tensor's device by MINIDL_LAYER_KERNEL
// (kernels/backend.h): MINIDL_LAYER_KERNEL(x, conv2d_forward, p, layers::ptr<T>(x), ...).
#include "kernels/backend.h"
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
