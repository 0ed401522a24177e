#pragma once
// Options of the normalisation layers and their functionals, as LibTorch's torch/nn/options/normalization.h and
// instancenorm.h: chained setters, PyTorch's defaults.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "minidl/arg.h"
#include "minidl/tensor.h"

namespace minidl {
namespace nn {

/// nn::LayerNorm: normalises over the trailing dims `normalized_shape`; `bias(false)` keeps the weight only.
struct LayerNormOptions {
  LayerNormOptions(std::vector<std::int64_t> normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  MINIDL_ARG(std::vector<std::int64_t>, normalized_shape);
  MINIDL_ARG(double, eps) = 1e-5;
  MINIDL_ARG(bool, elementwise_affine) = true;
  MINIDL_ARG(bool, bias) = true;
};

/// nn::RMSNorm: no eps (std::nullopt) means the input dtype's machine epsilon, as torch.finfo(dtype).eps.
struct RMSNormOptions {
  RMSNormOptions(std::vector<std::int64_t> normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  MINIDL_ARG(std::vector<std::int64_t>, normalized_shape);
  MINIDL_ARG(std::optional<double>, eps) = std::nullopt;
  MINIDL_ARG(bool, elementwise_affine) = true;
};

/// nn::GroupNorm: num_channels must be divisible by num_groups.
struct GroupNormOptions {
  GroupNormOptions(std::int64_t num_groups, std::int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  MINIDL_ARG(std::int64_t, num_groups);
  MINIDL_ARG(std::int64_t, num_channels);
  MINIDL_ARG(double, eps) = 1e-5;
  MINIDL_ARG(bool, affine) = true;
};

/// nn::InstanceNorm1d / 2d (PyTorch's defaults: no affine, no running statistics).
struct InstanceNormOptions {
  InstanceNormOptions(std::int64_t num_features) : num_features_(num_features) {}
  MINIDL_ARG(std::int64_t, num_features);
  MINIDL_ARG(double, eps) = 1e-5;
  MINIDL_ARG(double, momentum) = 0.1;
  MINIDL_ARG(bool, affine) = false;
  MINIDL_ARG(bool, track_running_stats) = false;
};
using InstanceNorm1dOptions = InstanceNormOptions;
using InstanceNorm2dOptions = InstanceNormOptions;

namespace functional {

struct LayerNormFuncOptions {
  LayerNormFuncOptions(std::vector<std::int64_t> normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  MINIDL_ARG(std::vector<std::int64_t>, normalized_shape);
  MINIDL_ARG(Tensor, weight) = {};
  MINIDL_ARG(Tensor, bias) = {};
  MINIDL_ARG(double, eps) = 1e-5;
};

struct RMSNormFuncOptions {
  RMSNormFuncOptions(std::vector<std::int64_t> normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  MINIDL_ARG(std::vector<std::int64_t>, normalized_shape);
  MINIDL_ARG(Tensor, weight) = {};
  MINIDL_ARG(std::optional<double>, eps) = std::nullopt;
};

struct GroupNormFuncOptions {
  GroupNormFuncOptions(std::int64_t num_groups) : num_groups_(num_groups) {}
  MINIDL_ARG(std::int64_t, num_groups);
  MINIDL_ARG(Tensor, weight) = {};
  MINIDL_ARG(Tensor, bias) = {};
  MINIDL_ARG(double, eps) = 1e-5;
};

struct InstanceNormFuncOptions {
  MINIDL_ARG(Tensor, running_mean) = {};
  MINIDL_ARG(Tensor, running_var) = {};
  MINIDL_ARG(Tensor, weight) = {};
  MINIDL_ARG(Tensor, bias) = {};
  MINIDL_ARG(bool, use_input_stats) = true;
  MINIDL_ARG(double, momentum) = 0.1;
  MINIDL_ARG(double, eps) = 1e-5;
};

/// F::normalize: input / max(||input||_p along dim, eps).
struct NormalizeFuncOptions {
  MINIDL_ARG(double, p) = 2.0;
  MINIDL_ARG(std::int64_t, dim) = 1;
  MINIDL_ARG(double, eps) = 1e-12;
};

}  // namespace functional
}  // namespace nn
}  // namespace minidl
