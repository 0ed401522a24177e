// Direct convolution for short reductions (see conv2d_direct.h). The CPU reference these kernels are tested
// against is cpu::conv2d_* (tests/test_gpu_kernels.cpp, DirectConv*).
//
// Both kernels are templated on B, the number of taps rounded up to one of a few sizes, so every loop over the
// taps is unrolled at compile time and the taps live in registers. Each block first builds a table of the taps'
// offsets in shared memory (padding taps get an offset that fails every bounds check, so they gather zeros).
//
// Forward: one thread per output pixel gathers its taps once, then produces every output channel from them; the
// weights (zero-padded to B per channel) are read from shared memory as warp-wide broadcasts.
//
// Weight gradient: dW[k][t] = sum over all output pixels m of dY(m, k) · tap t of X at m. A block takes about
// kPixelsPerThread pixels per thread (at most kMaxSplits blocks per channel group) and a group of KG channels;
// each thread accumulates KG × B products in registers, the block reduces them in a fixed order into one partial
// per block, and sum_splits adds the blocks' partials in a fixed order, so results are bitwise repeatable.
#include "cuda/conv2d_direct.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "cuda/context.h"
#include "cuda/sum_splits.cuh"

namespace minidl {
namespace gpu {
namespace {

using kernels::Conv2dParams;

constexpr int kMaxTaps = 32;
constexpr int kMaxChannels = 128;  // K · B weights of double in shared memory: at most 32 KB
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kPixelsPerThread = 4;
constexpr int kMaxSplits = 256;  // blocks per channel group of the weight gradient: bounds its partial sums
constexpr int kOutOfRange = INT_MIN / 2;  // a tap row offset that fails every bounds check

/// The geometry both kernels index with: 32-bit offsets within an image, and the pixel count of the batch.
struct Geometry {
  int C, H, W, K, P, Q, PQ, NPQ;
  int RS, S, taps;  // taps = C·R·S
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};

Geometry geometry(const Conv2dParams& p) {
  Geometry g;
  g.C = static_cast<int>(p.C), g.H = static_cast<int>(p.H), g.W = static_cast<int>(p.W);
  g.K = static_cast<int>(p.K), g.P = static_cast<int>(p.P), g.Q = static_cast<int>(p.Q), g.PQ = g.P * g.Q;
  g.NPQ = static_cast<int>(p.N * p.P * p.Q);
  g.RS = static_cast<int>(p.R * p.S), g.S = static_cast<int>(p.S), g.taps = static_cast<int>(p.C) * g.RS;
  g.stride_h = static_cast<int>(p.stride_h), g.stride_w = static_cast<int>(p.stride_w);
  g.pad_h = static_cast<int>(p.pad_h), g.pad_w = static_cast<int>(p.pad_w);
  g.dil_h = static_cast<int>(p.dil_h), g.dil_w = static_cast<int>(p.dil_w);
  return g;
}

/// Tap t of a window whose top-left input element is (top, left): rows top + dr, columns left + ds, at offset
/// (top · W + left) + offset of the image.
struct Tap {
  int dr, ds, offset;
};

template <int B>
__device__ void build_taps(const Geometry& g, Tap* taps) {
  for (int t = threadIdx.x; t < B; t += blockDim.x) {
    Tap e{kOutOfRange, kOutOfRange, 0};
    if (t < g.taps) {
      const int c = t / g.RS, rs = t - c * g.RS, r = rs / g.S, s = rs - r * g.S;
      e.dr = r * g.dil_h, e.ds = s * g.dil_w;
      e.offset = (c * g.H + e.dr) * g.W + e.ds;
    }
    taps[t] = e;
  }
}

/// The B taps of the window at (top, left) of one image, zero outside the input and past g.taps.
template <class T, int B>
__device__ __forceinline__ void gather(const Geometry& g, const Tap* taps, const T* __restrict__ image, int top,
                                       int left, T (&v)[B]) {
  const int corner = top * g.W + left;
#pragma unroll
  for (int t = 0; t < B; ++t) {
    const Tap e = taps[t];
    const int h = top + e.dr, w = left + e.ds;
    v[t] = h >= 0 && h < g.H && w >= 0 && w < g.W ? image[corner + e.offset] : T(0);
  }
}

template <class T, int B>
__global__ void __launch_bounds__(kThreads) direct_forward_kernel(Geometry g, int blocks_per_image,
                                                                  const T* __restrict__ x, const T* __restrict__ w,
                                                                  const T* __restrict__ bias, kernels::Activation act,
                                                                  T* __restrict__ y) {
  __shared__ Tap taps[B];
  extern __shared__ __align__(16) unsigned char smem[];
  T* weights = reinterpret_cast<T*>(smem);  // K × B, zero past g.taps
  for (int i = threadIdx.x; i < g.K * B; i += kThreads) {
    const int k = i / B, t = i - k * B;
    weights[i] = t < g.taps ? w[k * g.taps + t] : T(0);
  }
  build_taps<B>(g, taps);
  __syncthreads();
  const int n = blockIdx.x / blocks_per_image;
  const int pixel = (blockIdx.x - n * blocks_per_image) * kThreads + threadIdx.x;
  if (pixel >= g.PQ) return;
  const int p = pixel / g.Q, q = pixel - p * g.Q;
  T v[B];
  gather<T, B>(g, taps, x + static_cast<std::int64_t>(n) * g.C * g.H * g.W, p * g.stride_h - g.pad_h,
               q * g.stride_w - g.pad_w, v);
  T* out = y + static_cast<std::int64_t>(n) * g.K * g.PQ + pixel;
  for (int k = 0; k < g.K; ++k) {
    const T* wk = weights + k * B;
    T acc = bias ? bias[k] : T(0);
#pragma unroll
    for (int t = 0; t < B; ++t) acc += v[t] * wk[t];
    out[k * g.PQ] = kernels::activate(act, acc);
  }
}

/// Channels per weight-gradient block: KG × B accumulators per thread, at most 64 floats or 32 doubles, so that
/// nothing spills with two blocks of 256 threads per multiprocessor up to 12 taps and one block beyond.
template <class T, int B>
struct ChannelGroup {
  static constexpr int value = sizeof(T) == 8 ? (B <= 12 ? 2 : 1) : (B <= 12 ? 4 : B <= 16 ? 3 : 2);
};

/// Block (x, y): every gridDim.x-th run of kThreads pixels from run x on, and channels [y · KG, ...); writes its
/// sums to partial[(x · K + k) · taps + t].
template <class T, int B>
__global__ void __launch_bounds__(kThreads, B <= 12 ? 2 : 1) direct_weight_grad_kernel(Geometry g, const T* __restrict__ x,
                                                                      const T* __restrict__ dy, T* __restrict__ partial) {
  constexpr int KG = ChannelGroup<T, B>::value;
  __shared__ Tap taps[B];
  __shared__ T warp_sums[kWarps][KG * B];
  build_taps<B>(g, taps);
  __syncthreads();
  const int k0 = blockIdx.y * KG;
  T acc[KG][B];
#pragma unroll
  for (int kk = 0; kk < KG; ++kk) {
#pragma unroll
    for (int t = 0; t < B; ++t) acc[kk][t] = T(0);
  }
  for (int m = blockIdx.x * kThreads + threadIdx.x; m < g.NPQ; m += gridDim.x * kThreads) {
    const int n = m / g.PQ, pixel = m - n * g.PQ, p = pixel / g.Q, q = pixel - p * g.Q;
    T v[B];
    gather<T, B>(g, taps, x + static_cast<std::int64_t>(n) * g.C * g.H * g.W, p * g.stride_h - g.pad_h,
                 q * g.stride_w - g.pad_w, v);
    const T* d = dy + (static_cast<std::int64_t>(n) * g.K + k0) * g.PQ + pixel;
#pragma unroll
    for (int kk = 0; kk < KG; ++kk) {
      const T dk = k0 + kk < g.K ? d[static_cast<std::int64_t>(kk) * g.PQ] : T(0);
#pragma unroll
      for (int t = 0; t < B; ++t) acc[kk][t] += dk * v[t];
    }
  }
  // Block sum in a fixed order: a shuffle tree per warp, then the warps' sums added in order.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int kk = 0; kk < KG; ++kk) {
#pragma unroll
    for (int t = 0; t < B; ++t) {
      T s = acc[kk][t];
      for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
      if (lane == 0) warp_sums[warp][kk * B + t] = s;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < KG * B; i += kThreads) {
    const int kk = i / B, t = i - kk * B;
    if (k0 + kk >= g.K || t >= g.taps) continue;
    T s = T(0);
    for (int wp = 0; wp < kWarps; ++wp) s += warp_sums[wp][i];
    partial[(static_cast<std::int64_t>(blockIdx.x) * g.K + k0 + kk) * g.taps + t] = s;
  }
}

/// Calls f(std::integral_constant<int, B>) with the tap count rounded up to a multiple of 4 among the sizes the
/// kernels are compiled for (4, 12, 16, 28, 32: 9 and 25/27 taps are the common first layers).
template <class F>
void with_tap_bucket(int taps, F f) {
  if (taps <= 4) return f(std::integral_constant<int, 4>{});
  if (taps <= 12) return f(std::integral_constant<int, 12>{});
  if (taps <= 16) return f(std::integral_constant<int, 16>{});
  if (taps <= 28) return f(std::integral_constant<int, 28>{});
  return f(std::integral_constant<int, 32>{});
}

bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

bool direct_conv_supports(const Conv2dParams& p) {
  return p.groups == 1 && p.C * p.R * p.S <= kMaxTaps && p.K <= kMaxChannels && fits_int(p.C * p.H * p.W) &&
         fits_int(p.K * p.P * p.Q) && fits_int(p.N * p.P * p.Q + kMaxSplits * kThreads) &&
         fits_int(p.N * ((p.P * p.Q + kThreads - 1) / kThreads));
}

template <class T>
void direct_conv2d_forward(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y, kernels::Activation act) {
  const Geometry g = geometry(p);
  const int blocks_per_image = (g.PQ + kThreads - 1) / kThreads;
  const std::int64_t blocks = p.N * blocks_per_image;
  if (blocks == 0) return;
  with_tap_bucket(g.taps, [&](auto bucket) {
    constexpr int B = decltype(bucket)::value;
    direct_forward_kernel<T, B><<<static_cast<unsigned>(blocks), kThreads, sizeof(T) * g.K * B, stream()>>>(
        g, blocks_per_image, x, w, bias, act, y);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void direct_conv2d_backward_weight(const Conv2dParams& p, const T* x, const T* dy, T* dw) {
  const Geometry g = geometry(p);
  const int outputs = g.K * g.taps;
  if (g.NPQ == 0) {
    MINIDL_CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(T) * static_cast<std::size_t>(outputs), stream()));
    return;
  }
  const int splits = std::min(kMaxSplits, (g.NPQ + kThreads * kPixelsPerThread - 1) / (kThreads * kPixelsPerThread));
  const Workspace scratch(splits == 1 ? 0 : sizeof(T) * static_cast<std::size_t>(outputs) * splits, "split partial sums");
  T* partial = splits == 1 ? dw : scratch.as<T>();
  with_tap_bucket(g.taps, [&](auto bucket) {
    constexpr int B = decltype(bucket)::value;
    constexpr int KG = ChannelGroup<T, B>::value;
    direct_weight_grad_kernel<T, B><<<dim3(splits, (g.K + KG - 1) / KG), kThreads, 0, stream()>>>(g, x, dy, partial);
  });
  MINIDL_CUDA_KERNEL_CHECK();
  if (splits > 1) sum_splits(partial, splits, outputs, dw);
}

#define MINIDL_INSTANTIATE_DIRECT_CONV2D(T)                                                      \
  template void direct_conv2d_forward<T>(const Conv2dParams&, const T*, const T*, const T*, T*, kernels::Activation); \
  template void direct_conv2d_backward_weight<T>(const Conv2dParams&, const T*, const T*, T*);
MINIDL_INSTANTIATE_DIRECT_CONV2D(float)
MINIDL_INSTANTIATE_DIRECT_CONV2D(double)
#undef MINIDL_INSTANTIATE_DIRECT_CONV2D

}  // namespace gpu
}  // namespace minidl
