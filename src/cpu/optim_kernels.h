#pragma once
// CPU side of the optimizers: applies the update rules of kernels/optim_update.h to host tensors. The CUDA
// backend has the same two functions in namespace minidl::gpu (cuda/optim_kernels.h).
#include <vector>

#include "kernels/optim_update.h"
#include "minidl/tensor.h"

namespace minidl {
namespace cpu {

/// One optimizer step for every slot: increments the slot's step counter scalars[1 + index], then updates its
/// parameter and state in place. `scalars` (float64) holds the learning rate at [0] and the step counters.
void optim_step(const kernels::OptimHyper& hyper, const std::vector<kernels::OptimSlot>& slots, Tensor& scalars);

/// Writes *lr into scalars[0].
void optim_set_lr(Tensor& scalars, const double* lr);

}  // namespace cpu
}  // namespace minidl
