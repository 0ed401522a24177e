#pragma once
// 2-d convolution on the GPU through cuDNN (the same functions as src/cpu's, on device pointers). All work is
// queued on gpu::stream(); T is float or double. Layouts: x NCHW, w K x (C/groups) x R x S, y N x K x P x Q,
// bias and dbias K.
//
// Algorithm choice: the first call of each pass for a shape (all Conv2dParams fields, dtype, the TF32 and
// deterministic settings, the device) times the candidates with cudnnFind*AlgorithmEx, which runs kernels and
// synchronises the stream, and caches the winner; later calls only launch. During CUDA-graph capture that
// search is impossible, so a shape first seen while capturing takes cuDNN's heuristic choice instead (and keeps
// it): run one step eagerly before capturing to get the measured choice.
#include "kernels/params.h"

namespace minidl {
namespace gpu {

template <class T>
void conv2d_forward(const kernels::Conv2dParams& p, const T* x, const T* w, const T* bias /*nullable*/, T* y);
/// Overwrites dx.
template <class T>
void conv2d_backward_input(const kernels::Conv2dParams& p, const T* dy, const T* w, T* dx);
/// Overwrites dw and dbias (when not null).
template <class T>
void conv2d_backward_weight(const kernels::Conv2dParams& p, const T* x, const T* dy, T* dw, T* dbias /*nullable*/);

}  // namespace gpu
}  // namespace minidl
