#pragma once
// Gradient clipping, as torch::nn::utils (LibTorch's torch/nn/utils/clip_grad.h, with PyTorch's semantics):
// parameters without a gradient are skipped; the gradients are changed in place.
#include <initializer_list>
#include <vector>

#include "minidl/tensor.h"

namespace minidl {
namespace nn {
namespace utils {

/// Scales the gradients so that their total norm_type norm (the norm of all their elements, as if
/// concatenated; norm_type > 0 or INFINITY) is at most max_norm: every gradient is multiplied by
/// clip_coef = min(max_norm / (total_norm + 1e-6), 1). Returns the total norm before clipping, a 0-d tensor on
/// the gradients' device, float64 if any gradient is float64, else float32 (a float32 0 on the CPU when no
/// parameter has a gradient). On CUDA the norm, the coefficient and the scaling stay on the device: no host
/// synchronisation, so a training step with clipping can be captured in a CUDA graph. error_if_nonfinite
/// reads the norm on the host (a synchronisation) and throws ValueError, leaving the gradients unchanged,
/// when it is NaN or infinite; otherwise a non-finite norm is applied as PyTorch does (NaN gradients).
/// The gradients must be float32 / float64 on one device; max_norm >= 0 (else ValueError).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
Tensor clip_grad_norm_(std::initializer_list<Tensor> parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every gradient element into [-clip_value, clip_value] (clip_value finite and >= 0, else ValueError).
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);
void clip_grad_value_(std::initializer_list<Tensor> parameters, double clip_value);
void clip_grad_value_(const Tensor& parameter, double clip_value);

}  // namespace utils
}  // namespace nn
}  // namespace minidl
