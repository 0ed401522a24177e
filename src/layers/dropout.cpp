// Dropout: a mask of 0 and 1/(1-p) drawn from the device's generator (Philox on both devices), multiplied in;
// the backward multiplies the gradient by the same mask.
#include "layers/lowp.h"
#include "ops/op_utils.h"
#include "minidl/nn/functional.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

void check_arguments(const Tensor& input, double p, const char* op) {
  ops::check_defined(input, op, "input");
  ops::check_floating(input, op);
  MINIDL_CHECK(p >= 0.0 && p <= 1.0, ValueError, op, ": p must be in [0, 1], found ", p);
}

/// Dropout with a mask of `mask_shape` broadcast over the input (dropout2d's per-channel masks).
Tensor apply_mask(const Tensor& input, const Shape& mask_shape, double p, const char* op) {
  check_arguments(input, p, op);
  if (p == 0.0) return input;
  Tensor mask = rand(mask_shape, TensorOptions(input.dtype()).device(input.device()));
  MINIDL_ON_BACKEND(mask.device(), unary(kernels::UnaryOp::DropoutMask, p, mask, mask));
  return mul(input, mask);
}

}  // namespace

Tensor dropout(const Tensor& input_in, double p, bool training) {
  if (!training) return input_in;
  check_arguments(input_in, p, "dropout");
  if (p == 0.0) return input_in;
  if (layers::needs_float_path(input_in, true)) return dropout(layers::widen(input_in), p, training).to(input_in.dtype());
  const Tensor input = ops::dense(input_in);
  Tensor out = ops::empty_as(input.sizes(), input), mask = ops::empty_as(input.sizes(), input);
  MINIDL_ON_BACKEND(input.device(), dropout(input, p, out, mask));
  // The gradient is masked in its own buffer when no one else holds it (written lines stay in cache; a fresh
  // output buffer would be streamed in and out besides).
  return autograd::record(out, "DropoutBackward", {input}, [mask](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad_reusing(kernels::BinaryOp::Mul, 0.0, g, mask)};
  });
}

Tensor dropout2d(const Tensor& input, double p, bool training) {
  if (!training) return input;
  MINIDL_CHECK(input.dim() == 4, ValueError, "dropout2d: input must be (N, C, H, W), found shape ",
               shape_str(input.sizes()));
  return apply_mask(input, {input.size(0), input.size(1), 1, 1}, p, "dropout2d");
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
