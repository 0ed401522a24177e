// CUDA scans along the middle dimension of an (outer, n, inner) view (see kernels/backend.h) and cumprod's
// backward, on gpu::stream(), nothing synchronised.
//
// Many long rows (inner == 1) take a block each, which reads and writes them in 16-byte packs once. Other rows are
// one CUB segmented scan (DeviceScan::InclusiveScanByKey, keyed by the row, whose single pass with decoupled
// look-back reads and writes every element once however the rows are shaped, but computes every element's key and
// moves elements one at a time, which leaves much of the bandwidth unused on many long rows: docs/BENCHMARKS.md,
// "Issue 23: a middle dim's sum and cumsum"). Strided slices with many columns take one thread per column stepping
// down n (neighbouring threads read neighbouring columns); few long columns are transposed into rows and back.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_scan.cuh>
#include <cuda/std/functional>

#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

constexpr i64 kColumnThreads = 16384;  // at least this many columns (or a small scan): one thread per column
constexpr int kTile = 32;              // the transpose's tiles
// A block per row when there are enough rows to occupy the device and most threads have elements of each chunk.
constexpr i64 kBlockRows = 512;
/// Elements per thread in each chunk of a row scanned by a block: 128 bytes of accumulators, so that each thread
/// has that many bytes of loads in flight at once (a block per row has nothing else to overlap them with).
template <class A>
constexpr int kRowItems = 128 / static_cast<int>(sizeof(A));
template <class A>
constexpr i64 kRowChunk = i64{kThreads} * kRowItems<A>;

/// The row of a flat position i: i / n, by a multiply and a shift (CUTLASS's FastDivmod) while positions fit
/// in 31 bits, since CUB asks for every element's key.
struct RowOf {
  i64 n;
  unsigned int multiplier, shift;
  bool fast;
  explicit RowOf(i64 n_, i64 total) : n(n_), multiplier(0), shift(0), fast(total < (i64{1} << 31) && n_ > 1) {
    if (!fast) return;
    unsigned int log2 = 0;
    while ((i64{1} << log2) < n) ++log2;  // ceil(log2 n)
    const unsigned int p = 31 + log2;
    multiplier = static_cast<unsigned int>(((std::uint64_t{1} << p) + static_cast<std::uint64_t>(n) - 1) /
                                           static_cast<std::uint64_t>(n));
    shift = p - 32;
  }
  __host__ __device__ i64 operator()(i64 i) const {
#ifdef __CUDA_ARCH__
    if (fast) return static_cast<i64>(__umulhi(static_cast<unsigned int>(i), multiplier) >> shift);
#endif
    return n > 1 ? i / n : i;
  }
};

/// Element i of the scan (counted from the end when reversed), in the accumulator's type.
template <class In, class A>
struct LoadAt {
  const In* x;
  i64 last;
  bool reverse;
  __host__ __device__ A operator()(i64 i) const { return kernels::convert<A>(x[reverse ? last - i : i]); }
};
template <class Out>
struct StoreAt {
  Out* out;
  i64 last;
  bool reverse;
  template <class A>
  __host__ __device__ void operator()(i64 i, A v) const {
    out[reverse ? last - i : i] = kernels::convert<Out>(v);
  }
};

/// v after the inclusive scan of the warp's lanes (fixed order).
template <class A, class F>
__device__ A warp_inclusive_scan(F f, A v, int lane) {
#pragma unroll
  for (int d = 1; d < kWarp; d <<= 1) {
    const A u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v = f(u, v);
  }
  return v;
}

/// A block per row (reversed: read from its end). Each chunk of kRowChunk positions is P rows of packs of V
/// contiguous positions, a pack per thread in each (neighbouring threads, neighbouring packs: coalesced 16-byte
/// accesses when `packed`, else element by element). Packs scan in registers, their totals across the warp by
/// shuffles, and the warps' totals through shared memory, which every thread then adds up in the same order (so
/// all agree on the chunk's total, the next chunk's carry, bit for bit).
template <class In, class Out, class A, class F>
__global__ void __launch_bounds__(kThreads)
    scan_rows_kernel(F f, A identity, bool reverse, bool packed, const In* __restrict__ x, Out* __restrict__ out,
                     i64 rows, i64 n) {
  constexpr int V = Pack<In>::size, P = kRowItems<A> / V, kWarps = kThreads / kWarp;
  static_assert(P >= 1 && P * V == kRowItems<A>, "scan_rows_kernel: a chunk is whole packs");
  constexpr i64 kChunk = kRowChunk<A>;
  __shared__ A totals[2][P][kWarps];  // two, alternating by chunk: one sync per chunk suffices
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  int buf = 0;
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const In* xr = x + row * n;
    Out* yr = out + row * n;
    A carry = identity;
    for (i64 c0 = 0; c0 < n; c0 += kChunk, buf ^= 1) {
      A v[P][V];
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const i64 q = c0 + (static_cast<i64>(j) * kThreads + threadIdx.x) * V;  // the pack's first position
        if (packed && q + V <= n) {
          const Wide<In, V> w = load_wide<V>(xr + (reverse ? n - q - V : q));
#pragma unroll
          for (int e = 0; e < V; ++e) v[j][e] = kernels::convert<A>(w.v[reverse ? V - 1 - e : e]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const i64 k = q + e;
            v[j][e] = k < n ? kernels::convert<A>(xr[reverse ? n - 1 - k : k]) : identity;
          }
        }
      }
      A s[P];
#pragma unroll
      for (int j = 0; j < P; ++j) {
#pragma unroll
        for (int e = 1; e < V; ++e) v[j][e] = f(v[j][e - 1], v[j][e]);
        s[j] = warp_inclusive_scan(f, v[j][V - 1], lane);
        if (lane == kWarp - 1) totals[buf][j][warp] = s[j];
      }
      __syncthreads();
      A run = carry, before_warp[P];
#pragma unroll
      for (int j = 0; j < P; ++j) {
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
          if (w == warp) before_warp[j] = run;
          run = f(run, totals[buf][j][w]);
        }
      }
      carry = run;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const A lower = __shfl_up_sync(0xffffffffu, s[j], 1);  // the packs of the warp's lower lanes
        const A before = lane == 0 ? before_warp[j] : f(before_warp[j], lower);
        const i64 q = c0 + (static_cast<i64>(j) * kThreads + threadIdx.x) * V;
        if (packed && q + V <= n) {
          Wide<Out, V> w;
#pragma unroll
          for (int e = 0; e < V; ++e) w.v[reverse ? V - 1 - e : e] = kernels::convert<Out>(f(before, v[j][e]));
          store_wide(yr + (reverse ? n - q - V : q), w);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const i64 k = q + e;
            if (k < n) yr[reverse ? n - 1 - k : k] = kernels::convert<Out>(f(before, v[j][e]));
          }
        }
      }
    }
  }
}

template <class In, class Out, class A, class F>
void scan_rows(F f, A identity, bool reverse, const In* x, i64 rows, i64 n, Out* out) {
  if (rows >= kBlockRows && n >= kRowChunk<A> / 2) {
    constexpr int V = Pack<In>::size;
    const bool packed = n % V == 0 && is_aligned(x, 16) && is_aligned(out, 16);
    scan_rows_kernel<<<row_blocks(rows), kThreads, 0, stream()>>>(f, identity, reverse, packed, x, out, rows, n);
    MINIDL_CUDA_KERNEL_CHECK();
    return;
  }
  const i64 total = rows * n;
  const auto keys = thrust::make_transform_iterator(thrust::counting_iterator<i64>(0), RowOf(n, total));
  const auto values =
      thrust::make_transform_iterator(thrust::counting_iterator<i64>(0), LoadAt<In, A>{x, total - 1, reverse});
  const auto results = thrust::make_tabulate_output_iterator(StoreAt<Out>{out, total - 1, reverse});
  std::size_t bytes = 0;
  MINIDL_CUDA_CHECK(cub::DeviceScan::InclusiveScanByKey(nullptr, bytes, keys, values, results, f, total,
                                                        ::cuda::std::equal_to<>{}, stream()));
  Workspace temp(bytes, "scan temporary storage");
  MINIDL_CUDA_CHECK(cub::DeviceScan::InclusiveScanByKey(temp.get(), bytes, keys, values, results, f, total,
                                                        ::cuda::std::equal_to<>{}, stream()));
}

/// One thread per column (o, i), kUnroll rows loaded ahead of their in-order accumulation.
template <class In, class Out, class A, class F>
__global__ void scan_columns_kernel(F f, A identity, bool reverse, const In* __restrict__ x, Out* __restrict__ out,
                                    i64 outer, i64 n, i64 inner) {
  constexpr int kUnroll = 16;  // loads in flight: one thread per column has no other parallelism along n
  GRID_STRIDE(j, outer * inner) {
    const i64 base = (j / inner) * n * inner + j % inner;
    const i64 step = reverse ? -inner : inner, first = base + (reverse ? (n - 1) * inner : 0);
    A acc = identity;
    i64 s = 0;
    for (; s + kUnroll <= n; s += kUnroll) {
      In v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = x[first + (s + u) * step];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        acc = f(acc, kernels::convert<A>(v[u]));
        out[first + (s + u) * step] = kernels::convert<Out>(acc);
      }
    }
    for (; s < n; ++s) {
      acc = f(acc, kernels::convert<A>(x[first + s * step]));
      out[first + s * step] = kernels::convert<Out>(acc);
    }
  }
}

__host__ __device__ inline i64 ceil_tiles(i64 n) { return (n + kTile - 1) / kTile; }

/// dst (outer, cols, rows) = src (outer, rows, cols) transposed, through 32 x 32 tiles.
template <class T>
__global__ void transpose_kernel(const T* __restrict__ src, T* __restrict__ dst, i64 outer, i64 rows, i64 cols) {
  __shared__ T tile[kTile][kTile + 1];
  const i64 tr = ceil_tiles(rows), tc = ceil_tiles(cols);
  for (i64 b = blockIdx.x; b < outer * tr * tc; b += gridDim.x) {  // uniform per block: it syncs
    const i64 o = b / (tr * tc), r0 = (b / tc) % tr * kTile, c0 = b % tc * kTile;
    for (int k = threadIdx.y; k < kTile; k += blockDim.y) {
      const i64 r = r0 + k, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[k][threadIdx.x] = src[(o * rows + r) * cols + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += blockDim.y) {
      const i64 c = c0 + k, r = r0 + threadIdx.x;
      if (r < rows && c < cols) dst[(o * cols + c) * rows + r] = tile[threadIdx.x][k];
    }
    __syncthreads();
  }
}

template <class T>
void transpose(const T* src, T* dst, i64 outer, i64 rows, i64 cols) {
  transpose_kernel<<<row_blocks(outer * ceil_tiles(rows) * ceil_tiles(cols)), dim3(kTile, 8), 0, stream()>>>(
      src, dst, outer, rows, cols);
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
__global__ void cumprod_backward_kernel(const T* x, const T* g, T* dx, i64 outer, i64 n, i64 inner) {
  GRID_STRIDE(j, outer * inner) {
    const i64 off = (j / inner) * n * inner + j % inner;
    kernels::cumprod_backward_slice(x + off, g + off, dx + off, n, inner);
  }
}

}  // namespace

void scan(kernels::ScanOp op, bool reverse, const Tensor& x, i64 outer, i64 n, i64 inner, Tensor& out) {
  if (x.numel() == 0) return;
  kernels::dispatch_all(x.dtype(), "scan", [&](auto tag) {
    using In = typename decltype(tag)::type;
    using A = kernels::sum_acc_t<In>;
    using Out = std::conditional_t<std::is_integral_v<In>, std::int64_t, In>;
    MINIDL_CHECK(out.dtype() == dtype_of<Out>::value, TypeError, "scan: output dtype ", out.dtype(), " for input ",
                 x.dtype());
    const In* px = x.data_ptr<In>();
    Out* po = out.data_ptr<Out>();
    kernels::visit_scan<A>(op, [&](auto f, A identity) {
      if (inner == 1) return scan_rows<In, Out, A>(f, identity, reverse, px, outer, n, po);
      if (outer * inner >= kColumnThreads || x.numel() <= (i64{1} << 20)) {
        scan_columns_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(f, identity, reverse, px, po, outer,
                                                                                  n, inner);
        MINIDL_CUDA_KERNEL_CHECK();
        return;
      }
      // Few long columns: as rows, (outer, inner, n), and back.
      Workspace rows_in(static_cast<std::size_t>(x.numel()) * sizeof(In), "scan transpose");
      Workspace rows_out(static_cast<std::size_t>(x.numel()) * sizeof(Out), "scan transpose");
      transpose(px, rows_in.as<In>(), outer, n, inner);
      scan_rows<In, Out, A>(f, identity, reverse, rows_in.as<In>(), outer * inner, n, rows_out.as<Out>());
      transpose(rows_out.as<Out>(), po, outer, inner, n);
    });
  });
}

void cumprod_backward(const Tensor& x, const Tensor& grad, i64 outer, i64 n, i64 inner, Tensor& dx) {
  if (x.numel() == 0) return;
  kernels::dispatch_all(x.dtype(), "cumprod_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::is_floating_v<T>) {
      cumprod_backward_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(x.data_ptr<T>(), grad.data_ptr<T>(),
                                                                                    dx.data_ptr<T>(), outer, n, inner);
      MINIDL_CUDA_KERNEL_CHECK();
    } else {
      throw TypeError(detail::str("cumprod_backward: expected a floating tensor, found ", x.dtype()));
    }
  });
}

}  // namespace gpu
}  // namespace minidl
