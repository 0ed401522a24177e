// CUDA gradient-norm clipping (see kernels/backend.h). Block (x, y) of the norm kernel reduces a grid-stride
// share of tensor y of a list into one partial result; one single-block kernel combines all partial results in
// a fixed order, so the total is reproducible. The scaling kernel reads the total and derives the coefficient
// on the device, so a step with clipping needs no host round trip and can be captured in a CUDA graph. Both
// kernels take the gradients as tensor lists (cuda/tensor_list.cuh).
#include <algorithm>
#include <cstdint>

#include "cuda/context.h"
#include "cuda/tensor_list.cuh"
#include "cuda/wide_access.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

using i64 = std::int64_t;
constexpr int kThreads = kListThreads;
/// Partial results per tensor: enough blocks to fill the device for one large gradient.
constexpr unsigned int kMaxBlocksPerTensor = 256;

/// A deterministic block-wide combine (fixed tree order); thread 0 gets the result.
template <class A>
__device__ A block_combine(A v, const kernels::GradNorm& norm) {
  __shared__ A shared[kThreads];
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      shared[threadIdx.x] = norm.combine(shared[threadIdx.x], shared[threadIdx.x + s]);
    }
    __syncthreads();
  }
  return shared[0];
}

/// Float32 gradients accumulate in float32, as PyTorch's norm; partial results are stored as double.
template <class T>
__global__ void norm_partials_kernel(TensorList<T> list, kernels::GradNorm norm, double* partials) {
  const int t = blockIdx.y;
  const T* x = list.data[t];
  const i64 n = list.numel[t];
  const i64 first = blockIdx.x * (i64)kThreads + threadIdx.x, stride = (i64)kThreads * gridDim.x;
  const i64 packed = packed_prefix(x, n);
  T acc = 0;
  for (i64 k = first; k < packed / kPack<T>; k += stride) {
    const Wide<T, kPack<T>> w = load_wide<kPack<T>>(x + k * kPack<T>);
#pragma unroll
    for (int j = 0; j < kPack<T>; ++j) acc = norm.combine(acc, norm.term<T>(w.v[j]));
  }
  for (i64 i = packed + first; i < n; i += stride) acc = norm.combine(acc, norm.term<T>(x[i]));
  acc = block_combine(acc, norm);
  if (threadIdx.x == 0) partials[t * gridDim.x + blockIdx.x] = static_cast<double>(acc);
}

template <class R>
__global__ void norm_total_kernel(const double* partials, i64 count, kernels::GradNorm norm, R* total) {
  double acc = 0.0;
  for (i64 i = threadIdx.x; i < count; i += kThreads) acc = norm.combine(acc, partials[i]);
  acc = block_combine(acc, norm);
  if (threadIdx.x == 0) *total = static_cast<R>(norm.finish(acc));
}

template <class T, class R>
__global__ void scale_kernel(TensorList<T> list, const R* total, R max_norm) {
  const int t = blockIdx.y;
  const T coef = static_cast<T>(kernels::clip_coef<R>(max_norm, *total));
  T* x = list.data[t];
  const i64 n = list.numel[t];
  const i64 first = blockIdx.x * (i64)kThreads + threadIdx.x, stride = (i64)kThreads * gridDim.x;
  const i64 packed = packed_prefix(x, n);
  for (i64 k = first; k < packed / kPack<T>; k += stride) {
    Wide<T, kPack<T>> w = load_wide<kPack<T>>(x + k * kPack<T>);
#pragma unroll
    for (int j = 0; j < kPack<T>; ++j) w.v[j] = w.v[j] * coef;
    store_wide(x + k * kPack<T>, w);
  }
  for (i64 i = packed + first; i < n; i += stride) x[i] = x[i] * coef;
}

}  // namespace

void grad_norm(const std::vector<Tensor>& grads, const kernels::GradNorm& norm, Tensor& total) {
  const auto floats = lists_of<float>(grads);
  const auto doubles = lists_of<double>(grads);
  i64 count = 0;
  for (const auto& l : floats) count += static_cast<i64>(grid_of(l, kMaxBlocksPerTensor).x) * l.count;
  for (const auto& l : doubles) count += static_cast<i64>(grid_of(l, kMaxBlocksPerTensor).x) * l.count;
  Tensor partials = empty({std::max<i64>(count, 1)}, TensorOptions(kFloat64).device(total.device()));
  double* out = partials.data_ptr<double>();
  auto launch = [&](const auto& list) {
    const dim3 grid = grid_of(list, kMaxBlocksPerTensor);
    norm_partials_kernel<<<grid, kThreads, 0, stream()>>>(list, norm, out);
    MINIDL_CUDA_KERNEL_CHECK();
    out += static_cast<i64>(grid.x) * list.count;
  };
  for (const auto& l : floats) launch(l);
  for (const auto& l : doubles) launch(l);
  kernels::dispatch_floating(total.dtype(), "clip_grad_norm_", [&](auto tag) {
    using R = typename decltype(tag)::type;
    norm_total_kernel<R><<<1, kThreads, 0, stream()>>>(partials.data_ptr<double>(), count, norm, total.data_ptr<R>());
    MINIDL_CUDA_KERNEL_CHECK();
  });
}

void clip_grads_by_norm(const std::vector<Tensor>& grads, const Tensor& total, double max_norm) {
  kernels::dispatch_floating(total.dtype(), "clip_grad_norm_", [&](auto tag) {
    using R = typename decltype(tag)::type;
    const R* t = total.data_ptr<R>();
    const auto scale = [&](auto element) {
      using T = decltype(element);
      for (const TensorList<T>& l : lists_of<T>(grads)) {
        scale_kernel<T, R><<<grid_of(l, kMaxBlocksPerTensor), kThreads, 0, stream()>>>(l, t, static_cast<R>(max_norm));
        MINIDL_CUDA_KERNEL_CHECK();
      }
    };
    scale(float{});
    scale(double{});
  });
}

}  // namespace gpu
}  // namespace minidl
