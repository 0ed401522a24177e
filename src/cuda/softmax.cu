// CUDA softmax and log-softmax over the middle dimension of an (outer, n, inner) view, and their backward (see
// kernels/backend.h): a block per contiguous row, a thread per strided column; on gpu::stream(). float32,
// float64, and bfloat16 / float16 computed in float32.
#include <cmath>

#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/convert.h"
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

// Softmax over contiguous rows: one block per row, max and sum by block reductions. A is the arithmetic type
// (kernels::opmath_t: float for bfloat16 / float16 data, which is read and written as it is).
template <class T, class A = kernels::opmath_t<T>>
__global__ void softmax_rows_kernel(const T* x, T* y, i64 rows, i64 n, bool log) {
  extern __shared__ unsigned char smem_raw[];
  A* shared = reinterpret_cast<A*>(smem_raw);
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    A mx = -INFINITY;
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) mx = fmax(mx, static_cast<A>(xr[r]));
    mx = block_max(mx, shared);
    A s = 0;
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) s += kernels::m_exp(static_cast<A>(xr[r]) - mx);
    s = block_sum(s, shared);
    const A lse = kernels::m_log(s);
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) {
      const A z = static_cast<A>(xr[r]) - mx;
      yr[r] = static_cast<T>(log ? z - lse : kernels::m_exp(z) / s);
    }
  }
}

template <class T, class A = kernels::opmath_t<T>>
__global__ void softmax_strided_kernel(const T* x, T* y, i64 outer, i64 n, i64 inner, bool log) {
  GRID_STRIDE(j, outer * inner) {
    const i64 base = (j / inner) * n * inner + j % inner;
    A mx = static_cast<A>(x[base]);
    for (i64 r = 1; r < n; ++r) mx = fmax(mx, static_cast<A>(x[base + r * inner]));
    A s = 0;
    for (i64 r = 0; r < n; ++r) s += kernels::m_exp(static_cast<A>(x[base + r * inner]) - mx);
    const A lse = kernels::m_log(s);
    for (i64 r = 0; r < n; ++r) {
      const A z = static_cast<A>(x[base + r * inner]) - mx;
      y[base + r * inner] = static_cast<T>(log ? z - lse : kernels::m_exp(z) / s);
    }
  }
}

/// dx from the output y: y * (dy - sum(dy * y)), or for log-softmax dy - exp(y) * sum(dy).
template <class A> __device__ A softmax_grad(A y, A dy, A s, bool log) {
  return log ? dy - kernels::m_exp(y) * s : y * (dy - s);
}

template <class T, class A = kernels::opmath_t<T>>
__global__ void softmax_backward_rows_kernel(const T* y, const T* dy, T* dx, i64 rows, i64 n, bool log) {
  extern __shared__ unsigned char smem_raw[];
  A* shared = reinterpret_cast<A*>(smem_raw);
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const i64 off = row * n;
    A s = 0;
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) {
      const A d = static_cast<A>(dy[off + r]);
      s += log ? d : d * static_cast<A>(y[off + r]);
    }
    s = block_sum(s, shared);
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) {
      const i64 q = off + r;
      dx[q] = static_cast<T>(softmax_grad(static_cast<A>(y[q]), static_cast<A>(dy[q]), s, log));
    }
  }
}

template <class T, class A = kernels::opmath_t<T>>
__global__ void softmax_backward_strided_kernel(const T* y, const T* dy, T* dx, i64 outer, i64 n, i64 inner, bool log) {
  GRID_STRIDE(j, outer * inner) {
    const i64 base = (j / inner) * n * inner + j % inner;
    A s = 0;
    for (i64 r = 0; r < n; ++r) {
      const A d = static_cast<A>(dy[base + r * inner]);
      s += log ? d : d * static_cast<A>(y[base + r * inner]);
    }
    for (i64 r = 0; r < n; ++r) {
      const i64 q = base + r * inner;
      dx[q] = static_cast<T>(softmax_grad(static_cast<A>(y[q]), static_cast<A>(dy[q]), s, log));
    }
  }
}

}  // namespace

void softmax_forward(const Tensor& x, Tensor& y, i64 outer, i64 n, i64 inner, bool log) {
  kernels::dispatch_floating_lowp(x.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1) {
      softmax_rows_kernel<<<row_blocks(outer), 128, 128 * sizeof(kernels::opmath_t<T>), stream()>>>(x.data_ptr<T>(), y.data_ptr<T>(),
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
  kernels::dispatch_floating_lowp(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1) {
      softmax_backward_rows_kernel<<<row_blocks(outer), 128, 128 * sizeof(kernels::opmath_t<T>), stream()>>>(
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
