#pragma once
// functional::interpolate (LibTorch's torch::nn::functional::interpolate with InterpolateFuncOptions).
#include <cstdint>
#include <optional>
#include <vector>

#include "minidl/arg.h"
#include "minidl/enum.h"
#include "minidl/tensor.h"

namespace minidl {
namespace nn {
namespace functional {

/// Exactly one of size and scale_factor (one value for every spatial dim, or one per dim). kNearest and kLinear
/// take (N, C, L) input, kNearest and kBilinear (N, C, H, W). align_corners (linear modes only, default false)
/// maps the corner pixels' centres onto each other. With scale_factor the output size is floor(size * factor)
/// and the coordinates use 1 / factor, as PyTorch's (recompute_scale_factor(true): they use the sizes' ratio).
struct InterpolateFuncOptions {
  using mode_t = std::variant<enumtype::kNearest, enumtype::kLinear, enumtype::kBilinear>;
  MINIDL_ARG(std::optional<std::vector<std::int64_t>>, size) = std::nullopt;
  MINIDL_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  MINIDL_ARG(mode_t, mode) = kNearest;
  MINIDL_ARG(std::optional<bool>, align_corners) = std::nullopt;
  MINIDL_ARG(std::optional<bool>, recompute_scale_factor) = std::nullopt;
};

Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& options = {});

}  // namespace functional
}  // namespace nn
}  // namespace minidl
