// linear and linear_relu: one GEMM with the weight used transposed in place (no copy). The bias rides in the GEMM's
// epilogue where the backend has one (cuBLASLt), and linear_relu then applies the ReLU in place; otherwise a pass
// over the output adds the bias and applies the ReLU together. linear_relu does not use cuBLASLt's ReLU epilogue:
// its plan could pick another algorithm than linear's, and LinearReLU must equal Linear then ReLU bitwise (the
// same pass count as the bias-and-ReLU pass it replaces). The backward masks the
// incoming gradient with the saved output (linear_relu), and the weight-gradient GEMM sums the bias gradient in its
// epilogue where it can, else a reduction does. float32, float64, bfloat16 and float16 (all operands one dtype,
// the GEMMs accumulating in float32 for the 16-bit types).
#include "autocast/policy.h"
#include "layers/layer_utils.h"
#include "minidl/nn/functional.h"
#include "ops/op_utils.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

/// matmul_fused on a's backend (see kernels/backend.h): whether it ran.
bool gemm_fused(const Tensor& a, const Tensor& b, Tensor& out, const kernels::MatmulLayout& layout,
                const kernels::MatmulEpilogue& epilogue) {
  bool done = false;
  MINIDL_ON_BACKEND(a.device(), matmul_fused(a, b, out, layout, epilogue) ? void(done = true) : void());
  return done;
}

Tensor linear_with(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, bool relu) {
  const char* op = relu ? "linear_relu" : "linear";  // names the op in every message
  ops::check_same(input_in, weight_in, op);
  const Tensor input = ops::dense(input_in), weight = ops::dense(weight_in), bias = ops::dense(bias_in);
  ops::check_floating(input, op);
  ops::check_lowp_products(input, op);
  MINIDL_CHECK(weight.dim() == 2, ValueError, op, ": weight must be (out_features, in_features), found shape ",
               shape_str(weight.sizes()));
  MINIDL_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), ValueError, op, ": input of shape ",
               shape_str(input.sizes()), " has ", input.dim() ? input.size(-1) : 0, " features, weight expects ",
               weight.size(1));
  // rows from the leading dims, not numel / in: with in = 0 there are still rows (of bias alone).
  const std::int64_t in = weight.size(1), out_f = weight.size(0),
                     rows = ops::prod(input.sizes(), 0, static_cast<std::size_t>(input.dim() - 1));
  Shape out_shape = input.sizes();
  out_shape.back() = out_f;
  if (bias.defined()) {
    ops::check_same(input, bias, detail::str(op, " (bias)").c_str());
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == out_f, ValueError, op, ": bias must have shape [", out_f,
                 "], found ", shape_str(bias.sizes()));
  }
  Tensor out = ops::empty_as(out_shape, input);
  const auto forward = kernels::MatmulLayout::dense(1, rows, out_f, in, false, true);
  kernels::MatmulEpilogue epilogue;
  epilogue.bias = &bias;
  if (bias.defined() && gemm_fused(input, weight, out, forward, epilogue)) {
    if (relu) MINIDL_ON_BACKEND(out.device(), unary(kernels::UnaryOp::Relu, 0.0, out, out));
  } else {
    MINIDL_ON_BACKEND(out.device(), matmul(input, weight, out, forward));
    if (bias.defined()) {
      MINIDL_ON_BACKEND(out.device(),
                        binary(relu ? kernels::BinaryOp::AddRelu : kernels::BinaryOp::Add, 1.0, out, bias, out));
    } else if (relu) {
      MINIDL_ON_BACKEND(out.device(), unary(kernels::UnaryOp::Relu, 0.0, out, out));
    }
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
    // dW = g2^T x, whose op(a) = g2^T has the bias gradient as its row sums.
    Tensor dw, db;
    bool db_fused = false;
    if (need_w) {
      dw = ops::empty_as(w_shape, g2);
      const auto weight_grad = kernels::MatmulLayout::dense(1, out_f, in, rows, true, false);
      if (need_b) {
        db = ops::empty_as({out_f}, g2);
        kernels::MatmulEpilogue epilogue;
        epilogue.bias_grad_a = &db;
        db_fused = gemm_fused(g2, x, dw, weight_grad, epilogue);
      }
      if (!db_fused) MINIDL_ON_BACKEND(g2.device(), matmul(g2, x, dw, weight_grad));
    }
    if (need_b && !db_fused) db = sum(g2, {0});
    return std::vector<Tensor>{need_x ? ops::gemm(g2, w, 1, rows, in, out_f, false, false, in_shape) : Tensor(),
                               dw, db};
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
