#pragma once
// Transposed and 1-d convolutions (LibTorch's torch::conv_transpose2d, conv1d, conv_transpose1d; the positional
// forms of ATen's functions, as functional::conv2d). They run conv2d's kernels: a transposed convolution's forward
// is conv2d's input-gradient pass, and a 1-d convolution is a 2-d one of height 1.
#include <cstdint>

#include "minidl/nn/functional.h"  // ExpandingArray2
#include "minidl/tensor.h"

namespace minidl {
namespace nn {
namespace functional {

/// input (N, C_in, H, W), weight (C_in, C_out/groups, kH, kW) as PyTorch, bias (C_out) or undefined. The output
/// is (N, C_out, H_out, W_out), H_out = (H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1;
/// output_padding must be smaller than either stride or dilation.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        ExpandingArray2 stride = 1, ExpandingArray2 padding = 0, ExpandingArray2 output_padding = 0,
                        std::int64_t groups = 1, ExpandingArray2 dilation = 1);

/// input (N, C_in, L), weight (C_out, C_in/groups, k), bias (C_out) or undefined.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), std::int64_t stride = 1,
              std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1);

/// input (N, C_in, L), weight (C_in, C_out/groups, k), bias (C_out) or undefined.
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        std::int64_t stride = 1, std::int64_t padding = 0, std::int64_t output_padding = 0,
                        std::int64_t groups = 1, std::int64_t dilation = 1);

}  // namespace functional
}  // namespace nn
}  // namespace minidl
