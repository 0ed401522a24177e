// Dropout: a mask of 0 and 1/(1-p) drawn from the device's generator (cuRAND Philox on the GPU), multiplied in.
#include "ops/op_utils.h"
#include "minidl/nn/functional.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

Tensor apply_mask(const Tensor& input, const Shape& mask_shape, double p, const char* op) {
  ops::check_defined(input, op, "input");
  ops::check_floating(input, op);
  MINIDL_CHECK(p >= 0.0 && p <= 1.0, ValueError, op, ": p must be in [0, 1], found ", p);
  if (p == 0.0) return input;
  Tensor mask = rand(mask_shape, TensorOptions(input.dtype()).device(input.device()));
  MINIDL_ON_BACKEND(mask.device(), unary(kernels::UnaryOp::DropoutMask, p, mask, mask));
  return mul(input, mask);
}

}  // namespace

Tensor dropout(const Tensor& input, double p, bool training) {
  if (!training) return input;
  return apply_mask(input, input.sizes(), p, "dropout");
}

Tensor dropout2d(const Tensor& input, double p, bool training) {
  if (!training) return input;
  MINIDL_CHECK(input.dim() == 4, ValueError, "dropout2d: input must be (N, C, H, W), found shape ", shape_str(input.sizes()));
  return apply_mask(input, {input.size(0), input.size(1), 1, 1}, p, "dropout2d");
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
