#pragma once
// Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
// 2015) for the CPU backend's 3x3, stride-1, undilated convolutions with enough channels: the forward pass and,
// as a forward pass over dy with the weights flipped and transposed, the input gradient. Every 2x2 block of
// output ("tile") is read from a 4x4 patch of input; in the transformed domain the sum over input channels is 16
// independent products of (output channels x input channels) by (input channels x tiles) matrices, 16
// multiplications per tile and channel pair instead of direct convolution's 36 (2.25x fewer FLOPs).
// conv2d.cpp picks this path; the GEMM path stays for every other shape.
#include "kernels/backend.h"

namespace minidl {
namespace cpu {

/// Whether conv2d_forward / conv2d_backward_input take the Winograd path for `p`: 3x3 kernel, stride 1,
/// dilation 1, at least kWinogradMinChannels input and output channels per group (the transforms cost
/// per channel what the products save per channel pair, so few channels gain nothing: a first layer on 1-channel images
/// has one input channel), padding at most 2 for the input gradient (its forward pass pads dy by 2 - padding). The
/// environment variable MINIDL_CPU_WINOGRAD=0 turns the path off (for comparisons).
constexpr std::int64_t kWinogradMinChannels = 8;
bool winograd_forward_applies(const kernels::Conv2dParams& p);
bool winograd_backward_input_applies(const kernels::Conv2dParams& p);

/// conv2d_forward and conv2d_backward_input's contracts (kernels/backend.h) for parameters that the
/// matching *_applies() accepts (ValueError otherwise).
template <class T>
void winograd_conv2d_forward(const kernels::Conv2dParams& p, const T* x, const T* w, const T* bias, T* y,
                             kernels::Activation act);
template <class T>
void winograd_conv2d_backward_input(const kernels::Conv2dParams& p, const T* dy, const T* w, T* dx);

}  // namespace cpu
}  // namespace minidl
