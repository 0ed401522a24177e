// linear and linear_relu: one GEMM with the weight used transposed in place (no copy), then the bias broadcast
// over rows; linear_relu adds the bias and applies the ReLU in that same pass (or, without a bias, applies the
// ReLU in place), and its backward masks the incoming gradient with the saved output before linear's rule.
#include "autocast/policy.h"
#include "layers/layer_utils.h"
#include "minidl/nn/functional.h"
#include "ops/op_utils.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

Tensor linear_with(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, bool relu) {
  const char* op = relu ? "linear_relu" : "linear";  // names the op in every message
  ops::check_same(input_in, weight_in, op);
  const Tensor input = ops::dense(input_in), weight = ops::dense(weight_in), bias = ops::dense(bias_in);
  ops::check_floating(input, op);
  MINIDL_CHECK(weight.dim() == 2, ValueError, op, ": weight must be (out_features, in_features), found shape ",
               shape_str(weight.sizes()));
  MINIDL_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), ValueError, op, ": input of shape ",
               shape_str(input.sizes()), " has ", input.dim() ? input.size(-1) : 0, " features, weight expects ",
               weight.size(1));
  const std::int64_t in = weight.size(1), out_f = weight.size(0), rows = input.numel() / std::max<std::int64_t>(in, 1);
  Shape out_shape = input.sizes();
  out_shape.back() = out_f;
  Tensor out = ops::gemm(input, weight, 1, rows, out_f, in, false, true, out_shape);
  if (bias.defined()) {
    ops::check_same(out, bias, detail::str(op, " (bias)").c_str());
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == out_f, ValueError, op, ": bias must have shape [", out_f,
                 "], found ", shape_str(bias.sizes()));
    MINIDL_ON_BACKEND(out.device(),
                      binary(relu ? kernels::BinaryOp::AddRelu : kernels::BinaryOp::Add, 1.0, out, bias, out));
  } else if (relu) {
    MINIDL_ON_BACKEND(out.device(), unary(kernels::UnaryOp::Relu, 0.0, out, out));
  }
  autograd::SavedTensor sx(input, op), sw(weight, op);
  autograd::SavedTensor sy = relu ? autograd::SavedTensor(out, op) : autograd::SavedTensor();
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad(),
             need_b = bias.defined() && bias.requires_grad();
  const Shape in_shape = input.sizes(), w_shape = weight.sizes();
  return autograd::record(out, relu ? "LinearReLUBackward" : "LinearBackward", {input, weight, bias},
                          [=](const Tensor& g_out) {
    const Tensor x = sx.get(), w = sw.get();
    const Tensor g = relu ? ops::binary_grad_reusing(kernels::BinaryOp::ReluGrad, 0.0, g_out, sy.get()) : g_out;
    const Tensor g2 = g.reshape({rows, out_f});
    return std::vector<Tensor>{need_x ? ops::gemm(g2, w, 1, rows, in, out_f, false, false, in_shape) : Tensor(),
                               need_w ? ops::gemm(g2, x, 1, out_f, in, rows, true, false, w_shape) : Tensor(),
                               need_b ? sum(g2, {0}) : Tensor()};
  });
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  MINIDL_AUTOCAST(linear, input, weight, bias);
  return linear_with(input, weight, bias, false);
}

Tensor linear_relu(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  MINIDL_AUTOCAST(linear_relu, input, weight, bias);
  return linear_with(input, weight, bias, true);
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
