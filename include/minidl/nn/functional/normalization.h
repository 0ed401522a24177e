#pragma once
// Normalisation functionals (LibTorch's torch::nn::functional::layer_norm, rms_norm, group_norm, instance_norm,
// normalize), each with the positional form of PyTorch's Python signature and LibTorch's options form.
// LayerNorm and RMSNorm are one fused kernel each way (src/layers/normalization.cpp); GroupNorm and InstanceNorm
// run the same row kernel on their (N * groups, ...) view and apply the per-channel affine after it.
#include <cstdint>
#include <optional>
#include <vector>

#include "minidl/nn/options/normalization.h"
#include "minidl/tensor.h"

namespace minidl {
namespace nn {
namespace functional {

/// Normalises over the trailing dims `normalized_shape` (input (*, normalized_shape)); weight and bias have
/// shape normalized_shape or are undefined.
Tensor layer_norm(const Tensor& input, const std::vector<std::int64_t>& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
inline Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& options) {
  return layer_norm(input, options.normalized_shape(), options.weight(), options.bias(), options.eps());
}

/// x / sqrt(mean(x^2 over normalized_shape) + eps) * weight; no eps: the dtype's machine epsilon.
Tensor rms_norm(const Tensor& input, const std::vector<std::int64_t>& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
inline Tensor rms_norm(const Tensor& input, const RMSNormFuncOptions& options) {
  return rms_norm(input, options.normalized_shape(), options.weight(), options.eps());
}

/// input (N, C, *): statistics per sample over each of num_groups groups of C / num_groups channels; weight and
/// bias (C) or undefined.
Tensor group_norm(const Tensor& input, std::int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
inline Tensor group_norm(const Tensor& input, const GroupNormFuncOptions& options) {
  return group_norm(input, options.num_groups(), options.weight(), options.bias(), options.eps());
}

/// input (N, C, *): statistics per sample and channel. With use_input_stats and running statistics given, they
/// move by `momentum` towards the batch's mean of the instance means and unbiased variances (in place); without
/// use_input_stats the running statistics normalise.
Tensor instance_norm(const Tensor& input, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
inline Tensor instance_norm(const Tensor& input, const InstanceNormFuncOptions& options) {
  return instance_norm(input, options.running_mean(), options.running_var(), options.weight(), options.bias(),
                       options.use_input_stats(), options.momentum(), options.eps());
}

/// input / max(||input||_p along dim, eps).
Tensor normalize(const Tensor& input, const NormalizeFuncOptions& options = {});

}  // namespace functional
}  // namespace nn
}  // namespace minidl
