#pragma once
// CPU 2-D convolution kernels on raw, contiguous NCHW buffers (layouts in kernels::Conv2dParams: input
// N x C x H x W, weight K x C/groups x R x S, output N x K x P x Q). The CUDA backend has the same functions in
// namespace minidl::gpu. `p` must have been finalize()d. Instantiated for float and double.
#include "kernels/params.h"

namespace minidl {
namespace cpu {

/// y = conv(x, w) + bias; `bias` (K values) may be null.
template <class T>
void conv2d_forward(const kernels::Conv2dParams& p, const T* x, const T* w, const T* bias, T* y);

/// dx = gradient of the loss w.r.t. x given dy; overwrites dx.
template <class T>
void conv2d_backward_input(const kernels::Conv2dParams& p, const T* dy, const T* w, T* dx);

/// dw (and dbias, K values, when not null) = gradients w.r.t. the weight and bias given x and dy; overwrites them.
/// The sum over the batch is done in an order fixed by the thread count, so repeated calls agree bitwise.
template <class T>
void conv2d_backward_weight(const kernels::Conv2dParams& p, const T* x, const T* dy, T* dw, T* dbias);

}  // namespace cpu
}  // namespace minidl
