#pragma once
// CUDA side of the optimizers: the update rules of kernels/optim_update.h as multi-tensor kernels on
// gpu::stream(). A step launches, per group of up to a few dozen parameters of one dtype, a one-block kernel
// that increments the group's step counters and one update kernel for the whole group; pointers and sizes
// travel by value in the kernel arguments. Nothing is allocated, copied from the host or synchronised, so a
// step can be captured in a CUDA graph, and replaying it advances the device-side step counters.
#include <vector>

#include "kernels/optim_update.h"
#include "minidl/tensor.h"

namespace minidl {
namespace gpu {

/// As cpu::optim_step, with every tensor (and `scalars`) on the current device.
void optim_step(const kernels::OptimHyper& hyper, const std::vector<kernels::OptimSlot>& slots, Tensor& scalars);

/// Queues an asynchronous copy of *lr into scalars[0]. The copy reads *lr when it runs, so *lr must outlive it
/// (the optimizer passes its own member).
void optim_set_lr(Tensor& scalars, const double* lr);

}  // namespace gpu
}  // namespace minidl
