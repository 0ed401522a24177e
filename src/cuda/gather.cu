// CUDA row gather and scatter-add (see kernels/backend.h), queued on gpu::stream().
#include "cuda/context.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

using i64 = std::int64_t;
constexpr int kThreads = 256;

template <class T>
__global__ void index_select_kernel(const T* __restrict__ src, const i64* __restrict__ index, T* __restrict__ out,
                                    i64 k, i64 n, i64 inner, i64 total) {
  for (i64 e = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<i64>(blockDim.x) * gridDim.x) {
    const i64 i = e % inner, j = (e / inner) % k, b = e / (inner * k);
    out[e] = src[(b * n + index[j]) * inner + i];
  }
}

// One thread per column (b, i) of dst walks j in order: no two threads touch the same element, so repeated
// indices need no atomics and the sums are bitwise reproducible.
template <class T>
__global__ void index_add_kernel(const T* __restrict__ src, const i64* __restrict__ index, T* __restrict__ dst, i64 k,
                                 i64 n, i64 inner, i64 columns) {
  for (i64 c = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; c < columns;
       c += static_cast<i64>(blockDim.x) * gridDim.x) {
    const i64 i = c % inner, b = c / inner;
    for (i64 j = 0; j < k; ++j) dst[(b * n + index[j]) * inner + i] += src[(b * k + j) * inner + i];
  }
}

__global__ void first_out_of_range_kernel(const i64* __restrict__ index, i64 k, i64 n,
                                          unsigned long long* __restrict__ first) {
  for (i64 j = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; j < k;
       j += static_cast<i64>(blockDim.x) * gridDim.x) {
    if (index[j] < 0 || index[j] >= n) atomicMin(first, static_cast<unsigned long long>(j));
  }
}

}  // namespace

void index_select(const Tensor& src, const Tensor& index, Tensor& out, std::int64_t outer, std::int64_t n,
                  std::int64_t inner) {
  const i64 total = outer * index.numel() * inner;
  if (total == 0) return;
  kernels::dispatch_all(src.dtype(), "index_select", [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_select_kernel<T><<<blocks_for(total, kThreads), kThreads, 0, stream()>>>(
        src.data_ptr<T>(), index.data_ptr<i64>(), out.data_ptr<T>(), index.numel(), n, inner, total);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void index_add(const Tensor& src, const Tensor& index, Tensor& dst, std::int64_t outer, std::int64_t n,
               std::int64_t inner) {
  const i64 columns = outer * inner;
  if (columns == 0 || index.numel() == 0) return;
  kernels::dispatch_floating(dst.dtype(), "index_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_add_kernel<T><<<blocks_for(columns, kThreads), kThreads, 0, stream()>>>(
        src.data_ptr<T>(), index.data_ptr<i64>(), dst.data_ptr<T>(), index.numel(), n, inner, columns);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

std::int64_t first_out_of_range(const Tensor& index, std::int64_t n) {
  const i64 k = index.numel();
  if (k == 0) return -1;
  Tensor first = full({1}, static_cast<double>(k), TensorOptions(kInt64).device(index.device()));
  first_out_of_range_kernel<<<blocks_for(k, kThreads), kThreads, 0, stream()>>>(
      index.data_ptr<i64>(), k, n, reinterpret_cast<unsigned long long*>(first.data_ptr<i64>()));
  MINIDL_CUDA_KERNEL_CHECK();
  const i64 j = first.item<i64>();
  return j == k ? -1 : j;
}

}  // namespace gpu
}  // namespace minidl
