// Direct convolution for short reductions (see conv2d_direct.h). The CPU reference these kernels are tested
// against is cpu::conv2d_* (tests/test_gpu_kernels.cpp, DirectConv*).
//
// Forward: one thread per output pixel gathers its taps (at most kMaxTaps) into registers once, then produces
// every output channel from them; the weights are read as warp-wide broadcasts. Blocks never straddle images,
// so only an image's base offset needs 64 bits.
//
// Weight gradient: dW[k][t] = sum over images and pixels of dY(n, k, pixel) · tap t of X at that pixel, and
// dbias[k] = the same sum of dY alone. A block owns one output channel and a chunk of images; each thread
// accumulates taps + 1 sums in registers, the block reduces them in a fixed order, and a second kernel adds
// the chunks in order, so results are bitwise repeatable. With no taps it is the bias gradient alone.
#include "cuda/conv2d_direct.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "cuda/context.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::Conv2dParams;

constexpr int kMaxTaps = 32;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Pixels per thread the weight gradient aims for: enough to amortise the block reduction, few enough that
// the example's batch-64 conv1 still spreads over about 350 blocks.
constexpr int kPixelsPerThread = 16;

/// The geometry both kernels index with: 32-bit within an image.
struct Geometry {
  int C, H, W, K, P, Q, PQ;
  int R, S, RS, taps;  // taps = C·R·S
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};

Geometry geometry(const Conv2dParams& p, bool with_taps) {
  Geometry g;
  g.C = static_cast<int>(p.C), g.H = static_cast<int>(p.H), g.W = static_cast<int>(p.W);
  g.K = static_cast<int>(p.K), g.P = static_cast<int>(p.P), g.Q = static_cast<int>(p.Q), g.PQ = g.P * g.Q;
  g.R = static_cast<int>(p.R), g.S = static_cast<int>(p.S), g.RS = g.R * g.S;
  g.taps = with_taps ? g.C * g.RS : 0;
  g.stride_h = static_cast<int>(p.stride_h), g.stride_w = static_cast<int>(p.stride_w);
  g.pad_h = static_cast<int>(p.pad_h), g.pad_w = static_cast<int>(p.pad_w);
  g.dil_h = static_cast<int>(p.dil_h), g.dil_w = static_cast<int>(p.dil_w);
  return g;
}

/// The taps of output pixel (p, q) of one image of x (C·H·W elements at `image`), zero where the window
/// leaves the input. Fully unrolled, so `tap` stays in registers; taps past g.taps stay zero.
template <class T>
__device__ __forceinline__ void gather_taps(const Geometry& g, const T* __restrict__ image, int p, int q,
                                            T (&tap)[kMaxTaps]) {
  const int top = p * g.stride_h - g.pad_h, left = q * g.stride_w - g.pad_w;
#pragma unroll
  for (int t = 0; t < kMaxTaps; ++t) {
    tap[t] = T(0);
    if (t < g.taps) {
      const int c = t / g.RS, rs = t - c * g.RS, r = rs / g.S, s = rs - r * g.S;
      const int h = top + r * g.dil_h, w = left + s * g.dil_w;
      if (h >= 0 && h < g.H && w >= 0 && w < g.W) tap[t] = image[(c * g.H + h) * g.W + w];
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) direct_forward_kernel(Geometry g, int blocks_per_image,
                                                                  const T* __restrict__ x, const T* __restrict__ w,
                                                                  const T* __restrict__ bias, T* __restrict__ y) {
  const int n = blockIdx.x / blocks_per_image;
  const int pixel = (blockIdx.x - n * blocks_per_image) * kThreads + threadIdx.x;
  if (pixel >= g.PQ) return;
  const int p = pixel / g.Q, q = pixel - p * g.Q;
  T tap[kMaxTaps];
  gather_taps(g, x + static_cast<std::int64_t>(n) * g.C * g.H * g.W, p, q, tap);
  T* out = y + static_cast<std::int64_t>(n) * g.K * g.PQ + pixel;
  for (int k = 0; k < g.K; ++k) {
    const T* wk = w + k * g.taps;
    T acc = bias ? bias[k] : T(0);
#pragma unroll
    for (int t = 0; t < kMaxTaps; ++t) {
      if (t < g.taps) acc += tap[t] * wk[t];
    }
    out[k * g.PQ] = acc;
  }
}

/// Where sum `t` of channel k goes: taps 0..taps-1 are dW[k][t], tap `taps` is dbias[k].
template <class T>
__device__ __forceinline__ void store_sum(const Geometry& g, int k, int t, T value, T* dw, T* dbias) {
  if (t < g.taps) {
    dw[k * g.taps + t] = value;
  } else if (dbias) {
    dbias[k] = value;
  }
}

/// Block (k, chunk): the taps + 1 sums of channel k over images [chunk · images_per_chunk, ...). With one
/// chunk it writes dw/dbias, else partial[(chunk · K + k) · (taps + 1) + t].
template <class T>
__global__ void __launch_bounds__(kThreads) direct_weight_grad_kernel(Geometry g, int N, int images_per_chunk,
                                                                      const T* __restrict__ x,
                                                                      const T* __restrict__ dy, T* partial, T* dw,
                                                                      T* dbias) {
  const int k = blockIdx.x, chunk = blockIdx.y;
  const int first = chunk * images_per_chunk, last = min(first + images_per_chunk, N);
  T acc[kMaxTaps + 1];
#pragma unroll
  for (int t = 0; t <= kMaxTaps; ++t) acc[t] = T(0);
  for (int n = first; n < last; ++n) {
    const T* image = x + static_cast<std::int64_t>(n) * g.C * g.H * g.W;
    const T* dy_plane = dy + (static_cast<std::int64_t>(n) * g.K + k) * g.PQ;
    for (int pixel = threadIdx.x; pixel < g.PQ; pixel += kThreads) {
      const T d = dy_plane[pixel];
      acc[kMaxTaps] += d;
      if (g.taps == 0) continue;
      const int p = pixel / g.Q, q = pixel - p * g.Q;
      T tap[kMaxTaps];
      gather_taps(g, image, p, q, tap);
#pragma unroll
      for (int t = 0; t < kMaxTaps; ++t) acc[t] += d * tap[t];
    }
  }
  // Block reduction in a fixed order: a shuffle tree per warp, then the warps' sums added in order.
  __shared__ T warp_sums[kWarps][kMaxTaps + 1];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int t = 0; t <= kMaxTaps; ++t) {
    T v = acc[t];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[warp][t] = v;
  }
  __syncthreads();
  if (threadIdx.x > g.taps) return;
  const int t = threadIdx.x == g.taps ? kMaxTaps : threadIdx.x;  // sum slot: the bias sum lives at kMaxTaps
  T total = T(0);
  for (int i = 0; i < kWarps; ++i) total += warp_sums[i][t];
  if (gridDim.y == 1) {
    store_sum(g, k, threadIdx.x, total, dw, dbias);
  } else {
    partial[(static_cast<std::int64_t>(chunk) * g.K + k) * (g.taps + 1) + threadIdx.x] = total;
  }
}

/// Adds the chunks' partial sums in chunk order: one thread per (k, t).
template <class T>
__global__ void sum_chunks_kernel(Geometry g, int chunks, const T* __restrict__ partial, T* dw, T* dbias) {
  const int sums = g.taps + 1;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= g.K * sums) return;
  T total = T(0);
  for (int c = 0; c < chunks; ++c) total += partial[static_cast<std::int64_t>(c) * g.K * sums + i];
  store_sum(g, i / sums, i % sums, total, dw, dbias);
}

bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

template <class T>
void launch_weight_grad(const Conv2dParams& p, bool with_taps, const T* x, const T* dy, T* dw, T* dbias) {
  const Geometry g = geometry(p, with_taps);
  const int N = static_cast<int>(p.N);
  // Chunks of whole images, about kPixelsPerThread pixels per thread each, and at most kMaxChunks of them
  // (the grid's y limit).
  constexpr std::int64_t kMaxChunks = 65535;
  const std::int64_t images_per_chunk =
      std::max({std::int64_t{1}, std::min<std::int64_t>(N, kPixelsPerThread * kThreads / std::max(g.PQ, 1)),
                (N + kMaxChunks - 1) / kMaxChunks});
  const int chunks = static_cast<int>((N + images_per_chunk - 1) / images_per_chunk);
  T* partial = nullptr;
  if (chunks > 1) {
    partial = static_cast<T*>(workspace(sizeof(T) * static_cast<std::size_t>(chunks) * g.K * (g.taps + 1)));
  }
  direct_weight_grad_kernel<T><<<dim3(g.K, chunks), kThreads, 0, stream()>>>(
      g, N, static_cast<int>(images_per_chunk), x, dy, partial, dw, dbias);
  MINIDL_CUDA_KERNEL_CHECK();
  if (chunks > 1) {
    const int outputs = g.K * (g.taps + 1);
    sum_chunks_kernel<T><<<(outputs + kThreads - 1) / kThreads, kThreads, 0, stream()>>>(g, chunks, partial, dw, dbias);
    MINIDL_CUDA_KERNEL_CHECK();
  }
}

}  // namespace

bool direct_conv_supports(const Conv2dParams& p) {
  return p.groups == 1 && p.C * p.R * p.S <= kMaxTaps && fits_int(p.C * p.H * p.W) && fits_int(p.K * p.P * p.Q) &&
         fits_int(p.N * ((p.P * p.Q + kThreads - 1) / kThreads)) && fits_int(p.K * (kMaxTaps + 1));
}

bool conv2d_bias_grad_supports(const Conv2dParams& p) {
  return fits_int(p.K * p.P * p.Q) && fits_int(p.K * (kMaxTaps + 1));
}

template <class T>
void direct_conv2d_forward(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y) {
  const Geometry g = geometry(p, true);
  const int blocks_per_image = (g.PQ + kThreads - 1) / kThreads;
  const std::int64_t blocks = p.N * blocks_per_image;
  if (blocks == 0) return;
  direct_forward_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream()>>>(g, blocks_per_image, x, w,
                                                                                     bias, y);
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void direct_conv2d_backward_weight(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* dbias) {
  launch_weight_grad(p, true, x, dy, dw, dbias);
}

template <class T>
void conv2d_bias_grad(const Conv2dParams& p, const T* dy, T* dbias) {
  launch_weight_grad<T>(p, false, nullptr, dy, nullptr, dbias);
}

#define MINIDL_INSTANTIATE_DIRECT_CONV2D(T)                                                                   \
  template void direct_conv2d_forward<T>(const Conv2dParams&, const T*, const T*, const T*, T*);              \
  template void direct_conv2d_backward_weight<T>(const Conv2dParams&, const T*, const T*, T*, T*);            \
  template void conv2d_bias_grad<T>(const Conv2dParams&, const T*, T*);
MINIDL_INSTANTIATE_DIRECT_CONV2D(float)
MINIDL_INSTANTIATE_DIRECT_CONV2D(double)
#undef MINIDL_INSTANTIATE_DIRECT_CONV2D

}  // namespace gpu
}  // namespace minidl
