#include "cuda/pool2d.h"

#include <cstdint>

#include "cuda/context.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::Pool2dParams;
constexpr int kThreads = 256;

/// Output rows (or columns) whose window covers input row `pos` (padded coordinate pos + pad): the half-open
/// range [begin, end) of o with o * stride <= pos + pad < o * stride + kernel, clipped to [0, out).
struct Cover {
  std::int64_t begin, end;
};
__device__ Cover covering(std::int64_t pos, std::int64_t pad, std::int64_t kernel, std::int64_t stride,
                          std::int64_t out) {
  const std::int64_t padded = pos + pad;
  const std::int64_t begin = padded < kernel ? 0 : (padded - kernel) / stride + 1;
  const std::int64_t end = min(padded / stride + 1, out);
  return {begin, end};
}

template <class T>
__global__ void max_pool_forward_kernel(Pool2dParams p, const T* __restrict__ x, T* __restrict__ y,
                                        std::int64_t* __restrict__ indices, std::int64_t total) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x) {
    const std::int64_t q = i % p.Q, row = (i / p.Q) % p.P, plane = i / (p.Q * p.P);
    const T* xp = x + plane * p.H * p.W;
    // Pool2dParams::finalize() bounds the padding by half the kernel, so every window holds an input element.
    const std::int64_t h0 = row * p.sh - p.ph, w0 = q * p.sw - p.pw;
    const std::int64_t h_begin = max(h0, std::int64_t{0}), h_end = min(h0 + p.kh, p.H);
    const std::int64_t w_begin = max(w0, std::int64_t{0}), w_end = min(w0 + p.kw, p.W);
    std::int64_t arg = h_begin * p.W + w_begin;
    T best = xp[arg];
    for (std::int64_t h = h_begin; h < h_end; ++h) {
      for (std::int64_t w = w_begin; w < w_end; ++w) {
        const T v = xp[h * p.W + w];
        // Strict > keeps the first maximum; every NaN replaces the best so far, so NaN propagates and the
        // last one wins (PyTorch's CPU rule, as in src/cpu).
        if (v > best || isnan(v)) {
          best = v;
          arg = h * p.W + w;
        }
      }
    }
    y[i] = best;
    if (indices) indices[i] = arg;
  }
}

template <class T>
__global__ void max_pool_backward_kernel(Pool2dParams p, const T* __restrict__ dy,
                                         const std::int64_t* __restrict__ indices, T* __restrict__ dx,
                                         std::int64_t total) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x) {
    const std::int64_t w = i % p.W, h = (i / p.W) % p.H, plane = i / (p.W * p.H);
    const Cover rows = covering(h, p.ph, p.kh, p.sh, p.P), cols = covering(w, p.pw, p.kw, p.sw, p.Q);
    const std::int64_t self = h * p.W + w, base = plane * p.P * p.Q;
    T sum = 0;
    for (std::int64_t r = rows.begin; r < rows.end; ++r) {
      for (std::int64_t c = cols.begin; c < cols.end; ++c) {
        const std::int64_t o = base + r * p.Q + c;
        if (indices[o] == self) sum += dy[o];
      }
    }
    dx[i] = sum;
  }
}

template <class T>
__global__ void avg_pool_forward_kernel(Pool2dParams p, const T* __restrict__ x, T* __restrict__ y,
                                        std::int64_t total) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x) {
    const std::int64_t q = i % p.Q, row = (i / p.Q) % p.P, plane = i / (p.Q * p.P);
    const T* xp = x + plane * p.H * p.W;
    const std::int64_t h0 = row * p.sh - p.ph, w0 = q * p.sw - p.pw;
    const std::int64_t h_begin = max(h0, std::int64_t{0}), h_end = min(h0 + p.kh, p.H);
    const std::int64_t w_begin = max(w0, std::int64_t{0}), w_end = min(w0 + p.kw, p.W);
    T sum = 0;
    for (std::int64_t h = h_begin; h < h_end; ++h) {
      for (std::int64_t w = w_begin; w < w_end; ++w) sum += xp[h * p.W + w];
    }
    // With floor-mode output sizes no window reaches past the padding, so count_include_pad's divisor is
    // always the full window.
    y[i] = sum / static_cast<T>(p.kh * p.kw);
  }
}

template <class T>
__global__ void avg_pool_backward_kernel(Pool2dParams p, const T* __restrict__ dy, T* __restrict__ dx,
                                         std::int64_t total) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x) {
    const std::int64_t w = i % p.W, h = (i / p.W) % p.H, plane = i / (p.W * p.H);
    const Cover rows = covering(h, p.ph, p.kh, p.sh, p.P), cols = covering(w, p.pw, p.kw, p.sw, p.Q);
    const T* dyp = dy + plane * p.P * p.Q;
    T sum = 0;
    for (std::int64_t r = rows.begin; r < rows.end; ++r) {
      for (std::int64_t c = cols.begin; c < cols.end; ++c) sum += dyp[r * p.Q + c];
    }
    dx[i] = sum / static_cast<T>(p.kh * p.kw);
  }
}

/// The kernels rely on finalize()'s guarantees (positive sizes, padding at most half the kernel, P and Q
/// matching): re-derive them so unfinalized or edited parameters fail here instead of reading out of bounds.
void check_params(const Pool2dParams& p, const char* op) {
  Pool2dParams expected = p;
  expected.finalize(op);
  MINIDL_CHECK(expected.P == p.P && expected.Q == p.Q, ValueError, op, ": output size ", p.P, "x", p.Q,
               " in the parameters disagrees with the computed ", expected.P, "x", expected.Q,
               " (were the parameters finalized?)");
}

void check_pointers(bool all_set, const char* op) {
  MINIDL_CHECK(all_set, ValueError, op, ": a required device pointer is null");
}

std::int64_t input_size(const Pool2dParams& p) { return p.N * p.C * p.H * p.W; }
std::int64_t output_size(const Pool2dParams& p) { return p.N * p.C * p.P * p.Q; }

}  // namespace

template <class T>
void max_pool2d_forward(const Pool2dParams& p, const T* x, T* y, std::int64_t* indices) {
  check_params(p, "max_pool2d forward");
  check_pointers(x && y, "max_pool2d forward");
  const std::int64_t n = output_size(p);
  max_pool_forward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(p, x, y, indices, n);
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void max_pool2d_backward(const Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx) {
  check_params(p, "max_pool2d backward");
  check_pointers(dy && indices && dx, "max_pool2d backward");
  const std::int64_t n = input_size(p);
  max_pool_backward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(p, dy, indices, dx, n);
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void avg_pool2d_forward(const Pool2dParams& p, const T* x, T* y) {
  check_params(p, "avg_pool2d forward");
  check_pointers(x && y, "avg_pool2d forward");
  const std::int64_t n = output_size(p);
  avg_pool_forward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(p, x, y, n);
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void avg_pool2d_backward(const Pool2dParams& p, const T* dy, T* dx) {
  check_params(p, "avg_pool2d backward");
  check_pointers(dy && dx, "avg_pool2d backward");
  const std::int64_t n = input_size(p);
  avg_pool_backward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(p, dy, dx, n);
  MINIDL_CUDA_KERNEL_CHECK();
}

#define MINIDL_INSTANTIATE_POOL2D(T)                                                            \
  template void max_pool2d_forward<T>(const Pool2dParams&, const T*, T*, std::int64_t*);        \
  template void max_pool2d_backward<T>(const Pool2dParams&, const T*, const std::int64_t*, T*); \
  template void avg_pool2d_forward<T>(const Pool2dParams&, const T*, T*);                       \
  template void avg_pool2d_backward<T>(const Pool2dParams&, const T*, T*);
MINIDL_INSTANTIATE_POOL2D(float)
MINIDL_INSTANTIATE_POOL2D(double)
#undef MINIDL_INSTANTIATE_POOL2D

}  // namespace gpu
}  // namespace minidl
