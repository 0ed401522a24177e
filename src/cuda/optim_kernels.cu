// Multi-tensor optimizer kernels (see kernels/backend.h). Block row y of the update kernel works on tensor y
// of the list with a grid-stride loop; each thread builds the update functor once from the parameter group's
// options and the tensor's step counter, both read from device memory so that a captured step follows option
// changes and counts its replays. GradScaler's found_inf and scale are read there too: a step with an inf or NaN
// gradient is skipped on the device.
#include <algorithm>

#include "cuda/context.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/grad_scaler.h"

namespace minidl {
namespace gpu {
namespace {

using i64 = std::int64_t;
constexpr int kThreads = 256;
/// Tensors per launch; keeps the kernel arguments well under the 4 KiB every architecture accepts.
constexpr int kMaxTensors = 32;
/// Blocks per tensor: enough to saturate the device with one large tensor, few enough that the blocks of small
/// tensors in the same launch, which exit at once, cost nothing noticeable.
constexpr unsigned int kMaxBlocksPerTensor = 1024;

template <class T>
struct TensorList {
  int count = 0;
  double* steps = nullptr;         // the step count of every parameter of the optimizer
  const double* values = nullptr;  // the group's options (kernels::OptimValue)
  kernels::OptimAmp amp;
  int index[kMaxTensors] = {};
  i64 numel[kMaxTensors] = {};
  T* param[kMaxTensors] = {};
  const T* grad[kMaxTensors] = {};
  T* state[kernels::kMaxOptimStates][kMaxTensors] = {};
};
static_assert(sizeof(TensorList<double>) <= 4096, "optimizer kernel arguments exceed 4 KiB");

/// Whether GradScaler found an inf or NaN gradient: then the step changes nothing, step counts included.
__device__ bool skipped(const kernels::OptimAmp& amp) { return amp.found_inf != nullptr && *amp.found_inf != 0.0f; }

template <class T>
__global__ void advance_steps_kernel(TensorList<T> list) {
  if (skipped(list.amp)) return;
  if (static_cast<int>(threadIdx.x) < list.count) list.steps[list.index[threadIdx.x]] += 1.0;
}

template <class F, class T>
__global__ void update_kernel(kernels::OptimHyper hyper, TensorList<T> list) {
  if (skipped(list.amp)) return;
  const T inv = static_cast<T>(list.amp.grad_scale != nullptr ? kernels::inv_scale_of(*list.amp.grad_scale) : 1.0f);
  const int t = blockIdx.y;
  const F update(hyper, list.values, list.steps[list.index[t]]);
  T* const p = list.param[t];
  const T* const g = list.grad[t];
  T* state[kernels::kMaxOptimStates];
  for (int k = 0; k < kernels::kMaxOptimStates; ++k) state[k] = list.state[k][t];
  const i64 n = list.numel[t];
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x) {
    update(i, p, g[i] * inv, state);
  }
}

template <class T>
void launch(const kernels::OptimHyper& hyper, const TensorList<T>& list) {
  i64 largest = 0;
  for (int t = 0; t < list.count; ++t) largest = std::max(largest, list.numel[t]);
  advance_steps_kernel<T><<<1, kMaxTensors, 0, stream()>>>(list);
  MINIDL_CUDA_KERNEL_CHECK();
  const dim3 grid(std::min(blocks_for(largest, kThreads), kMaxBlocksPerTensor), static_cast<unsigned int>(list.count));
  kernels::visit_optimizer<T>(hyper.kind, [&](auto ftag) {
    using F = typename decltype(ftag)::type;
    update_kernel<F, T><<<grid, kThreads, 0, stream()>>>(hyper, list);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void step_dtype(const kernels::OptimHyper& hyper, const std::vector<kernels::OptimSlot>& slots, double* steps,
                const double* values, const kernels::OptimAmp& amp) {
  TensorList<T> list;
  list.steps = steps;
  list.values = values;
  list.amp = amp;
  for (const kernels::OptimSlot& slot : slots) {
    if (slot.param.dtype() != dtype_of<T>::value) continue;
    const int t = list.count++;
    list.index[t] = slot.index;
    list.numel[t] = slot.param.numel();
    list.param[t] = slot.param.data_ptr<T>();
    list.grad[t] = slot.grad.data_ptr<T>();
    for (int k = 0; k < kernels::kMaxOptimStates; ++k) {
      list.state[k][t] = slot.state[k].defined() ? slot.state[k].data_ptr<T>() : nullptr;
    }
    if (list.count == kMaxTensors) {
      launch(hyper, list);
      list.count = 0;
    }
  }
  if (list.count > 0) launch(hyper, list);
}

}  // namespace

void optim_step(const kernels::OptimHyper& hyper, const std::vector<kernels::OptimSlot>& slots, Tensor& steps,
                const Tensor& values, std::int64_t group, const kernels::OptimAmp& amp) {
  const double* v = values.data_ptr<double>() + group * kernels::kOptimValues;
  step_dtype<float>(hyper, slots, steps.data_ptr<double>(), v, amp);
  step_dtype<double>(hyper, slots, steps.data_ptr<double>(), v, amp);
}

void optim_upload(Tensor& dst, std::int64_t offset, const double* src, std::int64_t count) {
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(double);
  MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr<double>() + offset, src, bytes, cudaMemcpyHostToDevice, stream()));
}

}  // namespace gpu
}  // namespace minidl
