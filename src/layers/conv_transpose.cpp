// Transposed convolutions on conv2d's kernels, and the 1-d convolutions as 2-d ones of height 1 (views only).
//
// A transposed convolution is the adjoint of a convolution: with conv2d's parameters read the other way round
// (conv2d's input is this op's output, conv2d's output this op's input, and the weight (C_in, C_out/groups, kH,
// kW) is conv2d's (K, C/groups, R, S) as it is), its forward is conv2d's input-gradient pass, its input gradient
// conv2d's forward, and its weight gradient conv2d's weight gradient with the two activations swapped. So every
// backend kernel, conv2d's algorithm search on the GPU included, serves it unchanged.
#include "autocast/policy.h"
#include "layers/layer_utils.h"
#include "layers/lowp.h"
#include "minidl/autograd.h"
#include "minidl/nn/functional.h"
#include "ops/op_utils.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

void check_window(const char* op, const char* what, ExpandingArray2 v, std::int64_t min) {
  MINIDL_CHECK(v.h >= min && v.w >= min, ValueError, op, ": ", what, " must be ", min == 0 ? ">= 0" : "positive",
               ", found (", v.h, ", ", v.w, ")");
}

/// H_out of one spatial dim.
std::int64_t transposed_size(std::int64_t in, std::int64_t stride, std::int64_t pad, std::int64_t dil,
                             std::int64_t kernel, std::int64_t out_pad) {
  return (in - 1) * stride - 2 * pad + dil * (kernel - 1) + out_pad + 1;
}

}  // namespace

Tensor conv_transpose2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, ExpandingArray2 stride,
                        ExpandingArray2 padding, ExpandingArray2 output_padding, std::int64_t groups,
                        ExpandingArray2 dilation) {
  MINIDL_AUTOCAST(conv_transpose2d, input_in, weight_in, bias_in, stride, padding, output_padding, groups, dilation);
  const char* op = "conv_transpose2d";
  ops::check_defined(input_in, op, "input");
  ops::check_defined(weight_in, op, "weight");
  ops::check_same(input_in, weight_in, op);
  ops::check_floating(input_in, op);
  MINIDL_CHECK(input_in.dim() == 4, ValueError, op, ": input must be (N, C_in, H, W), found shape ",
               shape_str(input_in.sizes()));
  MINIDL_CHECK(weight_in.dim() == 4, ValueError, op,
               ": weight must be (in_channels, out_channels/groups, kH, kW), found shape ",
               shape_str(weight_in.sizes()));
  check_window(op, "stride", stride, 1);
  check_window(op, "dilation", dilation, 1);
  check_window(op, "padding", padding, 0);
  check_window(op, "output_padding", output_padding, 0);
  MINIDL_CHECK(groups > 0, ValueError, op, ": groups must be positive, found ", groups);
  MINIDL_CHECK(weight_in.size(0) == input_in.size(1), ValueError, op, ": weight of shape ",
               shape_str(weight_in.sizes()), " expects ", weight_in.size(0), " input channels, input of shape ",
               shape_str(input_in.sizes()), " has ", input_in.size(1));
  MINIDL_CHECK(input_in.size(1) % groups == 0, ValueError, op, ": input channels (", input_in.size(1),
               ") must be divisible by groups (", groups, ")");
  MINIDL_CHECK((output_padding.h < stride.h || output_padding.h < dilation.h) &&
                   (output_padding.w < stride.w || output_padding.w < dilation.w),
               ValueError, op, ": output_padding (", output_padding.h, ", ", output_padding.w,
               ") must be smaller than either stride (", stride.h, ", ", stride.w, ") or dilation (", dilation.h, ", ",
               dilation.w, ")");
  MINIDL_CHECK(input_in.size(2) > 0 && input_in.size(3) > 0, ValueError, op,
               ": input must have a positive height and width, found shape ", shape_str(input_in.sizes()));
  const std::int64_t R = weight_in.size(2), S = weight_in.size(3);
  const std::int64_t Hout = transposed_size(input_in.size(2), stride.h, padding.h, dilation.h, R, output_padding.h);
  const std::int64_t Wout = transposed_size(input_in.size(3), stride.w, padding.w, dilation.w, S, output_padding.w);
  MINIDL_CHECK(R > 0 && S > 0 && Hout > 0 && Wout > 0, ValueError, op, ": input of shape ", shape_str(input_in.sizes()),
               " with weight of shape ", shape_str(weight_in.sizes()), ", padding (", padding.h, ", ", padding.w,
               ") and stride (", stride.h, ", ", stride.w, ") gives an empty output (", Hout, "x", Wout, ")");
  // An output_padding of at least the stride (allowed below the dilation) adds output rows that conv2d's shape
  // rule sees as output_padding / stride more input rows: those rows, zero, are added to the input, and the rest
  // of the output_padding is below the stride.
  if (output_padding.h >= stride.h || output_padding.w >= stride.w) {
    const std::int64_t eh = output_padding.h / stride.h, ew = output_padding.w / stride.w;
    return conv_transpose2d(pad(input_in, PadFuncOptions({0, ew, 0, eh})), weight_in, bias_in, stride, padding,
                            {output_padding.h % stride.h, output_padding.w % stride.w}, groups, dilation);
  }
  if (layers::needs_float_path(input_in, true)) {
    return conv_transpose2d(layers::widen(input_in), layers::widen(weight_in), layers::widen(bias_in), stride, padding,
                            output_padding, groups, dilation)
        .to(input_in.dtype());
  }
  const Tensor input = ops::dense(input_in), weight = ops::dense(weight_in), bias = ops::dense(bias_in);
  const std::int64_t N = input.size(0), Cout = weight.size(1) * groups;
  if (bias.defined()) {
    ops::check_same(input, bias, "conv_transpose2d (bias)");
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == Cout, ValueError, op, ": bias must have shape [", Cout, "], found ",
                 shape_str(bias.sizes()));
  }
  // conv2d's parameters, for which this op's output is the input; finalize() validates them on a batch of one
  // where the batch is empty.
  kernels::Conv2dParams p;
  p.N = std::max<std::int64_t>(N, 1);
  p.C = Cout;
  p.H = Hout;
  p.W = Wout;
  p.K = input.size(1);
  p.R = R;
  p.S = S;
  p.stride_h = stride.h;
  p.stride_w = stride.w;
  p.pad_h = padding.h;
  p.pad_w = padding.w;
  p.dil_h = dilation.h;
  p.dil_w = dilation.w;
  p.groups = groups;
  p.finalize(op);
  MINIDL_CHECK(p.P == input.size(2) && p.Q == input.size(3), ValueError, op, ": internal error, conv2d's output ", p.P,
               "x", p.Q, " is not the input's ", input.size(2), "x", input.size(3));
  p.N = N;
  Tensor out = ops::empty_as({N, Cout, Hout, Wout}, input);
  if (N > 0) {
    MINIDL_LAYER_KERNEL_LOWP(input, conv2d_backward_input, p, layers::ptr<T>(input), layers::ptr<T>(weight),
                        layers::ptr<T>(out));
    if (bias.defined()) {
      NoGradGuard no_grad;
      out.add_(bias.view({1, Cout, 1, 1}));
    }
  }
  autograd::SavedTensor sx(input, op), sw(weight, op);
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad(),
             need_b = bias.defined() && bias.requires_grad();
  return autograd::record(out, "ConvTranspose2dBackward", {input, weight, bias}, [=](const Tensor& g) {
    const Tensor x = sx.get(), w = sw.get();
    Tensor dx, dw, db;
    if (p.N == 0) {
      if (need_x) dx = ops::empty_as(x.sizes(), g);
      if (need_w) dw = zeros(w.sizes(), TensorOptions(g.dtype()).device(g.device()));
      if (need_b) db = zeros({Cout}, TensorOptions(g.dtype()).device(g.device()));
      return std::vector<Tensor>{dx, dw, db};
    }
    // The weight gradient first, as conv2d's backward: its scratch is given back before dx exists.
    if (need_w) {
      dw = ops::empty_as(w.sizes(), g);
      MINIDL_LAYER_KERNEL_LOWP(g, conv2d_backward_weight, p, layers::ptr<T>(g), layers::ptr<T>(x), layers::ptr<T>(dw),
                          static_cast<T*>(nullptr));
    }
    if (need_b) db = sum(g, {0, 2, 3});
    if (need_x) {
      dx = ops::empty_as(x.sizes(), g);
      MINIDL_LAYER_KERNEL_LOWP(g, conv2d_forward, p, layers::ptr<T>(g), layers::ptr<T>(w),
                               static_cast<const T*>(nullptr), layers::ptr<T>(dx), kernels::Activation::None);
    }
    return std::vector<Tensor>{dx, dw, db};
  });
}

namespace {
/// input (N, C, L) and weight (A, B, k) of a 1-d op, checked and viewed as height-1 images.
void check_1d(const char* op, const Tensor& input, const Tensor& weight, const char* weight_layout) {
  ops::check_defined(input, op, "input");
  ops::check_defined(weight, op, "weight");
  MINIDL_CHECK(input.dim() == 3, ValueError, op, ": input must be (N, C, L), found shape ", shape_str(input.sizes()));
  MINIDL_CHECK(weight.dim() == 3, ValueError, op, ": weight must be ", weight_layout, ", found shape ",
               shape_str(weight.sizes()));
}
}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::int64_t stride, std::int64_t padding,
              std::int64_t dilation, std::int64_t groups) {
  MINIDL_AUTOCAST(conv1d, input, weight, bias, stride, padding, dilation, groups);
  const char* op = "conv1d";
  check_1d(op, input, weight, "(out_channels, in_channels/groups, k)");
  // conv2d checks the rest, but its messages would name conv2d and a height: the ones a user can meet are here.
  MINIDL_CHECK(groups > 0 && input.size(1) % groups == 0 && weight.size(1) * groups == input.size(1), ValueError, op,
               ": weight of shape ", shape_str(weight.sizes()), " and groups=", groups, " expect ",
               weight.size(1) * groups, " input channels, input of shape ", shape_str(input.sizes()), " has ",
               input.size(1));
  MINIDL_CHECK(stride > 0 && dilation > 0 && padding >= 0, ValueError, op,
               ": stride and dilation must be positive and padding >= 0, found stride=", stride, ", padding=", padding,
               ", dilation=", dilation);
  MINIDL_CHECK(input.size(2) + 2 * padding >= dilation * (weight.size(2) - 1) + 1, ValueError, op, ": kernel size ",
               weight.size(2), " (dilation ", dilation, ") is larger than the padded input length ",
               input.size(2) + 2 * padding);
  return conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, {1, stride}, {0, padding}, {1, dilation}, groups)
      .squeeze(2);
}

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::int64_t stride,
                        std::int64_t padding, std::int64_t output_padding, std::int64_t groups, std::int64_t dilation) {
  MINIDL_AUTOCAST(conv_transpose1d, input, weight, bias, stride, padding, output_padding, groups, dilation);
  check_1d("conv_transpose1d", input, weight, "(in_channels, out_channels/groups, k)");
  return conv_transpose2d(input.unsqueeze(2), weight.unsqueeze(2), bias, {1, stride}, {0, padding}, {0, output_padding},
                          groups, {1, dilation})
      .squeeze(2);
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
