// Gradient clipping: argument checks, the gathering of the gradients, and the dispatch of the norm and the
// scaling to the gradients' backend (the formulas: kernels/clip_grad.h).
#include "minidl/nn/utils/clip_grad.h"

#include <cmath>

#include "kernels/backend.h"
#include "minidl/autograd.h"
#include "minidl/errors.h"
#include "minidl/factories.h"

namespace minidl {
namespace nn {
namespace utils {
namespace {

/// The defined gradients of `parameters`, checked: floating, all on one device.
std::vector<Tensor> gradients_of(const std::vector<Tensor>& parameters, const char* op) {
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& p = parameters[i];
    MINIDL_CHECK(p.defined(), ValueError, op, ": parameter ", i, " is an undefined tensor");
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    MINIDL_CHECK(is_floating_point(g.dtype()), TypeError, op, ": the gradient of parameter ", i,
                 " must be floating, found ", g.dtype());
    const Device first = grads.empty() ? g.device() : grads[0].device();
    MINIDL_CHECK(g.device() == first, ValueError, op, ": all gradients must be on one device; the first is on ", first,
                 ", the gradient of parameter ", i, " on ", g.device());
    grads.push_back(g);
  }
  return grads;
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  MINIDL_CHECK(max_norm >= 0.0, ValueError, "clip_grad_norm_: max_norm must be >= 0, found ", max_norm);
  MINIDL_CHECK(norm_type > 0.0, ValueError, "clip_grad_norm_: norm_type must be > 0 or inf, found ", norm_type);
  std::vector<Tensor> grads = gradients_of(parameters, "clip_grad_norm_");
  if (grads.empty()) return zeros({}, TensorOptions(kFloat32));
  NoGradGuard no_grad;
  const Device device = grads[0].device();
  DType dtype = kFloat32;
  std::vector<Tensor> dense;  // contiguous gradients: the kernels' operands
  for (const Tensor& g : grads) {
    if (g.dtype() == kFloat64) dtype = kFloat64;
    dense.push_back(g.is_contiguous() ? g : g.contiguous());
  }
  Tensor total = empty({}, TensorOptions(dtype).device(device));
  MINIDL_ON_BACKEND(device, grad_norm(dense, kernels::GradNorm::of(norm_type), total));
  if (error_if_nonfinite) {
    const double value = total.cpu().to(kFloat64).item<double>();
    MINIDL_CHECK(std::isfinite(value), ValueError, "clip_grad_norm_: the total norm of order ", norm_type,
                 " of the gradients is ", value, ", so it cannot be clipped; with error_if_nonfinite=false the "
                 "non-finite norm is applied instead");
  }
  MINIDL_ON_BACKEND(device, clip_grads_by_norm(dense, total, max_norm));
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].is_contiguous()) grads[i].copy_(dense[i]);
  }
  return total;
}

Tensor clip_grad_norm_(std::initializer_list<Tensor> parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>(parameters), max_norm, norm_type, error_if_nonfinite);
}

Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type, bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  MINIDL_CHECK(std::isfinite(clip_value) && clip_value >= 0.0, ValueError,
               "clip_grad_value_: clip_value must be finite and >= 0, found ", clip_value);
  NoGradGuard no_grad;
  for (Tensor g : gradients_of(parameters, "clip_grad_value_")) g.clamp_(-clip_value, clip_value);
}

void clip_grad_value_(std::initializer_list<Tensor> parameters, double clip_value) {
  clip_grad_value_(std::vector<Tensor>(parameters), clip_value);
}

void clip_grad_value_(const Tensor& parameter, double clip_value) {
  clip_grad_value_(std::vector<Tensor>{parameter}, clip_value);
}

}  // namespace utils
}  // namespace nn
}  // namespace minidl
