#pragma once
// The layer kernels every backend provides — 2-d convolution, pooling and batch norm on raw, contiguous
// buffers — declared once for both namespaces (minidl::cpu in src/cpu, minidl::gpu in src/cuda, where the
// pointers are device pointers and all work is queued on gpu::stream()), so the two cannot drift apart.
// T is float or double. The parameter structs (kernels/params.h) must have been finalize()d.
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/params.h"
#include "minidl/config.h"

// Convolution: x N x C x H x W, w K x C/groups x R x S, y N x K x P x Q, bias and dbias K values.
//   conv2d_forward:          y = act(conv(x, w) + bias); `bias` may be null; `act` None or Relu (the fused
//                            nn::ConvReLU2d), applied by the kernel that writes y.
//   conv2d_backward_input:   dx = gradient w.r.t. x given dy; overwrites dx.
//   conv2d_backward_weight:  dw (and dbias when not null) = gradients w.r.t. the weight and bias; overwrites them.
//                            The CPU sums over the batch in an order fixed by the thread count: repeated calls
//                            agree bitwise.
// Pooling: x N x C x H x W, y N x C x P x Q.
//   max_pool2d_forward:   max over each window, padding counting as -inf. `indices` (may be null on the GPU)
//                         receive per output the flat index h * W + w of the chosen element in its input plane:
//                         the first maximum in row-major window order, or the last NaN if the window holds any
//                         (PyTorch's CPU rule).
//   max_pool2d_backward:  dx = dy scattered onto those indices, summed where windows overlap; overwrites dx.
//                         The CPU throws IndexError for an index outside its plane.
//   avg_pool2d_forward:   mean over each window, dividing by kh * kw including padded cells (count_include_pad).
//   avg_pool2d_backward:  its gradient; overwrites dx.
// Batch norm over (N, C, HW), statistics per channel; per-channel arrays hold C values; a null gamma means 1 and
// a null beta 0 (affine off), a null dgamma / dbeta that those gradients are not wanted. PyTorch's semantics:
// y = (x - mean) * invstd * gamma + beta, invstd = 1 / sqrt(var + eps) with the biased batch variance.
//   batch_norm_forward_train: writes y and save_mean, save_invstd (for the backward) and, when not null,
//                             moves running_mean / running_var by `momentum` towards the batch mean and the
//                             unbiased batch variance. Needs N * HW > 1 (ValueError otherwise).
//   batch_norm_forward_eval:  normalises with the running statistics.
//   batch_norm_backward:      training-mode gradient from the saved statistics; overwrites dx, dgamma, dbeta.
#define MINIDL_LAYER_KERNEL_DECLARATIONS                                                                        \
  template <class T>                                                                                          \
  void conv2d_forward(const kernels::Conv2dParams& p, const T* x, const T* w, const T* bias, T* y,            \
                      kernels::Activation act);                                                             \
  template <class T>                                                                                          \
  void conv2d_backward_input(const kernels::Conv2dParams& p, const T* dy, const T* w, T* dx);                 \
  template <class T>                                                                                          \
  void conv2d_backward_weight(const kernels::Conv2dParams& p, const T* x, const T* dy, T* dw, T* dbias);      \
  template <class T>                                                                                          \
  void max_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y, std::int64_t* indices);           \
  template <class T>                                                                                          \
  void max_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx);  \
  template <class T>                                                                                          \
  void avg_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y);                                  \
  template <class T>                                                                                          \
  void avg_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, T* dx);                               \
  template <class T>                                                                                          \
  void batch_norm_forward_train(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta,  \
                                T* y, T* save_mean, T* save_invstd, T* running_mean, T* running_var);         \
  template <class T>                                                                                          \
  void batch_norm_forward_eval(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta,   \
                               const T* running_mean, const T* running_var, T* y);                            \
  template <class T>                                                                                          \
  void batch_norm_backward(const kernels::BatchNormParams& p, const T* x, const T* dy, const T* gamma,         \
                           const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta);

namespace minidl {
namespace cpu {
MINIDL_LAYER_KERNEL_DECLARATIONS
}  // namespace cpu
#if MINIDL_CUDA_ENABLED
namespace gpu {
MINIDL_LAYER_KERNEL_DECLARATIONS
}  // namespace gpu
#endif
}  // namespace minidl

#undef MINIDL_LAYER_KERNEL_DECLARATIONS
