// batch_norm: training mode runs the fused kernels (statistics, normalisation, running-stat update, and the
// backward); eval mode is an affine map of the input, composed from elementwise ops.
#include <cmath>

#include "layers/layer_utils.h"
#include "minidl/nn/functional.h"

namespace minidl {
namespace nn {
namespace functional {

Tensor batch_norm(const Tensor& input_in, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight_in, const Tensor& bias_in, bool training, double momentum, double eps) {
  ops::check_defined(input_in, "batch_norm", "input");
  const Tensor input = ops::dense(input_in), weight = ops::dense(weight_in), bias = ops::dense(bias_in);
  ops::check_floating(input, "batch_norm");
  MINIDL_CHECK(input.dim() >= 2 && input.dim() <= 4, ValueError, "batch_norm: input must be (N, C), (N, C, L) or "
               "(N, C, H, W), found shape ", shape_str(input.sizes()));
  MINIDL_CHECK(std::isfinite(eps) && eps >= 0.0, ValueError, "batch_norm: eps must be finite and >= 0, found ", eps);
  MINIDL_CHECK(momentum >= 0.0 && momentum <= 1.0, ValueError, "batch_norm: momentum must be in [0, 1], found ",
               momentum);
  kernels::BatchNormParams p;
  p.N = input.size(0);
  p.C = input.size(1);
  p.HW = input.numel() / std::max<std::int64_t>(p.N * p.C, 1);
  p.eps = eps;
  p.momentum = momentum;
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias}) {
    if (!t->defined()) continue;
    ops::check_same(input, *t, "batch_norm");
    MINIDL_CHECK(t->dim() == 1 && t->size(0) == p.C, ValueError, "batch_norm: per-channel tensors must have shape [",
                 p.C, "], found ", shape_str(t->sizes()));
  }
  if (!training) {
    MINIDL_CHECK(running_mean.defined() && running_var.defined(), ValueError,
                 "batch_norm: eval mode needs running_mean and running_var");
    const bool records = autograd::grad_mode_enabled() &&
                         (input.requires_grad() || (weight.defined() && weight.requires_grad()) ||
                          (bias.defined() && bias.requires_grad()));
    if (!records) {
      // Inference: one fused pass (the composed form below is several times slower on the CPU).
      Tensor out = ops::empty_as(input.sizes(), input);
      MINIDL_LAYER_KERNEL(input, batch_norm_forward_eval, p, layers::ptr<T>(input), layers::ptr<T>(weight),
                          layers::ptr<T>(bias), layers::ptr<T>(running_mean), layers::ptr<T>(running_var),
                          layers::ptr<T>(out));
      return out;
    }
    // With gradients (e.g. fine-tuning with frozen statistics): an affine map composed from differentiable ops.
    Shape cshape(static_cast<std::size_t>(input.dim()), 1);
    cshape[1] = p.C;
    Tensor y = (input - running_mean.reshape(cshape)) / sqrt(running_var.reshape(cshape) + eps);
    if (weight.defined()) y = y * weight.reshape(cshape);
    if (bias.defined()) y = y + bias.reshape(cshape);
    return y;
  }
  MINIDL_CHECK(p.N * p.HW > 1, ValueError, "batch_norm: training needs more than one value per channel, input shape ",
               shape_str(input.sizes()));
  MINIDL_CHECK(running_mean.defined() == running_var.defined(), ValueError,
               "batch_norm: pass both running_mean and running_var, or neither");
  Tensor y = ops::empty_as(input.sizes(), input);
  Tensor save_mean = ops::empty_as({p.C}, input), save_invstd = ops::empty_as({p.C}, input);
  {
    NoGradGuard no_grad;  // the running statistics are updated in place
    MINIDL_LAYER_KERNEL(input, batch_norm_forward_train, p, layers::ptr<T>(input), layers::ptr<T>(weight),
                        layers::ptr<T>(bias), layers::ptr<T>(y), layers::ptr<T>(save_mean),
                        layers::ptr<T>(save_invstd), layers::ptr<T>(running_mean), layers::ptr<T>(running_var));
  }
  if (running_mean.defined()) {
    running_mean.unsafe_impl()->storage->version.fetch_add(1);
    running_var.unsafe_impl()->storage->version.fetch_add(1);
  }
  const bool has_w = weight.defined(), has_b = bias.defined();  // affine = false: no weight to save
  const autograd::SavedTensor sx(input, "batch_norm");
  const autograd::SavedTensor sw = has_w ? autograd::SavedTensor(weight, "batch_norm") : autograd::SavedTensor();
  const bool need_w = has_w && weight.requires_grad(), need_b = has_b && bias.requires_grad();
  const bool need_x = input.requires_grad();
  return autograd::record(y, "BatchNormBackward", {input, weight, bias}, [=](const Tensor& g) {
    const Tensor x = sx.get(), w = has_w ? sw.get() : Tensor();
    Tensor dx = ops::empty_as(x.sizes(), g);
    Tensor dw = has_w ? ops::empty_as({p.C}, g) : Tensor();
    Tensor db = has_b ? ops::empty_as({p.C}, g) : Tensor();
    MINIDL_LAYER_KERNEL(g, batch_norm_backward, p, layers::ptr<T>(x), layers::ptr<T>(g), layers::ptr<T>(w),
                        layers::ptr<T>(save_mean), layers::ptr<T>(save_invstd), layers::ptr<T>(dx), layers::ptr<T>(dw),
                        layers::ptr<T>(db));
    return std::vector<Tensor>{need_x ? dx : Tensor(), need_w ? dw : Tensor(), need_b ? db : Tensor()};
  });
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
