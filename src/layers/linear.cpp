// linear: one GEMM with the weight used transposed in place (no copy), bias broadcast over rows.
#include "layers/layer_dispatch.h"
#include "minidl/nn/functional.h"

namespace minidl {
namespace nn {
namespace functional {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  ops::check_same(input, weight, "linear");
  ops::check_floating(input, "linear");
  MINIDL_CHECK(weight.dim() == 2, ValueError, "linear: weight must be (out_features, in_features), found shape ",
               shape_str(weight.sizes()));
  MINIDL_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), ValueError, "linear: input of shape ",
               shape_str(input.sizes()), " has ", input.dim() ? input.size(-1) : 0, " features, weight expects ",
               weight.size(1));
  const std::int64_t in = weight.size(1), out_f = weight.size(0), rows = input.numel() / std::max<std::int64_t>(in, 1);
  Shape out_shape = input.sizes();
  out_shape.back() = out_f;
  Tensor out = ops::gemm(input, weight, 1, rows, out_f, in, false, true, out_shape);
  if (bias.defined()) {
    ops::check_same(out, bias, "linear (bias)");
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == out_f, ValueError, "linear: bias must have shape [", out_f,
                 "], found ", shape_str(bias.sizes()));
    MINIDL_ON_BACKEND(out.device(), binary(kernels::BinaryOp::Add, 1.0, out, bias, out));
  }
  autograd::SavedTensor sx(input, "linear"), sw(weight, "linear");
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad(), need_b = bias.defined() && bias.requires_grad();
  const Shape in_shape = input.sizes(), w_shape = weight.sizes();
  return autograd::record(out, "LinearBackward", {input, weight, bias}, [=](const Tensor& g) {
    const Tensor x = sx.get(), w = sw.get();
    const Tensor g2 = g.reshape({rows, out_f});
    return std::vector<Tensor>{need_x ? ops::gemm(g2, w, 1, rows, in, out_f, false, false, in_shape) : Tensor(),
                               need_w ? ops::gemm(g2, x, 1, out_f, in, rows, true, false, w_shape) : Tensor(),
                               need_b ? sum(g2, {0}) : Tensor()};
  });
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
