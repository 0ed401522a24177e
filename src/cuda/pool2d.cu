// 2-d max and average pooling on the GPU (declared with the CPU version in kernels/backend.h). Own kernels
// rather than cuDNN's, because the max-pool backward works from the argmax indices the forward saved (as the
// CPU backend does) instead of re-reading x and y. Backward passes gather (every input element sums over the
// output windows that cover it) or, for tiling windows, write each window once: no atomics, deterministic.
// Windows two wide at stride two along w (the usual 2x2 pooling) have their own max-pool kernels, in which a
// thread takes neighbouring outputs with wide loads and stores: with one output and scalar accesses per
// thread, a warp's accesses were 8-byte pairs, and the passes ran at about two thirds of the copy bandwidth.
// bfloat16 / float16 are compared and summed in float32 (kernels::opmath_t) and stored rounded once.
#include "kernels/backend.h"
#include "kernels/convert.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/context.h"
#include "cuda/wide_access.cuh"

namespace minidl {
namespace gpu {
namespace {

using kernels::Pool2dParams;
constexpr int kThreads = 256;

/// The pooling geometry in the kernels' index type I: 32-bit when every index fits (the common case; 64-bit
/// division costs several times as much as 32-bit, and the pooling kernels are mostly index arithmetic),
/// 64-bit for tensors of 2^31 elements or more.
template <class I> struct Geometry {
  I H, W, P, Q, kh, kw, sh, sw, ph, pw;
  explicit Geometry(const Pool2dParams& p)
      : H(static_cast<I>(p.H)), W(static_cast<I>(p.W)), P(static_cast<I>(p.P)), Q(static_cast<I>(p.Q)),
        kh(static_cast<I>(p.kh)), kw(static_cast<I>(p.kw)), sh(static_cast<I>(p.sh)), sw(static_cast<I>(p.sw)),
        ph(static_cast<I>(p.ph)), pw(static_cast<I>(p.pw)) {}
  /// Windows that tile the input exactly (stride = kernel, no padding, nothing left over): every input element
  /// lies in exactly one window.
  bool tiles() const { return sh == kh && sw == kw && ph == 0 && pw == 0 && P * kh == H && Q * kw == W; }
};

#define POOL_GRID_STRIDE(i, n) \
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<I>(blockDim.x) * gridDim.x)

/// Output rows (or columns) whose window covers input row `pos` (padded coordinate pos + pad): the half-open
/// range [begin, end) of o with o * stride <= pos + pad < o * stride + kernel, clipped to [0, out).
template <class I> struct Cover {
  I begin, end;
};

template <class I> __device__ Cover<I> covering(I pos, I pad, I kernel, I stride, I out) {
  const I padded = pos + pad;
  const I begin = padded < kernel ? 0 : (padded - kernel) / stride + 1;
  const I end = min(padded / stride + 1, out);
  return {begin, end};
}

template <class T, class I>
__global__ void max_pool_forward_kernel(Geometry<I> g, const T* __restrict__ x, T* __restrict__ y,
                                        std::int64_t* __restrict__ indices, I total) {
  POOL_GRID_STRIDE(i, total) {
    const I q = i % g.Q, row = (i / g.Q) % g.P, plane = i / (g.Q * g.P);
    const T* xp = x + static_cast<std::int64_t>(plane) * g.H * g.W;
    // Pool2dParams::finalize() bounds the padding by half the kernel, so every window holds an input element.
    const I h0 = row * g.sh - g.ph, w0 = q * g.sw - g.pw;
    const I h_begin = max(h0, I{0}), h_end = min(h0 + g.kh, g.H);
    const I w_begin = max(w0, I{0}), w_end = min(w0 + g.kw, g.W);
    I arg = h_begin * g.W + w_begin;
    T best = xp[arg];
    for (I h = h_begin; h < h_end; ++h) {
      for (I w = w_begin; w < w_end; ++w) {
        const T v = xp[h * g.W + w];
        if (kernels::replaces_max<kernels::opmath_t<T>>(v, best)) {  // 16-bit data compared as float
          best = v;
          arg = h * g.W + w;
        }
      }
    }
    y[i] = best;
    if (indices) indices[i] = arg;
  }
}

/// max_pool_forward_kernel for windows two wide at stride two without padding along w (any height, stride
/// and padding along h): thread t takes the V outputs t * V ... of one output row. Their windows cover 2V
/// consecutive input elements of each row, read with one or two wide loads, and their maxima and indices go
/// out with wide stores. The host checks that Q % V == 0 (a thread's outputs share a row) and that every
/// access is aligned to its width.
template <class T, class I, int V>
__global__ void max_pool_forward_pairs_kernel(Geometry<I> g, const T* __restrict__ x, T* __restrict__ y,
                                              std::int64_t* __restrict__ indices, I groups) {
  POOL_GRID_STRIDE(t, groups) {
    const I i = t * V, rows = i / g.Q;  // rows: output rows before this one, in all planes
    const I q = i - rows * g.Q, row = rows % g.P, plane = rows / g.P;
    const I w0 = 2 * q;
    const T* xp = x + static_cast<std::int64_t>(plane) * g.H * g.W + w0;
    const I h0 = row * g.sh - g.ph;
    const I h_begin = max(h0, I{0}), h_end = min(h0 + g.kh, g.H);
    // Each row's load is issued before the previous row is compared, so that a thread has two loads in flight
    // (a window has two rows, usually) rather than one.
    Wide<T, 2 * V> next = load_wide<2 * V>(xp + h_begin * g.W);
    // Seeded with each window's first element, as in the general kernel (whose loop compares it with itself,
    // to the same effect).
    Wide<T, V> best;
    I arg[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      best.v[j] = next.v[2 * j];
      arg[j] = h_begin * g.W + w0 + 2 * j;
    }
    for (I h = h_begin; h < h_end; ++h) {
      T v[2 * V];
#pragma unroll
      for (int k = 0; k < 2 * V; ++k) v[k] = next.v[k];
      if (h + 1 < h_end) next = load_wide<2 * V>(xp + (h + 1) * g.W);
#pragma unroll
      for (int k = 0; k < 2 * V; ++k) {
        // The general kernel's rule: the first maximum, or the last NaN (| rather than ||: selects, not
        // branches).
        const bool take = (v[k] > best.v[k / 2]) | static_cast<bool>(kernels::m_isnan<kernels::opmath_t<T>>(v[k]));
        best.v[k / 2] = take ? v[k] : best.v[k / 2];
        arg[k / 2] = take ? h * g.W + w0 + k : arg[k / 2];
      }
    }
    store_wide(y + i, best);
    if (indices) {
      Wide<std::int64_t, V> wide;
#pragma unroll
      for (int j = 0; j < V; ++j) wide.v[j] = arg[j];
      store_wide(indices + i, wide);
    }
  }
}

// General case: each input element gathers the gradients of the windows whose maximum it was (no atomics, so
// the result is deterministic even where windows overlap).
template <class T, class I>
__global__ void max_pool_backward_kernel(Geometry<I> g, const T* __restrict__ dy,
                                         const std::int64_t* __restrict__ indices, T* __restrict__ dx, I total) {
  POOL_GRID_STRIDE(i, total) {
    const I w = i % g.W, h = (i / g.W) % g.H, plane = i / (g.W * g.H);
    const Cover<I> rows = covering(h, g.ph, g.kh, g.sh, g.P), cols = covering(w, g.pw, g.kw, g.sw, g.Q);
    const I self = h * g.W + w, base = plane * g.P * g.Q;
    kernels::opmath_t<T> sum = 0;
    for (I r = rows.begin; r < rows.end; ++r) {
      for (I c = cols.begin; c < cols.end; ++c) {
        const I o = base + r * g.Q + c;
        if (indices[o] == self) sum += static_cast<kernels::opmath_t<T>>(dy[o]);
      }
    }
    dx[i] = static_cast<T>(sum);
  }
}

// Tiling windows: each output element writes its own window (the gradient at the maximum, zero elsewhere), so
// every index and gradient is read once and no input element needs a search.
template <class T, class I>
__global__ void max_pool_backward_tiled_kernel(Geometry<I> g, const T* __restrict__ dy,
                                               const std::int64_t* __restrict__ indices, T* __restrict__ dx,
                                               I total) {
  POOL_GRID_STRIDE(o, total) {
    const I q = o % g.Q, row = (o / g.Q) % g.P, plane = o / (g.Q * g.P);
    const I arg = static_cast<I>(indices[o]);
    const T grad = dy[o];
    T* dxp = dx + static_cast<std::int64_t>(plane) * g.H * g.W;
    for (I h = row * g.kh; h < (row + 1) * g.kh; ++h) {
      for (I w = q * g.kw; w < (q + 1) * g.kw; ++w) dxp[h * g.W + w] = h * g.W + w == arg ? grad : T(0);
    }
  }
}

/// max_pool_backward_tiled_kernel for windows two wide (tiling, so stride two and no padding): thread t takes
/// the V outputs t * V ... of one output row, reads their indices and gradients with wide loads and writes
/// the 2V elements their windows cover in each input row with one or two wide stores. The host checks
/// Q % V == 0 and the alignment, as for max_pool_forward_pairs_kernel.
template <class T, class I, int V>
__global__ void max_pool_backward_tiled_pairs_kernel(Geometry<I> g, const T* __restrict__ dy,
                                                     const std::int64_t* __restrict__ indices, T* __restrict__ dx,
                                                     I groups) {
  POOL_GRID_STRIDE(t, groups) {
    const I o = t * V, rows = o / g.Q;  // rows: output rows before this one, in all planes
    const I q = o - rows * g.Q, row = rows % g.P, plane = rows / g.P;
    const I w0 = 2 * q;
    const Wide<std::int64_t, V> arg = load_wide<V>(indices + o);
    const Wide<T, V> grad = load_wide<V>(dy + o);
    T* dxp = dx + static_cast<std::int64_t>(plane) * g.H * g.W + w0;
    for (I h = row * g.kh; h < (row + 1) * g.kh; ++h) {
      Wide<T, 2 * V> v;
#pragma unroll
      for (int j = 0; j < V; ++j) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          v.v[2 * j + k] = h * g.W + w0 + 2 * j + k == static_cast<I>(arg.v[j]) ? grad.v[j] : T(0);
        }
      }
      store_wide(dxp + h * g.W, v);
    }
  }
}

template <class T, class I>
__global__ void avg_pool_forward_kernel(Geometry<I> g, const T* __restrict__ x, T* __restrict__ y, I total) {
  POOL_GRID_STRIDE(i, total) {
    const I q = i % g.Q, row = (i / g.Q) % g.P, plane = i / (g.Q * g.P);
    const T* xp = x + static_cast<std::int64_t>(plane) * g.H * g.W;
    const I h0 = row * g.sh - g.ph, w0 = q * g.sw - g.pw;
    const I h_begin = max(h0, I{0}), h_end = min(h0 + g.kh, g.H);
    const I w_begin = max(w0, I{0}), w_end = min(w0 + g.kw, g.W);
    using A = kernels::opmath_t<T>;
    A sum = 0;
    for (I h = h_begin; h < h_end; ++h) {
      for (I w = w_begin; w < w_end; ++w) sum += static_cast<A>(xp[h * g.W + w]);
    }
    // With floor-mode output sizes no window reaches past the padding, so count_include_pad's divisor is
    // always the full window.
    y[i] = static_cast<T>(sum / static_cast<A>(g.kh * g.kw));
  }
}

template <class T, class I>
__global__ void avg_pool_backward_kernel(Geometry<I> g, const T* __restrict__ dy, T* __restrict__ dx, I total) {
  POOL_GRID_STRIDE(i, total) {
    const I w = i % g.W, h = (i / g.W) % g.H, plane = i / (g.W * g.H);
    const Cover<I> rows = covering(h, g.ph, g.kh, g.sh, g.P), cols = covering(w, g.pw, g.kw, g.sw, g.Q);
    const T* dyp = dy + static_cast<std::int64_t>(plane) * g.P * g.Q;
    using A = kernels::opmath_t<T>;
    A sum = 0;
    for (I r = rows.begin; r < rows.end; ++r) {
      for (I c = cols.begin; c < cols.end; ++c) sum += static_cast<A>(dyp[r * g.Q + c]);
    }
    dx[i] = static_cast<T>(sum / static_cast<A>(g.kh * g.kw));
  }
}

#undef POOL_GRID_STRIDE

/// Runs `launch(geometry, total)` with 32-bit indices when the input, the output and the grid-stride loop's
/// last step all stay below 2^31, else with 64-bit ones.
template <class Launch> void with_index_type(const Pool2dParams& p, std::int64_t total, Launch launch) {
  const std::int64_t largest = std::max({p.N * p.C * p.H * p.W, p.N * p.C * p.P * p.Q, total});
  const std::int64_t step = static_cast<std::int64_t>(blocks_for(total, kThreads)) * kThreads;
  if (largest + step < (std::int64_t{1} << 31)) {
    launch(Geometry<std::int32_t>(p), static_cast<std::int32_t>(total));
  } else {
    launch(Geometry<std::int64_t>(p), total);
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

/// Whether the pairs kernels can run with V outputs per thread: windows two wide at stride two without padding
/// along w, Q a multiple of V, and every wide access aligned: `plane` is x or dx (2V elements per access, at
/// row starts W elements apart), `out` y or dy (V elements), `indices` (V of them; null passes).
template <int V, class T>
bool pairs_fit(const Pool2dParams& p, const T* plane, const T* out, const std::int64_t* indices) {
  constexpr int kPlaneBytes = access_bytes<T, 2 * V>();
  return p.kw == 2 && p.sw == 2 && p.pw == 0 && p.Q % V == 0 && p.W * sizeof(T) % kPlaneBytes == 0 &&
         is_aligned(plane, kPlaneBytes) && is_aligned(out, access_bytes<T, V>()) &&
         is_aligned(indices, access_bytes<std::int64_t, V>());
}

/// Calls `launch(std::integral_constant<int, V>)` with the most outputs per thread, V = 2 or 1, that
/// pairs_fit() allows; returns false (launching nothing) when neither fits.
template <class T, class Launch>
bool with_pairs(const Pool2dParams& p, const T* plane, const T* out, const std::int64_t* indices, Launch launch) {
  if (pairs_fit<2>(p, plane, out, indices)) {
    launch(std::integral_constant<int, 2>{});
  } else if (pairs_fit<1>(p, plane, out, indices)) {
    launch(std::integral_constant<int, 1>{});
  } else {
    return false;
  }
  return true;
}

}  // namespace

template <class T>
void max_pool2d_forward(const Pool2dParams& p, const T* x, T* y, std::int64_t* indices) {
  check_params(p, "max_pool2d forward");
  check_pointers(x && y, "max_pool2d forward");
  const std::int64_t n = output_size(p);
  with_index_type(p, n, [&](auto g, auto total) {
    using I = decltype(total);
    const bool paired = with_pairs(p, x, y, indices, [&](auto v) {
      const std::int64_t groups = n / v;
      max_pool_forward_pairs_kernel<T, I, v><<<blocks_for(groups, kThreads), kThreads, 0, stream()>>>(
          g, x, y, indices, static_cast<I>(groups));
    });
    if (!paired) {
      max_pool_forward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(g, x, y, indices, total);
    }
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void max_pool2d_backward(const Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx) {
  check_params(p, "max_pool2d backward");
  check_pointers(dy && indices && dx, "max_pool2d backward");
  const std::int64_t n = input_size(p);
  with_index_type(p, n, [&](auto g, auto total) {
    using I = decltype(total);
    if (g.tiles()) {
      const std::int64_t outputs = output_size(p);
      const bool paired = with_pairs(p, dx, dy, indices, [&](auto v) {
        const std::int64_t groups = outputs / v;
        max_pool_backward_tiled_pairs_kernel<T, I, v><<<blocks_for(groups, kThreads), kThreads, 0, stream()>>>(
            g, dy, indices, dx, static_cast<I>(groups));
      });
      if (!paired) {
        max_pool_backward_tiled_kernel<T><<<blocks_for(outputs, kThreads), kThreads, 0, stream()>>>(
            g, dy, indices, dx, static_cast<I>(outputs));
      }
    } else {
      max_pool_backward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(g, dy, indices, dx, total);
    }
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void avg_pool2d_forward(const Pool2dParams& p, const T* x, T* y) {
  check_params(p, "avg_pool2d forward");
  check_pointers(x && y, "avg_pool2d forward");
  const std::int64_t n = output_size(p);
  with_index_type(p, n, [&](auto g, auto total) {
    avg_pool_forward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(g, x, y, total);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void avg_pool2d_backward(const Pool2dParams& p, const T* dy, T* dx) {
  check_params(p, "avg_pool2d backward");
  check_pointers(dy && dx, "avg_pool2d backward");
  const std::int64_t n = input_size(p);
  with_index_type(p, n, [&](auto g, auto total) {
    avg_pool_backward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(g, dy, dx, total);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

#define MINIDL_INSTANTIATE_POOL2D(T)                                                            \
  template void max_pool2d_forward<T>(const Pool2dParams&, const T*, T*, std::int64_t*);        \
  template void max_pool2d_backward<T>(const Pool2dParams&, const T*, const std::int64_t*, T*); \
  template void avg_pool2d_forward<T>(const Pool2dParams&, const T*, T*);                       \
  template void avg_pool2d_backward<T>(const Pool2dParams&, const T*, T*);
MINIDL_INSTANTIATE_POOL2D(float)
MINIDL_INSTANTIATE_POOL2D(double)
MINIDL_INSTANTIATE_POOL2D(BFloat16)
MINIDL_INSTANTIATE_POOL2D(Half)
#undef MINIDL_INSTANTIATE_POOL2D

}  // namespace gpu
}  // namespace minidl
