// CUDA implementations of the primitive kernels (see kernels/backend.h). Elementwise math comes from the
// functors in kernels/elementwise.h, shared with the CPU backend; everything runs on gpu::stream().
#include <curand_kernel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/generator.h"
#include "cuda/activation.h"
#include "cuda/context.h"
#include "cuda/matmul.h"
#include "cuda/reduce.h"
#include "cuda/wide_access.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "minidl/cuda.h"

namespace minidl {
namespace gpu {
namespace {

using i64 = std::int64_t;
constexpr int kThreads = 256;
// Every index below is 64-bit and every loop strides over the grid (rows: over blocks), so tensors of more than
// 2^31 elements work and the grid never exceeds the launch limits.
constexpr i64 kMaxRowBlocks = 65535LL * 8;
// Sum reductions over more than this many elements (per row, or per column of a strided view) first sum
// fixed chunks into a buffer and then reduce the chunk sums, recursively. A full reduction of a large tensor
// thus uses the whole device rather than one block, and every value passes through short addition chains
// (about kRowChunk / kThreads + log2 kThreads terms per level), which keeps the float rounding error small.
// The chunks depend only on the shape, so results stay bitwise reproducible.
constexpr i64 kRowChunk = i64{1} << 16;
constexpr i64 kColumnChunk = 1024;

unsigned int row_blocks(i64 rows) { return static_cast<unsigned int>(std::max<i64>(1, std::min(rows, kMaxRowBlocks))); }

#define GRID_STRIDE(i, n) for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

/// 16 bytes of T (4 floats, 2 doubles or int64s), the widest single global access: memory-bound kernels move
/// packs, by load_wide and store_wide, when their pointers are 16-byte aligned.
template <class T> using Pack = Wide<T, 16 / sizeof(T)>;

/// Element j of the result is f(element j of each input): the same per-element call as the scalar loop.
template <class T, class F, class... P> __device__ Pack<T> map_pack(const F& f, const P&... in) {
  Pack<T> r;
#pragma unroll
  for (int j = 0; j < Pack<T>::size; ++j) r.v[j] = f(in.v[j]...);
  return r;
}

/// y[i] = f(in[i]...) (no inputs: fill). The first `packs` packs go by 16-byte accesses (the host passes 0 when a
/// pointer is not 16-byte aligned: a view with an offset), the rest element by element. y may alias an input.
template <class T, class F, class... In> __global__ void map_kernel(T* y, i64 n, i64 packs, F f, const In*... in) {
  constexpr int k = Pack<T>::size;
  GRID_STRIDE(p, packs) store_wide(y + p * k, map_pack<T>(f, load_wide<k>(in + p * k)...));
  const i64 rest = packs * k;
  GRID_STRIDE(i, n - rest) y[rest + i] = f(in[rest + i]...);
}

template <class T, class F, class... In> void launch_map(T* y, i64 n, const F& f, const In*... in) {
  if (n == 0) return;
  const i64 packs = is_aligned(y, 16) && (is_aligned(in, 16) && ...) ? n / Pack<T>::size : 0;
  const i64 rest = n - packs * Pack<T>::size;
  map_kernel<<<blocks_for(std::max(packs, rest)), kThreads, 0, stream()>>>(y, n, packs, f, in...);
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T> struct Constant {
  T v;
  __device__ T operator()() const { return v; }
};

template <class S, class D> __global__ void cast_kernel(const S* in, D* out, i64 n) {
  GRID_STRIDE(i, n) out[i] = static_cast<D>(in[i]);
}

template <class T> __global__ void arange_kernel(T* out, i64 n, double start, double step) {
  GRID_STRIDE(i, n) out[i] = static_cast<T>(start + step * static_cast<double>(i));
}

// Random numbers: one Philox draw gives 128 bits, a pack of T (4 floats, or 2 doubles of 64 bits each). Element
// group g, pack g of the output, draws from Philox subsequence g at the reserved offset, so the values do not
// depend on the launch configuration.

/// Group g of p (m elements, m < the pack size only at the end): one 16-byte access when `whole`, else m scalars.
template <class T> __device__ Pack<T> load_group(const T* p, i64 g, int m, bool whole) {
  constexpr int k = Pack<T>::size;
  if (whole) return load_wide<k>(p + g * k);
  Pack<T> r{};
#pragma unroll
  for (int j = 0; j < k; ++j) {
    if (j < m) r.v[j] = p[g * k + j];
  }
  return r;
}
template <class T> __device__ void store_group(T* p, i64 g, const Pack<T>& r, int m, bool whole) {
  constexpr int k = Pack<T>::size;
  if (whole) return store_wide(p + g * k, r);
#pragma unroll
  for (int j = 0; j < k; ++j) {
    if (j < m) p[g * k + j] = r.v[j];
  }
}

/// Where random_kernel puts the m draws of group g: into `out` (rand, randn), or as a dropout mask with the
/// masked input. `packed`: every pointer is 16-byte aligned, so whole groups move as packs.
template <class T> struct StoreDraw {
  T* out;
  bool packed;
  __device__ void operator()(i64 g, const Pack<T>& r, int m) const {
    store_group(out, g, r, m, packed && m == Pack<T>::size);
  }
};
template <class T> struct StoreDropout {
  const T* x;
  T* out;
  T* mask;
  kernels::DropoutMask<T> rule;
  bool packed;
  __device__ void operator()(i64 g, const Pack<T>& r, int m) const {
    const bool whole = packed && m == Pack<T>::size;
    const Pack<T> xs = load_group(x, g, m, whole);  // before the stores: out may be x
    Pack<T> ms, ys;
#pragma unroll
    for (int j = 0; j < Pack<T>::size; ++j) {
      ms.v[j] = rule(r.v[j]);
      ys.v[j] = xs.v[j] * ms.v[j];
    }
    store_group(mask, g, ms, m, whole);
    store_group(out, g, ys, m, whole);
  }
};

/// `unit`: uniform on [0, 1) (a = 0, b = 1, dropout's draws). There 1 - u computed in float equals the double
/// expression rounded to float for every float u in (0, 1] (checked exhaustively on the host: where 1 - u is not
/// exact in double, u < 2^-30, both round to 1), so the float path skips the conversions to and from double with
/// bitwise the same values; for double the two are the same expression.
template <class T, class Store>
__global__ void random_kernel(i64 n, unsigned long long seed, unsigned long long offset, const std::uint64_t* offset_base,
                              bool normal, bool unit, double a, double b, T top, Store store) {
  constexpr int k = Pack<T>::size;
  static_assert(k == 4 || k == 2, "random_kernel: float or double");
  if (offset_base) offset += *offset_base;  // set inside a captured graph: fresh numbers every replay
  const i64 groups = (n + k - 1) / k;
  GRID_STRIDE(g, groups) {
    curandStatePhilox4_32_10_t st;
    curand_init(seed, static_cast<unsigned long long>(g), offset, &st);
    Pack<T> u;
    if constexpr (k == 4) {
      const float4 r = normal ? curand_normal4(&st) : curand_uniform4(&st);
      u.v[0] = r.x; u.v[1] = r.y; u.v[2] = r.z; u.v[3] = r.w;
    } else {
      const double2 r = normal ? curand_normal2_double(&st) : curand_uniform2_double(&st);
      u.v[0] = r.x; u.v[1] = r.y;
    }
    Pack<T> r;
#pragma unroll
    for (int j = 0; j < k; ++j) {
      // cuRAND's uniforms lie in (0, 1]; 1 - u maps them onto [0, 1) like the CPU generator. Rounding to T can
      // still carry a value just below b up to b, so uniform values are capped at `top`, the largest T below b.
      const double v = static_cast<double>(u.v[j]);
      const T x = unit ? T(1) - u.v[j] : static_cast<T>(normal ? a + b * v : a + (b - a) * (1.0 - v));
      r.v[j] = normal || x <= top ? x : top;
    }
    store(g, r, static_cast<int>(min(static_cast<i64>(k), n - g * k)));
  }
}

template <class T, class F>
__global__ void binary_broadcast_kernel(const T* a, const T* b, T* y, i64 n, kernels::BroadcastIndex bi, F f) {
  GRID_STRIDE(i, n) {
    i64 oa, ob;
    bi.offsets(i, oa, ob);
    y[i] = f(a[oa], b[ob]);
  }
}

/// Deterministic block-wide sum (fixed tree order).
template <class T> __device__ T block_sum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();
  return r;
}

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

// Sum over contiguous rows (inner == 1) in segments of `len`: out[r * segs + s] = sum of x[r, s*len .. (s+1)*len),
// one block per segment. For long rows (a full reduction): the whole block shares one segment.
template <class T> __global__ void sum_rows_kernel(const T* x, T* out, i64 rows, i64 n, i64 len, i64 segs) {
  extern __shared__ unsigned char smem_raw[];
  T* shared = reinterpret_cast<T*>(smem_raw);
  for (i64 b = blockIdx.x; b < rows * segs; b += gridDim.x) {  // uniform per block: block_sum may sync
    const i64 s = b % segs;
    const T* seg = x + (b / segs) * n + s * len;
    const i64 m = min(len, n - s * len);
    T acc = 0;
    for (i64 r = threadIdx.x; r < m; r += blockDim.x) acc += seg[r];
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0) out[b] = acc;
  }
}

/// Deterministic warp-wide sum (fixed butterfly order); every lane gets the result.
template <class T> __device__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

constexpr int kWarp = 32;
// Many short rows (the (N*C, H*W) rows of a convolution's bias gradient): a block per row would leave most of
// its threads idle and pay a block-wide tree per row, so each warp takes one row.
constexpr i64 kWarpRowMax = 4096;

template <class T> __global__ void sum_rows_warp_kernel(const T* x, T* out, i64 rows, i64 n, i64 len, i64 segs) {
  const int lane = threadIdx.x % kWarp;
  const i64 warps = static_cast<i64>(gridDim.x) * (blockDim.x / kWarp);
  for (i64 b = (blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x) / kWarp; b < rows * segs; b += warps) {
    const i64 s = b % segs;  // b is the same on every lane of a warp, so the shuffle below is never divergent
    const T* seg = x + (b / segs) * n + s * len;
    const i64 m = min(len, n - s * len);
    T acc = 0;
    for (i64 r = lane; r < m; r += kWarp) acc += seg[r];
    acc = warp_sum(acc);
    if (lane == 0) out[b] = acc;
  }
}

// Sum over a strided middle dim in segments of `len`: out (outer, segs, inner). A block covers 32 neighbouring
// columns of one segment: its 32 lanes read along inner (coalesced) and its kColumnRows rows of threads split
// the segment's rows, then combine in a fixed order. One thread per column (the obvious kernel) ran a
// bias gradient of (256, 64) on 64 threads: 50 us on the H200 for 64 KB.
constexpr int kColumnRows = 8;

template <class T>
__global__ void sum_columns_kernel(const T* x, T* out, i64 outer, i64 n, i64 inner, i64 len, i64 segs) {
  __shared__ T part[kColumnRows][kWarp + 1];
  const i64 tiles = (inner + kWarp - 1) / kWarp;
  for (i64 b = blockIdx.x; b < outer * segs * tiles; b += gridDim.x) {  // uniform per block: it syncs
    const i64 t = b % tiles, s = (b / tiles) % segs, o = b / (tiles * segs);
    const i64 i = t * kWarp + threadIdx.x;
    const i64 m = min(len, n - s * len);
    T acc = 0;
    if (i < inner) {
      const T* base = x + (o * n + s * len) * inner + i;
      for (i64 r = threadIdx.y; r < m; r += kColumnRows) acc += base[r * inner];
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      T sum = part[0][threadIdx.x];
      for (int k = 1; k < kColumnRows; ++k) sum += part[k][threadIdx.x];
      out[(o * segs + s) * inner + i] = sum;
    }
    __syncthreads();
  }
}

// Max with the first maximal index (a NaN wins, as in PyTorch).
template <class T> __global__ void max_kernel(const T* x, T* out, i64* idx, i64 outer, i64 n, i64 inner) {
  GRID_STRIDE(j, outer * inner) {
    const T* base = x + (j / inner) * n * inner + j % inner;
    T best = base[0];
    i64 arg = 0;
    for (i64 r = 1; r < n && !isnan(best); ++r) {
      const T v = base[r * inner];
      if (v > best || isnan(v)) {
        best = v;
        arg = r;
      }
    }
    out[j] = best;
    if (idx) idx[j] = arg;
  }
}

template <class T> __global__ void scatter_kernel(const T* g, const i64* idx, T* dx, i64 outer, i64 n, i64 inner) {
  GRID_STRIDE(j, outer * inner) dx[((j / inner) * n + idx[j]) * inner + j % inner] = g[j];
}

template <class T> __global__ void transpose_kernel(const T* x, T* y, i64 total, i64 d0, i64 B, i64 d1, i64 C) {
  GRID_STRIDE(o, total) {
    // o indexes y as (A, d1, B, d0, C)
    i64 r = o;
    const i64 c = r % C; r /= C;
    const i64 i0 = r % d0; r /= d0;
    const i64 b = r % B; r /= B;
    const i64 i1 = r % d1; r /= d1;
    const i64 a = r;
    y[o] = x[(((a * d0 + i0) * B + b) * d1 + i1) * C + c];
  }
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

void fill(Tensor& out, double value) {
  if (out.numel() == 0) return;
  kernels::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(out.data_ptr<T>(), out.numel(), Constant<T>{static_cast<T>(value)});
  });
}

void copy(const Tensor& src, Tensor& dst) {
  if (src.numel() == 0) return;
  if (src.dtype() == dst.dtype()) {
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  kernels::dispatch_all(src.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    kernels::dispatch_all(dst.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      cast_kernel<<<blocks_for(src.numel()), kThreads, 0, stream()>>>(src.data_ptr<S>(), dst.data_ptr<D>(), src.numel());
    });
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void arange(Tensor& out, double start, double step) {
  if (out.numel() == 0) return;
  kernels::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    arange_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(out.data_ptr<T>(), out.numel(), start, step);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

namespace {
/// Draws n numbers of T (normal(a, b) or uniform [a, b)) from the device's Philox stream into `store`.
template <class T, class Store> void launch_random(i64 n, bool normal, double a, double b, Store store) {
  const PhiloxState st = philox_reserve(current_device(), 4);
  const i64 groups = (n + Pack<T>::size - 1) / Pack<T>::size;
  const T top = std::max(static_cast<T>(a), std::nextafter(static_cast<T>(b), static_cast<T>(a)));
  const bool unit = !normal && a == 0.0 && b == 1.0;
  random_kernel<<<blocks_for(groups), kThreads, 0, stream()>>>(n, st.seed, st.offset, st.device_base, normal, unit,
                                                                a, b, top, store);
  MINIDL_CUDA_KERNEL_CHECK();
}

void random_fill(Tensor& out, bool normal, double a, double b) {
  if (out.numel() == 0) return;
  kernels::dispatch_floating(out.dtype(), normal ? "randn" : "rand", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.data_ptr<T>();
    launch_random<T>(out.numel(), normal, a, b, StoreDraw<T>{y, is_aligned(y, 16)});
  });
}
}  // namespace

// One kernel instead of uniform + DropoutMask + multiply: the same draws, so the same masks as those three.
void dropout(const Tensor& x, double p, Tensor& out, Tensor& mask) {
  if (x.numel() == 0) return;
  kernels::dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = x.data_ptr<T>();
    T* ys = out.data_ptr<T>();
    T* ms = mask.data_ptr<T>();
    const bool packed = is_aligned(xs, 16) && is_aligned(ys, 16) && is_aligned(ms, 16);
    launch_random<T>(x.numel(), false, 0.0, 1.0, StoreDropout<T>{xs, ys, ms, {static_cast<T>(p)}, packed});
  });
}

void uniform(Tensor& out, double low, double high) { random_fill(out, false, low, high); }
void normal(Tensor& out, double mean, double stddev) { random_fill(out, true, mean, stddev); }

void unary(kernels::UnaryOp op, double alpha, const Tensor& x, Tensor& out) {
  if (x.numel() == 0) return;
  if (x.dtype() == kInt64 && op == kernels::UnaryOp::AddScalar) {  // counters; the only integer op
    return launch_map(out.data_ptr<i64>(), x.numel(), kernels::AddScalar<i64>{static_cast<i64>(alpha)},
                      x.data_ptr<i64>());
  }
  kernels::dispatch_floating(x.dtype(), "unary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_unary<T>(op, static_cast<T>(alpha),
                            [&](auto f) { launch_map(out.data_ptr<T>(), x.numel(), f, x.data_ptr<T>()); });
  });
}

template <class T>
void activate_in_place(kernels::Activation act, T* y, i64 n) {
  if (act == kernels::Activation::None) return;
  launch_map(y, n, kernels::Relu<T>{T(0)}, static_cast<const T*>(y));
}
template void activate_in_place<float>(kernels::Activation, float*, i64);
template void activate_in_place<double>(kernels::Activation, double*, i64);

void binary(kernels::BinaryOp op, double alpha, const Tensor& a, const Tensor& b, Tensor& out) {
  const i64 n = out.numel();
  if (n == 0) return;
  kernels::dispatch_floating(out.dtype(), "binary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_binary<T>(op, static_cast<T>(alpha), [&](auto f) {
      if (a.sizes() == out.sizes() && b.sizes() == out.sizes()) {
        launch_map(out.data_ptr<T>(), n, f, a.data_ptr<T>(), b.data_ptr<T>());
      } else {
        binary_broadcast_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(
            a.data_ptr<T>(), b.data_ptr<T>(), out.data_ptr<T>(), n, kernels::broadcast_index(a.sizes(), b.sizes(), out.sizes()), f);
        MINIDL_CUDA_KERNEL_CHECK();
      }
    });
  });
}

namespace {
/// out (outer, inner) = x (outer, n, inner) summed over n, through chunk sums when n is long (see kRowChunk).
template <class T> void sum_chunked(const T* x, i64 outer, i64 n, i64 inner, T* out, Device device) {
  const i64 chunk = inner == 1 ? kRowChunk : kColumnChunk;
  const i64 segs = n > chunk ? (n + chunk - 1) / chunk : 1;
  const i64 len = segs == 1 ? n : chunk;
  Tensor partial;  // freed on return: stream order makes its reuse safe
  T* dst = out;
  if (segs > 1) {
    partial = empty({outer * segs * inner}, TensorOptions(dtype_of<T>::value).device(device));
    dst = partial.data_ptr<T>();
  }
  if (inner == 1 && len <= kWarpRowMax) {
    sum_rows_warp_kernel<<<blocks_for(outer * segs * kWarp), kThreads, 0, stream()>>>(x, dst, outer, n, len, segs);
  } else if (inner == 1) {
    sum_rows_kernel<<<row_blocks(outer * segs), kThreads, kThreads * sizeof(T), stream()>>>(x, dst, outer, n, len, segs);
  } else {
    const i64 tiles = outer * segs * ((inner + kWarp - 1) / kWarp);
    sum_columns_kernel<<<row_blocks(tiles), dim3(kWarp, kColumnRows), 0, stream()>>>(x, dst, outer, n, inner, len, segs);
  }
  MINIDL_CUDA_KERNEL_CHECK();
  if (segs > 1) sum_chunked(dst, outer, segs, inner, out, device);
}
}  // namespace

template <class T> void channel_sum(const T* dy, i64 n, i64 k, i64 pq, T* out) {
  MINIDL_CHECK(n >= 0 && k >= 0 && pq >= 0, ValueError, "channel_sum: sizes must be non-negative, found n = ", n,
               ", k = ", k, ", pq = ", pq);
  if (k == 0) return;
  if (n == 0 || pq == 0) return launch_map(out, k, Constant<T>{T(0)});
  const Device device(kCUDA, current_device());
  if (pq == 1) return sum_chunked(dy, 1, n, k, out, device);
  if (n == 1) return sum_chunked(dy, k, pq, 1, out, device);
  Tensor rows = empty({n * k}, TensorOptions(dtype_of<T>::value).device(device));  // freed on return, as above
  sum_chunked(dy, n * k, pq, 1, rows.data_ptr<T>(), device);
  sum_chunked(rows.data_ptr<T>(), 1, n, k, out, device);
}
template void channel_sum<float>(const float*, i64, i64, i64, float*);
template void channel_sum<double>(const double*, i64, i64, i64, double*);

void reduce(kernels::ReduceOp op, const Tensor& x, i64 outer, i64 n, i64 inner, Tensor& out, Tensor* indices) {
  if (out.numel() == 0) return;
  kernels::dispatch_floating(x.dtype(), "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (op == kernels::ReduceOp::Max) {
      max_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(
          x.data_ptr<T>(), out.data_ptr<T>(), indices ? indices->data_ptr<i64>() : nullptr, outer, n, inner);
    } else {
      sum_chunked(x.data_ptr<T>(), outer, n, inner, out.data_ptr<T>(), x.device());
    }
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void scatter_reduced(const Tensor& grad, const Tensor& indices, i64 outer, i64 n, i64 inner, Tensor& dx) {
  fill(dx, 0.0);
  if (grad.numel() == 0) return;
  kernels::dispatch_floating(grad.dtype(), "scatter_reduced", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(grad.data_ptr<T>(), indices.data_ptr<i64>(),
                                                                         dx.data_ptr<T>(), outer, n, inner);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void matmul(const Tensor& a, const Tensor& b, Tensor& out, i64 batch, i64 m, i64 n, i64 k, bool ta, bool tb) {
  if (out.numel() == 0) return;
  // cuBLAS takes sizes and leading dimensions as int (the batch strides are 64-bit).
  for (const auto& [name, v] : {std::pair<const char*, i64>{"batch", batch}, {"m", m}, {"n", n}, {"k", k}}) {
    MINIDL_CHECK(v <= std::numeric_limits<int>::max(), ValueError, "matmul: ", name, " = ", v,
                 " exceeds cuBLAS's limit of ", std::numeric_limits<int>::max(), " (shapes ", shape_str(a.sizes()),
                 " and ", shape_str(b.sizes()), ")");
  }
  // float32 goes through cuBLASLt with an algorithm timed per shape (matmul.cu).
  if (out.dtype() == kFloat32) {
    return lt_matmul(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), batch, m, n, k, ta, tb);
  }
  // Row-major C = op(A)·op(B) is column-major C^T = op(B)^T·op(A)^T: swap the operands, keep the flags.
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = static_cast<int>(tb ? k : n), lda = static_cast<int>(ta ? m : k), ldc = static_cast<int>(n);
  const double alpha = 1.0, beta = 0.0;
  MINIDL_CUBLAS_CHECK(cublasDgemmStridedBatched(cublas(), opb, opa, (int)n, (int)m, (int)k, &alpha, b.data_ptr<double>(),
                                                ldb, k * n, a.data_ptr<double>(), lda, m * k, &beta,
                                                out.data_ptr<double>(), ldc, m * n, (int)batch));
}

void transpose(const Tensor& x, Tensor& out, i64 A, i64 d0, i64 B, i64 d1, i64 C) {
  const i64 total = A * d0 * B * d1 * C;
  if (total == 0) return;
  kernels::dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    transpose_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(x.data_ptr<T>(), out.data_ptr<T>(), total, d0, B, d1, C);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

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

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (bytes == 0) return;
  if (src_device.is_cpu()) {
    DeviceGuard g(dst_device.index());
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
    return;
  }
  if (dst_device.is_cpu()) {
    DeviceGuard g(src_device.index());
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
    MINIDL_CUDA_CHECK(cudaStreamSynchronize(stream()));  // the caller reads the host memory next
    return;
  }
  if (src_device == dst_device) {
    DeviceGuard g(dst_device.index());
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  {
    DeviceGuard g(src_device.index());
    MINIDL_CUDA_CHECK(cudaStreamSynchronize(stream()));  // the source must be complete before the peer copy
  }
  DeviceGuard g(dst_device.index());
  MINIDL_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index(), src, src_device.index(), bytes, stream()));
}

}  // namespace gpu
}  // namespace minidl

namespace minidl {
namespace gpu {
namespace {

// Per-sample losses by sub-warps of `lanes` lanes (a power of two: ce_lanes), 32 / lanes samples per warp, so the
// few classes of a small batch (10 for MNIST) keep every lane busy and all samples in flight at once: a warp per
// sample, 8 warps looping over 256 samples, took 23.2 us for the example's 256x10 loss on the H200.
constexpr unsigned kFullMask = 0xffffffffu;
int ce_lanes(i64 c) {
  int lanes = 1;
  while (lanes < kWarp && lanes * 4 < c) lanes *= 2;  // the smallest power of two >= c / 4, at most a warp
  return lanes;
}

/// Calls emit(i, loss of sample i) on the first lane of sample i's sub-warp, for the samples of warps warp,
/// warp + warps, ... Each lane sums every lanes-th class of the row and keeps the target's log-probability when it
/// meets it; the shuffles combine them in a fixed order, so the result is bitwise reproducible. The loop runs while
/// the warp's first sample is in range, so all 32 lanes reach the (full-mask) shuffles even where n ends inside it.
template <class T, class Emit>
__device__ void for_each_sample_loss(const T* lp, const std::int64_t* target, i64 n, i64 c, T eps, int lanes, i64 warp,
                                     i64 warps, Emit emit) {
  const int lane = threadIdx.x % kWarp, sub = lane % lanes, per_warp = kWarp / lanes;
  for (i64 first = warp * per_warp; first < n; first += warps * per_warp) {
    const i64 i = first + lane / lanes;
    const bool valid = i < n;
    const i64 t = valid ? target[i] : -1;
    // An out-of-range class cannot throw from the device without a host sync: it yields NaN, which the
    // non-finite-loss check and anomaly detection report.
    const bool known = t >= 0 && t < c;
    T s = 0, picked = 0;
    if (valid) {
      const T* row = lp + i * c;
      for (i64 j = sub; j < c; j += lanes) {
        const T v = row[j];
        s += v;
        if (j == t) picked = v;
      }
    }
    for (int off = lanes / 2; off > 0; off >>= 1) s += __shfl_down_sync(kFullMask, s, off, lanes);
    picked = __shfl_sync(kFullMask, picked, known ? static_cast<int>(t % lanes) : 0, lanes);
    if (valid && sub == 0) emit(i, known ? -((T(1) - eps) * picked + eps / T(c) * s) : T(NAN));
  }
}

template <class T>
__global__ void cross_entropy_loss_kernel(const T* lp, const std::int64_t* target, T* losses, i64 n, i64 c, T eps,
                                          int lanes) {
  for_each_sample_loss(lp, target, n, c, eps, lanes, (blockIdx.x * (i64)blockDim.x + threadIdx.x) / kWarp,
                       gridDim.x * (i64)(blockDim.x / kWarp), [&](i64 i, T loss) { losses[i] = loss; });
}

// The reduced loss in one block of 1024 threads: each sub-warp's first lane sums the losses of its samples, then
// the block adds those sums in a fixed order (warp butterflies, then the 32 warp sums by warp 0), so the result is
// deterministic. One launch instead of three (losses, sum, scale): the loss of a small batch is a handful of
// microseconds of launches, not of work. For batches up to kSumSamplesMax.
constexpr int kSumThreads = 1024;
static_assert(kSumThreads == kWarp * kWarp, "cross_entropy_sum_kernel: warp 0 adds one sum per warp");
constexpr std::int64_t kSumSamplesMax = 4096;
template <class T>
__global__ __launch_bounds__(kSumThreads) void cross_entropy_sum_kernel(const T* lp, const std::int64_t* target, T* out,
                                                                       i64 n, i64 c, T eps, T scale, int lanes) {
  __shared__ T part[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  T acc = 0;
  for_each_sample_loss(lp, target, n, c, eps, lanes, warp, kSumThreads / kWarp, [&](i64, T loss) { acc += loss; });
  acc = warp_sum(acc);  // lanes that emitted nothing add zeros
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    const T total = warp_sum(part[lane]);
    if (lane == 0) out[0] = scale * total;
  }
}

template <class T>
__global__ void scaled_sum_kernel(const T* x, T* out, std::int64_t n, T scale) {
  extern __shared__ unsigned char smem_raw[];
  T acc = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
  acc = block_sum(acc, reinterpret_cast<T*>(smem_raw));
  if (threadIdx.x == 0) out[0] = scale * acc;
}

template <class T>
__global__ void cross_entropy_backward_kernel(const T* lp, const std::int64_t* target, const T* grad,
                                              std::int64_t grad_stride, T* dx, std::int64_t n, std::int64_t c, T eps,
                                              bool from_logits, T scale) {
  GRID_STRIDE(k, n * c) {
    const std::int64_t i = k / c, j = k % c;
    const std::int64_t t = target[i];
    const T q = (j == t ? T(1) - eps : T(0)) + eps / T(c);
    dx[k] = ((from_logits ? kernels::m_exp(lp[k]) : T(0)) - q) * (scale * grad[i * grad_stride]);
  }
}

}  // namespace

void cross_entropy_loss(const Tensor& log_probs, const Tensor& target, double smoothing, Tensor& losses) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  if (n == 0) return;
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int lanes = ce_lanes(c);
    cross_entropy_loss_kernel<<<blocks_for(n * lanes, kThreads), kThreads, 0, stream()>>>(
        log_probs.data_ptr<T>(), target.data_ptr<std::int64_t>(), losses.data_ptr<T>(), n, c, static_cast<T>(smoothing),
        lanes);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void cross_entropy_loss_sum(const Tensor& log_probs, const Tensor& target, double smoothing, double scale,
                            Tensor& out) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n > kSumSamplesMax) {  // many samples: the per-sample kernel spreads them over the GPU, then one block sums
      Tensor losses = empty({n}, TensorOptions(log_probs.dtype()).device(log_probs.device()));
      cross_entropy_loss(log_probs, target, smoothing, losses);
      scaled_sum_kernel<<<1, kThreads, kThreads * sizeof(T), stream()>>>(losses.data_ptr<T>(), out.data_ptr<T>(), n,
                                                                        static_cast<T>(scale));
      return;
    }
    cross_entropy_sum_kernel<<<1, kSumThreads, 0, stream()>>>(log_probs.data_ptr<T>(), target.data_ptr<std::int64_t>(),
                                                              out.data_ptr<T>(), n, c, static_cast<T>(smoothing),
                                                              static_cast<T>(scale), ce_lanes(c));
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void cross_entropy_backward(const Tensor& log_probs, const Tensor& target, const Tensor& grad, double smoothing,
                            bool from_logits, double scale, Tensor& dx) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  if (n == 0) return;
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cross_entropy_backward_kernel<<<blocks_for(n * c), kThreads, 0, stream()>>>(
        log_probs.data_ptr<T>(), target.data_ptr<std::int64_t>(), grad.data_ptr<T>(), grad.numel() == 1 ? 0 : 1,
        dx.data_ptr<T>(), n, c, static_cast<T>(smoothing), from_logits, static_cast<T>(scale));
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
