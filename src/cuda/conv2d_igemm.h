#pragma once
// minidl's own 2-d convolution kernels: implicit GEMM on TF32 tensor cores, float only. cuDNN's legacy
// algorithms reach a small fraction of the tensor cores' rate on small convolutions (32 → 64 channels, 3×3);
// these kernels gather the im2col operand on the fly (no im2col buffer) and run the products on tensor cores.
// conv2d.cpp offers them as one more candidate in its per-shape algorithm search, used when TF32 is allowed.
// All three are deterministic: the weight gradient sums its batch splits in a fixed order.
#include "kernels/elementwise.h"
#include "kernels/params.h"

namespace minidl {
namespace gpu {

enum class ConvPass { kForward, kBackwardInput, kBackwardWeight };

/// Whether the kernels handle `p` in `pass`: groups 1, every tensor and every gathered offset indexable with
/// 32-bit integers, and for the input gradient stride 1.
bool igemm_supports(const kernels::Conv2dParams& p, ConvPass pass);

/// y = act(conv(x, w) + bias) (bias may be null). Same layouts as kernels/backend.h.
void igemm_conv2d_forward(const kernels::Conv2dParams& p, const float* x, const float* w, const float* bias, float* y,
                          kernels::Activation act);
/// dx = gradient of the convolution w.r.t. x; overwrites dx.
void igemm_conv2d_backward_input(const kernels::Conv2dParams& p, const float* dy, const float* w, float* dx);
/// dw = gradient w.r.t. the weight; overwrites dw. Takes a gpu::Workspace for the partial sums of its splits.
void igemm_conv2d_backward_weight(const kernels::Conv2dParams& p, const float* x, const float* dy, float* dw);

}  // namespace gpu
}  // namespace minidl
