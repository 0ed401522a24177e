#pragma once
// Batch normalisation over (N, C, HW) on the GPU through cuDNN's spatial batch norm (the same functions as
// src/cpu's, on device pointers), T float or double, queued on gpu::stream(). Statistics are per channel C.
//
// Semantics (PyTorch's): y = (x - mean) * invstd * gamma + beta with invstd = 1 / sqrt(var + eps) and the biased
// batch variance; the running statistics move by `momentum` towards the batch mean and the unbiased batch
// variance. A null gamma / beta means affine off (scale 1, shift 0); null dgamma / dbeta means those
// gradients are not wanted.
#include "kernels/params.h"

namespace minidl {
namespace gpu {

/// Writes y and the batch statistics save_mean, save_invstd (both or neither may be null) and updates
/// running_mean, running_var in place (both or neither may be null). Needs N * HW > 1.
template <class T>
void batch_norm_forward_train(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta, T* y,
                              T* save_mean, T* save_invstd, T* running_mean, T* running_var);
/// Normalises with the running statistics. Without them (both null: the layer tracks none) it normalises with
/// the batch statistics, as PyTorch does in that case.
template <class T>
void batch_norm_forward_eval(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta,
                             const T* running_mean, const T* running_var, T* y);
/// Gradient of batch_norm_forward_train given the statistics it saved (both null: recomputed from x).
/// Overwrites dx, dgamma and dbeta.
template <class T>
void batch_norm_backward(const kernels::BatchNormParams& p, const T* x, const T* dy, const T* gamma,
                         const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta);

}  // namespace gpu
}  // namespace minidl
