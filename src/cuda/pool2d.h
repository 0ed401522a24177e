#pragma once
// 2-d max and average pooling on the GPU (the same functions as src/cpu's, on device pointers), NCHW, T float or
// double, queued on gpu::stream(). Own kernels rather than cuDNN's, because the max-pool backward works from
// the argmax indices the forward saved (as the CPU backend does) instead of re-reading x and y. Backward passes
// gather: every input element sums over the output windows that cover it, so no atomics are needed and
// results are deterministic.
#include <cstdint>

#include "kernels/params.h"

namespace minidl {
namespace gpu {

/// indices (nullable) receive the argmax of each window as a flat index h * W + w into its input plane: the first
/// maximum in row-major window order, or the last NaN if the window holds any (as src/cpu).
template <class T>
void max_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y, std::int64_t* indices);
/// Overwrites dx.
template <class T>
void max_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx);
/// Padding counts as zeros in the average (count_include_pad = true): every window divides by kh * kw.
template <class T>
void avg_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y);
/// Overwrites dx.
template <class T>
void avg_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, T* dx);

}  // namespace gpu
}  // namespace minidl
