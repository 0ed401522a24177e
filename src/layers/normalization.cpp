// The normalisation functionals. One differentiable op, row_norm, runs the fused row kernels of
// kernels/backend.h (forward: y and the row statistics; backward: dx, dgamma, dbeta from them): layer_norm and
// rms_norm call it on their (rows, normalized numel) view with their elementwise weight and bias; group_norm and
// instance_norm call it without parameters on the (N * groups, C / groups * spatial) view and apply the
// per-channel affine as ops, which autograd differentiates. normalize is composed from norm, clamp_min and div.
#include <cmath>
#include <limits>

#include "autocast/policy.h"
#include "layers/layer_utils.h"
#include "layers/lowp.h"
#include "minidl/math.h"
#include "minidl/nn/functional.h"
#include "minidl/reduction.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

std::string dims_str(const std::vector<std::int64_t>& v) { return shape_str(Shape(v.begin(), v.end())); }

void check_eps(double eps, const char* op) {
  MINIDL_CHECK(std::isfinite(eps) && eps >= 0.0, ValueError, op, ": eps must be finite and >= 0, found ", eps);
}

/// The row kernels take float32 and float64 (kernels::dispatch_floating); bfloat16 and float16 inputs of the ops
/// that take them (`lowp`) go through the float path (layers/lowp.h). Anything else is refused here, by name.
void check_dtype(const Tensor& input, const char* op, bool lowp = false) {
  const DType d = input.dtype();
  const bool ok = d == kFloat32 || d == kFloat64 || (lowp && (d == kBFloat16 || d == kFloat16));
  MINIDL_CHECK(ok, TypeError, op, ": expected an input of dtype ",
               lowp ? "float32, float64, bfloat16 or float16" : "float32 or float64", ", found ", dtype_name(d));
}

/// An optional parameter: undefined, or `expected` shaped and on the input's device with its dtype (or float32
/// beside a 16-bit input).
void check_param(const Tensor& param, const Tensor& input, const Shape& expected, const char* op, const char* name) {
  if (!param.defined()) return;
  layers::check_param_dtype(input, param, op, name);
  MINIDL_CHECK(param.sizes() == expected, ValueError, op, ": ", name, " must have shape ", shape_str(expected),
               ", found ", shape_str(param.sizes()));
}

/// Each row of x (rows, n) normalised, times weight (n) plus bias (n) where defined; differentiable in all three.
Tensor row_norm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, double eps, bool centered,
                const char* op) {
  const Tensor x = ops::dense(x_in), weight = ops::dense(weight_in), bias = ops::dense(bias_in);
  kernels::RowNormParams p;
  p.rows = x.size(0);
  p.n = x.size(1);
  p.eps = eps;
  p.centered = centered;
  Tensor y = ops::empty_as(x.sizes(), x);
  Tensor mean = ops::empty_as({p.rows}, x), rstd = ops::empty_as({p.rows}, x);
  MINIDL_LAYER_KERNEL(x, row_norm_forward, p, layers::ptr<T>(x), layers::ptr<T>(weight), layers::ptr<T>(bias),
                      layers::ptr<T>(y), layers::ptr<T>(mean), layers::ptr<T>(rstd));
  const bool has_w = weight.defined(), has_b = bias.defined();
  const bool need_x = x.requires_grad(), need_w = has_w && weight.requires_grad(),
             need_b = has_b && bias.requires_grad();
  const autograd::SavedTensor sx(x, op);
  const autograd::SavedTensor sw = has_w ? autograd::SavedTensor(weight, op) : autograd::SavedTensor();
  const std::string node = std::string(centered ? "NativeLayerNorm" : "RMSNorm") + "Backward";
  return autograd::record(y, node, {x, weight, bias}, [=](const Tensor& g) {
    const Tensor xs = sx.get(), w = has_w ? sw.get() : Tensor();
    Tensor dx = need_x ? ops::empty_as(xs.sizes(), g) : Tensor();
    Tensor dw = need_w ? ops::empty_as({p.n}, g) : Tensor();
    Tensor db = need_b ? ops::empty_as({p.n}, g) : Tensor();
    MINIDL_LAYER_KERNEL(g, row_norm_backward, p, layers::ptr<T>(xs), layers::ptr<T>(g), layers::ptr<T>(w),
                        layers::ptr<T>(mean), layers::ptr<T>(rstd), layers::ptr<T>(dx), layers::ptr<T>(dw),
                        layers::ptr<T>(db));
    return std::vector<Tensor>{dx, dw, db};
  });
}

/// layer_norm and rms_norm: the checks, the (rows, n) view and back.
Tensor normalize_trailing(const Tensor& input, const std::vector<std::int64_t>& normalized_shape, const Tensor& weight,
                          const Tensor& bias, double eps, bool centered, const char* op) {
  ops::check_defined(input, op, "input");
  check_dtype(input, op, true);
  check_eps(eps, op);
  const std::int64_t k = static_cast<std::int64_t>(normalized_shape.size());
  MINIDL_CHECK(k >= 1, ValueError, op, ": normalized_shape must have at least one dimension, found []");
  bool matches = input.dim() >= k;
  for (std::int64_t i = 0; matches && i < k; ++i) {
    matches = input.size(input.dim() - k + i) == normalized_shape[static_cast<std::size_t>(i)];
  }
  MINIDL_CHECK(matches, ValueError, op, ": given normalized_shape=", dims_str(normalized_shape),
               ", expected input with shape [*, ", dims_str(normalized_shape).substr(1), ", but got input of size ",
               shape_str(input.sizes()));
  const Shape nshape(normalized_shape.begin(), normalized_shape.end());
  check_param(weight, input, nshape, op, "weight");
  check_param(bias, input, nshape, op, "bias");
  if (layers::needs_float_path(input, false)) {
    return normalize_trailing(layers::widen(input), normalized_shape, layers::widen(weight), layers::widen(bias), eps,
                              centered, op)
        .to(input.dtype());
  }
  const std::int64_t n = ops::prod(nshape, 0, nshape.size());
  const std::int64_t rows = n == 0 ? 0 : input.numel() / n;
  const Tensor w = weight.defined() ? weight.reshape({n}) : Tensor();
  const Tensor b = bias.defined() ? bias.reshape({n}) : Tensor();
  return row_norm(input.reshape({rows, n}), w, b, eps, centered, op).reshape(input.sizes());
}

/// Shape (1, C, 1, ...) of a per-channel vector against an input of `dims` dims.
Shape channel_shape(std::int64_t channels, std::int64_t dims) {
  Shape s(static_cast<std::size_t>(dims), 1);
  s[1] = channels;
  return s;
}

/// group_norm and instance_norm: y = rownorm over (N * groups, rest) * weight + bias per channel.
Tensor normalize_groups(const Tensor& input, std::int64_t groups, const Tensor& weight, const Tensor& bias, double eps,
                        const char* op) {
  const std::int64_t N = input.size(0), C = input.size(1);
  const std::int64_t rest = N * groups == 0 ? 0 : input.numel() / (N * groups);
  Tensor y = row_norm(input.reshape({N * groups, rest}), Tensor(), Tensor(), eps, true, op).reshape(input.sizes());
  if (weight.defined()) y = y * weight.reshape(channel_shape(C, input.dim()));
  if (bias.defined()) y = y + bias.reshape(channel_shape(C, input.dim()));
  return y;
}

void check_channels_input(const Tensor& input, const char* op, bool lowp = false) {
  ops::check_defined(input, op, "input");
  check_dtype(input, op, lowp);
  MINIDL_CHECK(input.dim() >= 2, ValueError, op, ": expected an input of shape (N, C, *) with at least 2 dims, found ",
               shape_str(input.sizes()));
}

}  // namespace

Tensor layer_norm(const Tensor& input, const std::vector<std::int64_t>& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  MINIDL_AUTOCAST(layer_norm, input, normalized_shape, weight, bias, eps);
  return normalize_trailing(input, normalized_shape, weight, bias, eps, true, "layer_norm");
}

Tensor rms_norm(const Tensor& input, const std::vector<std::int64_t>& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  MINIDL_AUTOCAST(rms_norm, input, normalized_shape, weight, eps);
  const char* op = "rms_norm";
  ops::check_defined(input, op, "input");
  check_dtype(input, op, true);
  const double e = eps ? *eps
                       : (input.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                    : static_cast<double>(std::numeric_limits<float>::epsilon()));
  return normalize_trailing(input, normalized_shape, weight, Tensor(), e, false, op);
}

Tensor group_norm(const Tensor& input, std::int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  MINIDL_AUTOCAST(group_norm, input, num_groups, weight, bias, eps);
  const char* op = "group_norm";
  check_channels_input(input, op, true);
  check_eps(eps, op);
  const std::int64_t C = input.size(1);
  MINIDL_CHECK(num_groups > 0 && C % num_groups == 0, ValueError, op, ": expected the number of channels (", C,
               ") to be divisible by num_groups, found num_groups=", num_groups, " for input of shape ",
               shape_str(input.sizes()));
  check_param(weight, input, {C}, op, "weight");
  check_param(bias, input, {C}, op, "bias");
  if (layers::needs_float_path(input, false)) {
    return normalize_groups(layers::widen(input), num_groups, layers::widen(weight), layers::widen(bias), eps, op)
        .to(input.dtype());
  }
  return normalize_groups(input, num_groups, weight, bias, eps, op);
}

Tensor instance_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  const char* op = "instance_norm";
  check_channels_input(input, op);
  check_eps(eps, op);
  MINIDL_CHECK(momentum >= 0.0 && momentum <= 1.0, ValueError, op, ": momentum must be in [0, 1], found ", momentum);
  const std::int64_t N = input.size(0), C = input.size(1);
  const std::int64_t spatial = ops::prod(input.sizes(), 2, input.sizes().size());
  check_param(weight, input, {C}, op, "weight");
  check_param(bias, input, {C}, op, "bias");
  check_param(running_mean, input, {C}, op, "running_mean");
  check_param(running_var, input, {C}, op, "running_var");
  MINIDL_CHECK(running_mean.defined() == running_var.defined(), ValueError, op,
               ": pass both running_mean and running_var, or neither");
  if (!use_input_stats) {
    MINIDL_CHECK(running_mean.defined(), ValueError, op, ": use_input_stats=false needs running_mean and running_var");
    // The running statistics normalise: batch_norm's evaluation on the (N, C, spatial) view.
    return batch_norm(input.reshape({N, C, spatial}), running_mean, running_var, weight, bias, false, momentum, eps)
        .reshape(input.sizes());
  }
  MINIDL_CHECK(spatial > 1, ValueError, op,
               ": expected more than 1 spatial element when using the input's "
               "statistics, found input of shape ",
               shape_str(input.sizes()));
  if (running_mean.defined() && N > 0) {
    // PyTorch's update: the batch's mean of the per-instance means and unbiased variances.
    NoGradGuard no_grad;
    const Tensor x = input.detach().reshape({N, C, spatial});
    const Tensor batch_mean = x.mean({2}).mean({0});
    const Tensor batch_var = x.var({2}, true).mean({0});
    Tensor rm = running_mean, rv = running_var;
    rm.mul_(1.0 - momentum).add_(batch_mean, momentum);
    rv.mul_(1.0 - momentum).add_(batch_var, momentum);
  }
  return normalize_groups(input, C, weight, bias, eps, op);
}

Tensor normalize(const Tensor& input, const NormalizeFuncOptions& options) {
  const char* op = "normalize";
  ops::check_defined(input, op, "input");
  ops::check_floating(input, op);
  check_eps(options.eps(), op);
  const std::int64_t dim = ops::wrap_dim(options.dim(), input.dim(), op);
  const Tensor denom = clamp_min(norm(input, Scalar(options.p()), {dim}, true), options.eps());
  return input / denom;
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
