#pragma once
// Deterministic sum of split partial results, shared by the convolution weight-gradient kernels that split
// their reduction over blocks: out[i] = the sum over s of partial[s * n + i], always in the same order.
#include <cstdint>

#include "cuda/context.h"

namespace minidl {
namespace gpu {

constexpr int kSumSplitLanes = 32;

/// 32 outputs per block, 32 threads per output each summing every 32nd split, then one thread adding the 32
/// in order. The order is fixed, so the result is too.
template <class T>
__global__ void sum_splits_kernel(const T* partial, int splits, int n, T* out) {
  __shared__ T sums[kSumSplitLanes][kSumSplitLanes + 1];
  const int i = blockIdx.x * kSumSplitLanes + threadIdx.x;
  T s = T(0);
  if (i < n) {
    for (int k = threadIdx.y; k < splits; k += kSumSplitLanes) s += partial[static_cast<std::int64_t>(k) * n + i];
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && i < n) {
    T total = T(0);
    for (int k = 0; k < kSumSplitLanes; ++k) total += sums[k][threadIdx.x];
    out[i] = total;
  }
}

/// Launches sum_splits_kernel on the library's stream.
template <class T>
void sum_splits(const T* partial, int splits, int n, T* out) {
  sum_splits_kernel<T><<<(n + kSumSplitLanes - 1) / kSumSplitLanes, dim3(kSumSplitLanes, kSumSplitLanes), 0,
                         stream()>>>(partial, splits, n, out);
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
