#pragma once
// CPU 2-D pooling kernels on raw, contiguous NCHW buffers (input N x C x H x W, output N x C x P x Q as given by
// kernels::Pool2dParams, which must have been finalize()d). The CUDA backend has the same functions in
// namespace minidl::gpu. Instantiated for float and double.
#include <cstdint>

#include "kernels/params.h"

namespace minidl {
namespace cpu {

/// Max over each window; padding counts as -inf. `indices` receives, per output element, the flat index
/// (h * W + w) of the chosen element in its H x W input plane: the first maximum in row-major window order, or
/// the last NaN if the window holds any (PyTorch's CPU rule).
template <class T>
void max_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y, std::int64_t* indices);

/// dx = scatter-add of dy onto the recorded argmax positions; overwrites dx. Throws IndexError if an index
/// lies outside its plane.
template <class T>
void max_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx);

/// Mean over each window, dividing by kh * kw including padded cells (count_include_pad = true).
template <class T>
void avg_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y);

/// dx = gradient of avg_pool2d_forward; overwrites dx.
template <class T>
void avg_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, T* dx);

}  // namespace cpu
}  // namespace minidl
