#pragma once
// Helpers of the layer ops. A layer kernel is routed to the tensor's device by MINIDL_LAYER_KERNEL
// (kernels/backend.h): MINIDL_LAYER_KERNEL(x, conv2d_forward, p, layers::ptr<T>(x), ...).
#include "kernels/backend.h"
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
