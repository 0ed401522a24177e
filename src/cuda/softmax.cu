// CUDA softmax and log-softmax over the middle dimension of an (outer, n, inner) view, and their backward (see
// kernels/backend.h): a block per contiguous row, a thread per strided column; on gpu::stream().
#include <cmath>

#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

template <class T> __device__ T block_max(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] = fmax(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();
  return r;
}

// Softmax over contiguous rows: one block per row, max and sum by block reductions.
template <class T> __global__ void softmax_rows_kernel(const T* x, T* y, i64 rows, i64 n, bool log) {
  extern __shared__ unsigned char smem_raw[];
  T* shared = reinterpret_cast<T*>(smem_raw);
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    T mx = -INFINITY;
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) mx = fmax(mx, xr[r]);
    mx = block_max(mx, shared);
    T s = 0;
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) s += kernels::m_exp(xr[r] - mx);
    s = block_sum(s, shared);
    const T lse = kernels::m_log(s);
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) yr[r] = log ? xr[r] - mx - lse : kernels::m_exp(xr[r] - mx) / s;
  }
}

template <class T> __global__ void softmax_strided_kernel(const T* x, T* y, i64 outer, i64 n, i64 inner, bool log) {
  GRID_STRIDE(j, outer * inner) {
    const i64 base = (j / inner) * n * inner + j % inner;
    T mx = x[base];
    for (i64 r = 1; r < n; ++r) mx = fmax(mx, x[base + r * inner]);
    T s = 0;
    for (i64 r = 0; r < n; ++r) s += kernels::m_exp(x[base + r * inner] - mx);
    const T lse = kernels::m_log(s);
    for (i64 r = 0; r < n; ++r) {
      const T z = x[base + r * inner] - mx;
      y[base + r * inner] = log ? z - lse : kernels::m_exp(z) / s;
    }
  }
}

template <class T>
__global__ void softmax_backward_rows_kernel(const T* y, const T* dy, T* dx, i64 rows, i64 n, bool log) {
  extern __shared__ unsigned char smem_raw[];
  T* shared = reinterpret_cast<T*>(smem_raw);
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const i64 off = row * n;
    T s = 0;
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) s += log ? dy[off + r] : dy[off + r] * y[off + r];
    s = block_sum(s, shared);
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) {
      const i64 q = off + r;
      dx[q] = log ? dy[q] - kernels::m_exp(y[q]) * s : y[q] * (dy[q] - s);
    }
  }
}

template <class T>
__global__ void softmax_backward_strided_kernel(const T* y, const T* dy, T* dx, i64 outer, i64 n, i64 inner, bool log) {
  GRID_STRIDE(j, outer * inner) {
    const i64 base = (j / inner) * n * inner + j % inner;
    T s = 0;
    for (i64 r = 0; r < n; ++r) s += log ? dy[base + r * inner] : dy[base + r * inner] * y[base + r * inner];
    for (i64 r = 0; r < n; ++r) {
      const i64 q = base + r * inner;
      dx[q] = log ? dy[q] - kernels::m_exp(y[q]) * s : y[q] * (dy[q] - s);
    }
  }
}


}  // namespace

void softmax_forward(const Tensor& x, Tensor& y, i64 outer, i64 n, i64 inner, bool log) {
  kernels::dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1) {
      softmax_rows_kernel<<<row_blocks(outer), 128, 128 * sizeof(T), stream()>>>(x.data_ptr<T>(), y.data_ptr<T>(),
                                                                                 outer, n, log);
    } else {
      softmax_strided_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(x.data_ptr<T>(), y.data_ptr<T>(), outer,
                                                                                   n, inner, log);
    }
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, i64 outer, i64 n, i64 inner, bool log) {
  if (y.numel() == 0) return;
  kernels::dispatch_floating(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1) {
      softmax_backward_rows_kernel<<<row_blocks(outer), 128, 128 * sizeof(T), stream()>>>(
          y.data_ptr<T>(), dy.data_ptr<T>(), dx.data_ptr<T>(), outer, n, log);
    } else {
      softmax_backward_strided_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(
          y.data_ptr<T>(), dy.data_ptr<T>(), dx.data_ptr<T>(), outer, n, inner, log);
    }
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
