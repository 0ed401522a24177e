// conv2d and conv2d_relu: forward, backward-input and backward-weight kernels (cuDNN or own kernels on the GPU,
// own GEMM on the CPU). conv2d_relu applies the ReLU in the forward kernel's epilogue, so the convolution's
// output is written once instead of written, read and written again by a separate ReLU; its backward masks the
// incoming gradient with the saved output (ReLU's rule) and continues as conv2d's.
#include "autocast/policy.h"
#include "layers/layer_utils.h"
#include "layers/lowp.h"
#include "minidl/nn/functional.h"
#include "ops/op_utils.h"

namespace minidl {
namespace nn {

ExpandingArray2::ExpandingArray2(std::initializer_list<std::int64_t> l) {
  MINIDL_CHECK(l.size() == 1 || l.size() == 2, ValueError, "expected 1 or 2 sizes (height, width), found ", l.size());
  h = *l.begin();
  w = *(l.end() - 1);
}

namespace functional {
namespace {

Tensor conv2d_with(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, ExpandingArray2 stride,
                   ExpandingArray2 padding, ExpandingArray2 dilation, std::int64_t groups, kernels::Activation act) {
  const char* op = act == kernels::Activation::Relu ? "conv2d_relu" : "conv2d";  // names the op in every message
  ops::check_same(input_in, weight_in, op);
  const Tensor input = ops::dense(input_in), weight = ops::dense(weight_in), bias = ops::dense(bias_in);
  ops::check_floating(input, op);
  MINIDL_CHECK(input.dim() == 4, ValueError, op, ": input must be (N, C, H, W), found shape ",
               shape_str(input.sizes()));
  MINIDL_CHECK(weight.dim() == 4, ValueError, op, ": weight must be (out_channels, in_channels/groups, kH, kW), found ",
               shape_str(weight.sizes()));
  MINIDL_CHECK(groups > 0 && input.size(1) % groups == 0, ValueError, op, ": input of shape ", shape_str(input.sizes()),
               " has ", input.size(1), " channels, which groups (", groups, ") must divide");
  MINIDL_CHECK(weight.size(1) * groups == input.size(1), ValueError, op, ": weight of shape ",
               shape_str(weight.sizes()), " expects ", weight.size(1) * groups, " input channels (groups=", groups,
               "), input of shape ", shape_str(input.sizes()), " has ", input.size(1));
  kernels::Conv2dParams p;
  p.N = input.size(0); p.C = input.size(1); p.H = input.size(2); p.W = input.size(3);
  p.K = weight.size(0); p.R = weight.size(2); p.S = weight.size(3);
  p.stride_h = stride.h; p.stride_w = stride.w; p.pad_h = padding.h; p.pad_w = padding.w;
  p.dil_h = dilation.h; p.dil_w = dilation.w; p.groups = groups;
  p.finalize(op);
  if (bias.defined()) {
    ops::check_same(input, bias, detail::str(op, " (bias)").c_str());
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == p.K, ValueError, op, ": bias must have shape [", p.K, "], found ",
                 shape_str(bias.sizes()));
  }
  if (layers::needs_float_path(input, true)) {
    return conv2d_with(layers::widen(input), layers::widen(weight), layers::widen(bias), stride, padding, dilation,
                       groups, act)
        .to(input.dtype());
  }
  const bool relu = act == kernels::Activation::Relu;
  // 16-bit data (cuDNN on the GPU): the bias, and the ReLU after it, in one elementwise pass after the convolution
  // (the kernels' fused epilogue is float/double); the bias gradient from the sum op, which accumulates in float32.
  const bool lowp = input.dtype() == kBFloat16 || input.dtype() == kFloat16;
  const bool bias_apart = lowp && bias.defined();
  Tensor out = ops::empty_as({p.N, p.K, p.P, p.Q}, input);
  MINIDL_LAYER_KERNEL_LOWP(input, conv2d_forward, p, layers::ptr<T>(input), layers::ptr<T>(weight),
                           bias_apart ? nullptr : layers::ptr<T>(bias), layers::ptr<T>(out),
                           bias_apart ? kernels::Activation::None : act);
  if (bias_apart && out.numel() > 0) {
    MINIDL_ON_BACKEND(out.device(), binary(relu ? kernels::BinaryOp::AddRelu : kernels::BinaryOp::Add, 1.0, out,
                                           bias.view({1, p.K, 1, 1}), out));
  }
  autograd::SavedTensor sx(input, op), sw(weight, op);
  autograd::SavedTensor sy = relu ? autograd::SavedTensor(out, op) : autograd::SavedTensor();
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad(),
             need_b = bias.defined() && bias.requires_grad();
  return autograd::record(out, relu ? "ConvReLU2dBackward" : "Conv2dBackward", {input, weight, bias},
                          [=](const Tensor& g_out) {
    // The ReLU's gradient: zero where the output is not positive (the output, not the pre-activation, is kept:
    // one is positive exactly where the other is), in the incoming gradient's buffer when no one else sees it.
    const Tensor g = relu ? ops::binary_grad_reusing(kernels::BinaryOp::ReluGrad, 0.0, g_out, sy.get()) : g_out;
    const Tensor x = sx.get(), w = sw.get();
    Tensor dx, dw, db;
    // The weight gradient first: its scratch (a cuDNN workspace of up to tens of MB) is given back before dx,
    // an input-sized buffer, exists, which lowers the step's peak by the smaller of the two.
    // The bias gradient (a per-channel sum of g) comes with the weight gradient's pass over g where there is one.
    if (need_w) {
      dw = ops::empty_as(w.sizes(), g);
      if (need_b && !lowp) db = ops::empty_as({p.K}, g);
      MINIDL_LAYER_KERNEL_LOWP(g, conv2d_backward_weight, p, layers::ptr<T>(x), layers::ptr<T>(g), layers::ptr<T>(dw),
                          layers::ptr<T>(db));
    }
    if (need_b && !db.defined()) db = sum(g, {0, 2, 3});
    if (need_x) {
      dx = ops::empty_as(x.sizes(), g);
      MINIDL_LAYER_KERNEL_LOWP(g, conv2d_backward_input, p, layers::ptr<T>(g), layers::ptr<T>(w), layers::ptr<T>(dx));
    }
    return std::vector<Tensor>{dx, dw, db};
  });
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, ExpandingArray2 stride,
              ExpandingArray2 padding, ExpandingArray2 dilation, std::int64_t groups) {
  MINIDL_AUTOCAST(conv2d, input, weight, bias, stride, padding, dilation, groups);
  return conv2d_with(input, weight, bias, stride, padding, dilation, groups, kernels::Activation::None);
}

Tensor conv2d_relu(const Tensor& input, const Tensor& weight, const Tensor& bias, ExpandingArray2 stride,
                   ExpandingArray2 padding, ExpandingArray2 dilation, std::int64_t groups) {
  MINIDL_AUTOCAST(conv2d_relu, input, weight, bias, stride, padding, dilation, groups);
  return conv2d_with(input, weight, bias, stride, padding, dilation, groups, kernels::Activation::Relu);
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
