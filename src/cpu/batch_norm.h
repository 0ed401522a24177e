#pragma once
// CPU batch-norm kernels on raw, contiguous (N, C, HW) buffers: statistics per channel c over the N * HW values
// x[n, c, :]. Per-channel arrays hold C values. A null gamma means 1 and a null beta 0 (affine = false). The CUDA
// backend has the same functions in namespace minidl::gpu. Instantiated for float and double.
#include "kernels/params.h"

namespace minidl {
namespace cpu {

/// Training forward: normalises with the batch mean and biased variance, stores them as save_mean and
/// save_invstd = 1 / sqrt(var + eps) for the backward, and, when not null, updates
/// running = (1 - momentum) * running + momentum * batch statistic, using the unbiased variance (PyTorch).
/// Throws ValueError when N * HW < 2 (the unbiased variance needs two values).
template <class T>
void batch_norm_forward_train(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta, T* y,
                              T* save_mean, T* save_invstd, T* running_mean, T* running_var);

/// Inference forward with the running statistics: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta.
template <class T>
void batch_norm_forward_eval(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta,
                             const T* running_mean, const T* running_var, T* y);

/// Training-mode backward (batch statistics depend on x) from the forward's save_mean and save_invstd;
/// overwrites dx, and dgamma / dbeta when not null.
template <class T>
void batch_norm_backward(const kernels::BatchNormParams& p, const T* x, const T* dy, const T* gamma,
                         const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta);

}  // namespace cpu
}  // namespace minidl
