#pragma once
// Direct 2-d convolution for layers with a short reduction (C·R·S ≤ 32 taps, e.g. a first layer on 1- or
// 3-channel images): no GEMM, each thread keeps its output pixel's taps in registers. For a layer of 32 3×3
// filters on 1-channel images a GEMM has a reduction of 9, so cuDNN's algorithms and the implicit-GEMM kernels
// spend their time on tiling overhead rather than on the few MFLOP and MB of output of each pass.
// conv2d.cpp offers these kernels as candidates in its per-shape search. Full precision (no TF32), so they
// serve float and double under every setting, and deterministic: partial sums are added in a fixed order.
#include "kernels/elementwise.h"
#include "kernels/params.h"

namespace minidl {
namespace gpu {

/// Whether the direct kernels handle `p`: groups 1, at most 32 taps (C·R·S), at most 192 output channels
/// (their weights are staged in shared memory), and every offset within 32 bits except an image's base.
bool direct_conv_supports(const kernels::Conv2dParams& p);

/// y = act(conv(x, w) + bias) (bias may be null). Same layouts as kernels/backend.h.
template <class T>
void direct_conv2d_forward(const kernels::Conv2dParams& p, const T* x, const T* w, const T* bias, T* y,
                           kernels::Activation act);

/// dw = gradient w.r.t. the weight; overwrites dw. Takes a gpu::Workspace for the partial sums.
template <class T>
void direct_conv2d_backward_weight(const kernels::Conv2dParams& p, const T* x, const T* dy, T* dw);

}  // namespace gpu
}  // namespace minidl
