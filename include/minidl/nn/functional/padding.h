#pragma once
// functional::pad (LibTorch's torch::nn::functional::pad with PadFuncOptions).
#include <cstdint>
#include <vector>

#include "minidl/arg.h"
#include "minidl/enum.h"
#include "minidl/tensor.h"

namespace minidl {
namespace nn {
namespace functional {

/// `pad` holds (left, right) pairs from the last dim backwards: {l, r} pads the last dim, {l, r, t, b} the last
/// two, and so on. kConstant fills with `value` (negative sizes crop); kReflect mirrors without repeating the edge
/// (each size below the dim's length), kReplicate repeats the edge, kCircular wraps around (each size at most the
/// dim's length); those three take sizes >= 0.
struct PadFuncOptions {
  using mode_t = std::variant<enumtype::kConstant, enumtype::kReflect, enumtype::kReplicate, enumtype::kCircular>;
  PadFuncOptions(std::vector<std::int64_t> pad) : pad_(std::move(pad)) {}  // implicit, as LibTorch's
  MINIDL_ARG(std::vector<std::int64_t>, pad);
  MINIDL_ARG(mode_t, mode) = kConstant;
  MINIDL_ARG(double, value) = 0;
};

Tensor pad(const Tensor& input, const PadFuncOptions& options);

}  // namespace functional
}  // namespace nn
}  // namespace minidl
