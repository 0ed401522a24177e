// batch_norm: training mode runs the fused kernels (statistics, normalisation, running-stat update, and the
// backward); eval mode is an affine map of the input, composed from elementwise ops. bfloat16 / float16 inputs:
// cuDNN on the GPU with float32 per-channel vectors, the float path (layers/lowp.h) on the CPU.
#include <cmath>

#include "layers/layer_utils.h"
#include "layers/lowp.h"
#include "minidl/nn/functional.h"

namespace minidl {
namespace nn {
namespace functional {

Tensor batch_norm(const Tensor& input_in, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight_in, const Tensor& bias_in, bool training, double momentum, double eps) {
  ops::check_defined(input_in, "batch_norm", "input");
  const Tensor input = ops::dense(input_in);
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
  const char* names[] = {"running_mean", "running_var", "weight", "bias"};
  int which = 0;
  for (const Tensor* t : {&running_mean, &running_var, &weight_in, &bias_in}) {
    layers::check_param_dtype(input, *t, "batch_norm", names[which++]);
    if (!t->defined()) continue;
    MINIDL_CHECK(t->dim() == 1 && t->size(0) == p.C, ValueError, "batch_norm: per-channel tensors must have shape [",
                 p.C, "], found ", shape_str(t->sizes()));
  }
  const bool lowp = input.dtype() == kBFloat16 || input.dtype() == kFloat16;
  const bool records = autograd::grad_mode_enabled() &&
                       (input.requires_grad() || (weight_in.defined() && weight_in.requires_grad()) ||
                        (bias_in.defined() && bias_in.requires_grad()));
  // The float path: 16-bit data on the CPU, and the composed evaluation with gradients below (whose mixed dtypes
  // would promote to float32).
  if (layers::needs_float_path(input, true) || (lowp && !training && records)) {
    Tensor mean32 = layers::widen(running_mean), var32 = layers::widen(running_var);
    Tensor y = batch_norm(layers::widen(input), mean32, var32, layers::widen(weight_in), layers::widen(bias_in),
                          training, momentum, eps)
                   .to(input.dtype());
    if (training && running_mean.defined() && mean32.dtype() != running_mean.dtype()) {
      NoGradGuard no_grad;  // 16-bit running statistics: the float update, rounded
      Tensor rm = running_mean, rv = running_var;
      rm.copy_(mean32);
      rv.copy_(var32);
    }
    return y;
  }
  // The per-channel vectors in the kernels' arithmetic type P (kernels::opmath_t): float32 beside 16-bit data
  // (16-bit ones widened, differentiably; 16-bit running statistics updated in float32 copies, then rounded back).
  const Tensor weight = layers::widen(ops::dense(weight_in)), bias = layers::widen(ops::dense(bias_in));
  Tensor stat_mean = layers::widen(running_mean), stat_var = layers::widen(running_var);
  const TensorOptions stat_options = TensorOptions(lowp ? kFloat32 : input.dtype()).device(input.device());
  if (!training) {
    MINIDL_CHECK(running_mean.defined() && running_var.defined(), ValueError,
                 "batch_norm: eval mode needs running_mean and running_var");
    if (!records) {
      // Inference: one fused pass (the composed form below is several times slower on the CPU).
      Tensor out = ops::empty_as(input.sizes(), input);
      MINIDL_LAYER_KERNEL_LOWP(input, batch_norm_forward_eval, p, layers::ptr<T>(input),
                               layers::ptr<kernels::opmath_t<T>>(weight), layers::ptr<kernels::opmath_t<T>>(bias),
                               layers::ptr<kernels::opmath_t<T>>(stat_mean),
                               layers::ptr<kernels::opmath_t<T>>(stat_var), layers::ptr<T>(out));
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
  Tensor save_mean = empty({p.C}, stat_options), save_invstd = empty({p.C}, stat_options);
  {
    NoGradGuard no_grad;  // the running statistics are updated in place
    MINIDL_LAYER_KERNEL_LOWP(input, batch_norm_forward_train, p, layers::ptr<T>(input),
                             layers::ptr<kernels::opmath_t<T>>(weight), layers::ptr<kernels::opmath_t<T>>(bias),
                             layers::ptr<T>(y), layers::ptr<kernels::opmath_t<T>>(save_mean),
                             layers::ptr<kernels::opmath_t<T>>(save_invstd),
                             layers::ptr<kernels::opmath_t<T>>(stat_mean), layers::ptr<kernels::opmath_t<T>>(stat_var));
    if (running_mean.defined() && stat_mean.dtype() != running_mean.dtype()) {
      Tensor rm = running_mean, rv = running_var;
      rm.copy_(stat_mean);
      rv.copy_(stat_var);
    }
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
    Tensor dw = has_w ? empty({p.C}, stat_options) : Tensor();
    Tensor db = has_b ? empty({p.C}, stat_options) : Tensor();
    MINIDL_LAYER_KERNEL_LOWP(g, batch_norm_backward, p, layers::ptr<T>(x), layers::ptr<T>(g),
                             layers::ptr<kernels::opmath_t<T>>(w), layers::ptr<kernels::opmath_t<T>>(save_mean),
                             layers::ptr<kernels::opmath_t<T>>(save_invstd), layers::ptr<T>(dx),
                             layers::ptr<kernels::opmath_t<T>>(dw), layers::ptr<kernels::opmath_t<T>>(db));
    return std::vector<Tensor>{need_x ? dx : Tensor(), need_w ? dw : Tensor(), need_b ? db : Tensor()};
  });
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
