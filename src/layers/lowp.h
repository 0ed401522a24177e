#pragma once
// bfloat16 and float16 in the layer ops. A layer kernel with a 16-bit form (MINIDL_LAYER_KERNEL_LOWP: the GPU
// kernels that load 16-bit data and compute in float32) takes such tensors directly. Every other case - all
// CPU layer kernels, and the GPU kernels without a 16-bit form - runs the op through one generic path: its
// 16-bit tensors widened to float32, the float kernel, and the result rounded once to the input's dtype. The
// casts are differentiable, so the backward takes the same path (the float kernel, one rounding of each
// gradient to its tensor's dtype):
//
//   if (layers::needs_float_path(input, gpu_kernel_16bit))
//     return op(layers::widen(input), ...).to(input.dtype());
#include "minidl/tensor.h"

namespace minidl {
namespace layers {

/// Whether `x` (bfloat16 or float16) must take the float path: on the CPU always, on the GPU unless the op's
/// kernel has a 16-bit form (`gpu_kernel`). False for every other dtype.
bool needs_float_path(const Tensor& x, bool gpu_kernel);

/// t as float32 when it is bfloat16 or float16 (a differentiable cast); otherwise t itself (undefined stays so).
Tensor widen(const Tensor& t);

/// A parameter of a normalisation (weight, bias, running statistics) next to `input`: on its device, of its dtype,
/// or float32 beside a 16-bit input (PyTorch's mixed precision: float32 parameters, 16-bit activations). A
/// TypeError naming the op and the parameter otherwise.
void check_param_dtype(const Tensor& input, const Tensor& param, const char* op, const char* name);

}  // namespace layers
}  // namespace minidl
