// Pooling: max (with argmax indices for backward), average, adaptive average.
#include "layers/layer_utils.h"
#include "layers/lowp.h"
#include "minidl/nn/functional.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

kernels::Pool2dParams pool_params(const Tensor& input, ExpandingArray2 k, ExpandingArray2 s, ExpandingArray2 pad,
                                  const char* op) {
  ops::check_defined(input, op, "input");
  ops::check_floating(input, op);
  MINIDL_CHECK(input.dim() == 4, ValueError, op, ": input must be (N, C, H, W), found shape ",
               shape_str(input.sizes()));
  kernels::Pool2dParams p;
  p.N = input.size(0); p.C = input.size(1); p.H = input.size(2); p.W = input.size(3);
  p.kh = k.h; p.kw = k.w;
  p.sh = s.h == 0 ? k.h : s.h;
  p.sw = s.w == 0 ? k.w : s.w;
  p.ph = pad.h; p.pw = pad.w;
  p.finalize(op);
  return p;
}

}  // namespace

Tensor max_pool2d(const Tensor& input_in, ExpandingArray2 kernel_size, ExpandingArray2 stride,
                  ExpandingArray2 padding) {
  const kernels::Pool2dParams p = pool_params(input_in, kernel_size, stride, padding, "max_pool2d");
  if (layers::needs_float_path(input_in, true)) {
    return max_pool2d(layers::widen(input_in), kernel_size, stride, padding).to(input_in.dtype());
  }
  const Tensor input = ops::dense(input_in);
  Tensor out = ops::empty_as({p.N, p.C, p.P, p.Q}, input);
  Tensor indices = empty({p.N, p.C, p.P, p.Q}, TensorOptions(kInt64).device(input.device()));
  MINIDL_LAYER_KERNEL_LOWP(input, max_pool2d_forward, p, layers::ptr<T>(input), layers::ptr<T>(out),
                      indices.data_ptr<std::int64_t>());
  const Shape in_shape = input.sizes();
  return autograd::record(out, "MaxPool2dBackward", {input}, [=](const Tensor& g) {
    Tensor dx = ops::empty_as(in_shape, g);
    MINIDL_LAYER_KERNEL_LOWP(g, max_pool2d_backward, p, layers::ptr<T>(g), indices.data_ptr<std::int64_t>(),
                        layers::ptr<T>(dx));
    return std::vector<Tensor>{dx};
  });
}

Tensor avg_pool2d(const Tensor& input_in, ExpandingArray2 kernel_size, ExpandingArray2 stride,
                  ExpandingArray2 padding) {
  const kernels::Pool2dParams p = pool_params(input_in, kernel_size, stride, padding, "avg_pool2d");
  if (layers::needs_float_path(input_in, true)) {
    return avg_pool2d(layers::widen(input_in), kernel_size, stride, padding).to(input_in.dtype());
  }
  const Tensor input = ops::dense(input_in);
  Tensor out = ops::empty_as({p.N, p.C, p.P, p.Q}, input);
  MINIDL_LAYER_KERNEL_LOWP(input, avg_pool2d_forward, p, layers::ptr<T>(input), layers::ptr<T>(out));
  const Shape in_shape = input.sizes();
  return autograd::record(out, "AvgPool2dBackward", {input}, [=](const Tensor& g) {
    Tensor dx = ops::empty_as(in_shape, g);
    MINIDL_LAYER_KERNEL_LOWP(g, avg_pool2d_backward, p, layers::ptr<T>(g), layers::ptr<T>(dx));
    return std::vector<Tensor>{dx};
  });
}

Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray2 output_size) {
  ops::check_defined(input, "adaptive_avg_pool2d", "input");
  ops::check_floating(input, "adaptive_avg_pool2d");
  MINIDL_CHECK(input.dim() == 4, ValueError, "adaptive_avg_pool2d: input must be (N, C, H, W), found shape ",
               shape_str(input.sizes()));
  const std::int64_t H = input.size(2), W = input.size(3);
  MINIDL_CHECK(output_size.h > 0 && output_size.w > 0 && H % output_size.h == 0 && W % output_size.w == 0, ValueError,
               "adaptive_avg_pool2d: output size ", output_size.h, "x", output_size.w,
               " must divide the input size ", H, "x", W, " (non-dividing sizes are not supported)");
  if (output_size.h == 1 && output_size.w == 1) return mean(input, {2, 3}, true);
  return avg_pool2d(input, {H / output_size.h, W / output_size.w});
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
