// CUDA reductions over the middle dimension of an (outer, n, inner) view (see kernels/backend.h) with the reducers
// of kernels/reduce.h, the backward scatter of the selecting reductions, and channel_sum (cuda/reduce.h); all on
// gpu::stream(), nothing synchronised.
//
// One pass reads the input once. Rows (inner == 1) go to groups of lanes (a warp or less, for short rows) or, when
// long, to a block each, reading 16-byte packs; strided slices (inner > 1) to blocks whose lanes read neighbouring
// packs of columns (16 bytes each when the columns allow it, coalesced; narrow slices let a warp read several rows at
// once) while their rows of threads split the slice. Long slices, and slices too few to keep every multiprocessor
// streaming until the end, are cut into segments whose partial accumulators a second, small pass combines. Segments
// depend only on the shape, and every combination happens in a fixed order, so results are bitwise reproducible; the
// segments also keep float sums' addition chains short.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/launch.cuh"
#include "cuda/reduce.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

constexpr i64 kRowChunk = i64{1} << 16;       // the most elements of a row one block reduces
constexpr i64 kMinRowSegment = i64{1} << 13;  // the fewest, when rows are split to occupy the device
constexpr i64 kColumnChunk = 1024;            // the same for the rows of a strided slice
constexpr i64 kMinColumnSegment = 128;
constexpr i64 kTargetBlocks = 1024;  // below this many blocks, long rows are split further
// The same for strided slices. More blocks, each shorter, shorten the end of the pass, when too few blocks remain to
// keep the memory system busy: it costs more than the partials' extra traffic.
constexpr i64 kTargetColumnBlocks = 4096;
// A strided slice split for occupancy costs a second launch, which takes longer than one block needs to stream a
// few hundred kilobytes: a slice whose block reads no more than this (a bias gradient's batch sum) stays whole.
constexpr i64 kMinSplitColumnBytes = i64{1} << 19;
constexpr i64 kGroupRowMax = 4096;   // rows up to this long go to a group of lanes rather than a block
constexpr int kColumnRows = 8;       // rows of threads in a block over strided slices
constexpr int kUnroll = 8;           // strided loads in flight per thread before they are combined in order

__host__ __device__ inline i64 ceil_div(i64 a, i64 b) { return (a + b - 1) / b; }

/// Where a pass reads and writes: elements or the partial accumulators of split slices, results or partials.
template <class R, class In, class Out>
struct Pass {
  using A = typename R::acc_t;
  const In* x;       // elements, or null
  const A* part_in;  // partial accumulators (the second pass), or null
  Out* out;          // results (the last pass)
  i64* idx;          // positions of Max / Min results, or null
  A* part_out;       // partial accumulators (the first of two passes), or null
};

/// A trivially copyable value exchanged between lanes word by word.
template <class A>
__device__ A shfl_xor_any(const A& v, int mask) {
  constexpr int kWords = (sizeof(A) + 3) / 4;
  unsigned int w[kWords] = {};
  memcpy(w, &v, sizeof(A));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], mask);
  A r;
  memcpy(&r, w, sizeof(A));
  return r;
}

/// Combines the accumulators of each aligned group of `width` lanes (a power of two up to 32); every lane of the
/// warp must call it.
template <class R, class A>
__device__ A group_reduce(const R& r, A v, int width) {
  for (int offset = width / 2; offset > 0; offset >>= 1) v = r.combine(v, shfl_xor_any(v, offset));
  return v;
}

/// The block's combined accumulator, in thread 0.
template <class R, class A>
__device__ A block_reduce(const R& r, A v, A* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = group_reduce(r, v, kWarp);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / kWarp ? shared[threadIdx.x] : r.identity();
  if (warp == 0) v = group_reduce(r, v, kWarp);
  __syncthreads();  // shared is reused by the block's next slice
  return v;
}

/// acc stepped through positions first, first + step, ... below m of a contiguous slice (position q at x[q], pos0 + q
/// in its whole slice): 16-byte packs from its first 16-byte boundary on, two in flight per
/// thread (scalar loads use too little of the memory system's bandwidth), single elements before the boundary
/// and after the last whole pack. Each thread's positions still grow along its chain.
template <class R, class In, class A>
__device__ A step_contiguous(const R& r, A acc, const In* x, i64 first, i64 step, i64 m, i64 pos0) {
  constexpr int kV = Pack<In>::size;
  const auto misalign = reinterpret_cast<std::uintptr_t>(x) % 16;
  const i64 head = min(m, static_cast<i64>((16 - misalign) % 16 / sizeof(In)));
  for (i64 p = first; p < head; p += step) acc = r.step(acc, x[p], pos0 + p);
  const In* xa = x + head;
  const i64 packs = (m - head) / kV, at = pos0 + head;
  i64 q = first;
  for (; q + step < packs; q += 2 * step) {
    const Pack<In> a = load_wide<kV>(xa + q * kV), b = load_wide<kV>(xa + (q + step) * kV);
#pragma unroll
    for (int e = 0; e < kV; ++e) acc = r.step(acc, a.v[e], at + q * kV + e);
#pragma unroll
    for (int e = 0; e < kV; ++e) acc = r.step(acc, b.v[e], at + (q + step) * kV + e);
  }
  for (; q < packs; q += step) {
    const Pack<In> a = load_wide<kV>(xa + q * kV);
#pragma unroll
    for (int e = 0; e < kV; ++e) acc = r.step(acc, a.v[e], at + q * kV + e);
  }
  for (i64 p = head + packs * kV + first; p < m; p += step) acc = r.step(acc, x[p], pos0 + p);
  return acc;
}

/// Stores slot `slot` of the partials, or result `j`.
template <class R, class In, class Out, class A>
__device__ void finish(const R& r, const Pass<R, In, Out>& p, i64 slot, i64 j, const A& acc) {
  if (p.part_out) {
    p.part_out[slot] = acc;
  } else {
    p.out[j] = r.template project<Out>(acc);
    kernels::store_index(p.idx, j, acc);
  }
}

/// Short rows, `width` lanes each (one pass, elements in).
template <class R, class In, class Out>
__global__ void reduce_row_groups_kernel(R r, Pass<R, In, Out> p, i64 rows, i64 n, int width) {
  const int lane = threadIdx.x % kWarp, sub = lane % width;
  const i64 per_warp = kWarp / width;
  const i64 warps = static_cast<i64>(gridDim.x) * (blockDim.x / kWarp);
  const i64 warp = (blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x) / kWarp;
  // The loop bound is the same on every lane of a warp, so the shuffles are never divergent.
  for (i64 first = warp * per_warp; first < rows; first += warps * per_warp) {
    const i64 row = first + lane / width;
    auto acc = r.identity();
    if (row < rows) acc = step_contiguous(r, acc, p.x + row * n, sub, width, n, 0);
    acc = group_reduce(r, acc, width);
    if (row < rows && sub == 0) finish(r, p, row, row, acc);
  }
}

/// Long rows, or their segments of `len`: one block each (slot row * segs + segment).
template <class R, class In, class Out>
__global__ void __launch_bounds__(kThreads)
    reduce_rows_kernel(R r, Pass<R, In, Out> p, i64 rows, i64 n, i64 len, i64 segs) {
  using A = typename R::acc_t;
  __shared__ A shared[kWarp];
  for (i64 b = blockIdx.x; b < rows * segs; b += gridDim.x) {  // uniform per block: block_reduce syncs
    const i64 row = b / segs, start = (b % segs) * len;
    const i64 m = min(len, n - start), base = row * n + start;
    A acc = r.identity();
    if (p.part_in) {
      for (i64 k = threadIdx.x; k < m; k += blockDim.x) acc = r.combine(acc, p.part_in[base + k]);
    } else {
      acc = step_contiguous(r, acc, p.x + base, threadIdx.x, blockDim.x, m, start);
    }
    acc = block_reduce(r, acc, shared);
    if (threadIdx.x == 0) finish(r, p, b, row, acc);
  }
}

/// V consecutive values from p: one wide access for elements, V scalar loads for structured partial accumulators.
template <int V, class T>
__device__ Wide<T, V> load_columns(const T* p) {
  if constexpr (std::is_class_v<T> && !kernels::is_reduced_float_v<T>) {
    Wide<T, V> w;
#pragma unroll
    for (int e = 0; e < V; ++e) w.v[e] = p[e];
    return w;
  } else {
    return load_wide<V>(p);
  }
}

/// acc[e] = f(acc[e], value e, position) for the packs of V columns at positions first, first + step, ... below m
/// of a slice whose position q is x[q * ld] (pos0 + q in its whole slice); kUnroll packs in flight before they are
/// combined in position order.
template <int V, class T, class A, class F>
__device__ void step_columns(A (&acc)[V], const T* x, i64 ld, i64 first, i64 step, i64 m, i64 pos0, const F& f) {
  i64 q = first;
  for (; q + (kUnroll - 1) * step < m; q += kUnroll * step) {
    Wide<T, V> v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_columns<V>(x + (q + u * step) * ld);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = f(acc[e], v[u].v[e], pos0 + q + u * step);
    }
  }
#pragma unroll 4  // the second pass's short slices end here: their loads still go out together
  for (; q < m; q += step) {
    const Wide<T, V> v = load_columns<V>(x + q * ld);
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = f(acc[e], v.v[e], pos0 + q);
  }
}

/// Strided slices (inner > 1), or their segments of `len` rows: a block covers up to 32 neighbouring packs of V
/// columns (V divides inner) of one segment (slot (o * segs + segment) * inner + column). For fewer than 32 packs
/// a warp reads 32 / packs rows at once.
template <int V, class R, class In, class Out>
__global__ void __launch_bounds__(kWarp* kColumnRows)
    reduce_columns_kernel(R r, Pass<R, In, Out> p, i64 outer, i64 n, i64 inner, i64 len, i64 segs) {
  using A = typename R::acc_t;
  __shared__ A part[kColumnRows][kWarp + 1];
  const i64 packs = inner / V;
  const bool wide = packs >= kWarp;
  const int cols = wide ? kWarp : static_cast<int>(packs), group = wide ? 1 : kWarp / cols;
  const int lane = threadIdx.x, sub = lane / cols, c = lane % cols;
  const i64 tiles = wide ? ceil_div(packs, kWarp) : 1;
  for (i64 b = blockIdx.x; b < outer * segs * tiles; b += gridDim.x) {  // uniform per block: it syncs
    const i64 t = b % tiles, s = (b / tiles) % segs, o = b / (tiles * segs);
    const i64 i = (t * kWarp + c) * V, start = s * len, m = min(len, n - start);
    A acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = r.identity();
    if (sub < group && i < inner) {
      const i64 first = threadIdx.y * group + sub, step = static_cast<i64>(kColumnRows) * group;
      const i64 base = (o * n + start) * inner + i;
      if (p.part_in) {
        step_columns<V>(acc, p.part_in + base, inner, first, step, m, start,
                        [&](const A& a, const A& v, i64) { return r.combine(a, v); });
      } else {
        step_columns<V>(acc, p.x + base, inner, first, step, m, start,
                        [&](const A& a, const In& v, i64 pos) { return r.step(a, v, pos); });
      }
    }
    // One column of the pack at a time, so that shared memory holds one accumulator per thread whatever V is
    // (unrolled: acc indexed by a variable would leave the registers for local memory).
#pragma unroll
    for (int e = 0; e < V; ++e) {
      part[threadIdx.y][lane] = acc[e];
      __syncthreads();
      if (threadIdx.y == 0 && lane < cols && i < inner) {
        A total = part[0][lane];
        for (int y = 0; y < kColumnRows; ++y)
          for (int q = 0; q < group; ++q)
            if (y + q > 0) total = r.combine(total, part[y][q * cols + lane]);
        finish(r, p, (o * segs + s) * inner + i + e, o * inner + i + e, total);
      }
      __syncthreads();
    }
  }
}

/// Lanes per short row: enough for four elements each, a power of two up to a warp.
int row_group_width(i64 n) {
  int w = 1;
  while (w < kWarp && static_cast<i64>(w) * 4 < n) w *= 2;
  return w;
}

template <class R, class In, class Out>
void launch_reduce(const R& r, const In* x, i64 outer, i64 n, i64 inner, Out* out, i64* idx) {
  using A = typename R::acc_t;
  using P = Pass<R, In, Out>;
  if (outer * inner == 0) return;
  const bool rows = inner == 1;
  const i64 chunk = rows ? kRowChunk : kColumnChunk, min_seg = rows ? kMinRowSegment : kMinColumnSegment;
  const i64 target = rows ? kTargetBlocks : kTargetColumnBlocks;
  // Packs of columns move as 16-byte accesses when every row of the slices starts on a 16-byte boundary, a warp
  // of packs fills a row of threads and a slice is long enough for bandwidth to matter. Below that, packs only
  // leave fewer blocks and lengthen each block's final combination (a layer's bias gradient at a small batch).
  constexpr int kV = Pack<In>::size;
  const bool packed = !rows && inner % kV == 0 && inner / kV >= kWarp && is_aligned(x, 16) &&
                      n * inner * static_cast<i64>(sizeof(In)) > kMinSplitColumnBytes;
  const i64 packs = packed ? inner / kV : inner;
  const i64 tiles = rows ? 1 : (packs >= kWarp ? ceil_div(packs, kWarp) : 1);
  i64 segs = n > chunk ? ceil_div(n, chunk) : 1;
  const i64 block_bytes = n * std::min<i64>(inner, i64{kWarp} * (packed ? kV : 1)) * static_cast<i64>(sizeof(In));
  const bool worth_splitting = rows || block_bytes > kMinSplitColumnBytes;
  if (outer * tiles * segs < target && n > min_seg && worth_splitting) {
    segs = std::max(segs, std::min(ceil_div(target, outer * tiles), ceil_div(n, min_seg)));
  }
  const i64 len = segs == 1 ? n : ceil_div(n, segs);
  if (segs > 1) segs = ceil_div(n, len);
  Workspace part(segs > 1 ? static_cast<std::size_t>(outer * segs * inner) * sizeof(A) : 0, "reduction partials");
  const P first{x, nullptr, out, idx, segs > 1 ? part.as<A>() : nullptr};
  const P second{nullptr, part.as<A>(), out, idx, nullptr};
  if (rows && segs == 1 && n <= kGroupRowMax) {
    const int width = row_group_width(n);
    const i64 warps = ceil_div(outer, kWarp / width);
    reduce_row_groups_kernel<<<blocks_for(warps * kWarp), kThreads, 0, stream()>>>(r, first, outer, n, width);
  } else if (rows) {
    reduce_rows_kernel<<<row_blocks(outer * segs), kThreads, 0, stream()>>>(r, first, outer, n, len, segs);
    if (segs > 1) reduce_rows_kernel<<<row_blocks(outer), kThreads, 0, stream()>>>(r, second, outer, segs, segs, 1);
  } else {
    const auto columns = [&](auto v) {
      constexpr int V = decltype(v)::value;
      const dim3 block(kWarp, kColumnRows);
      reduce_columns_kernel<V>
          <<<row_blocks(outer * segs * tiles), block, 0, stream()>>>(r, first, outer, n, inner, len, segs);
      if (segs > 1) {
        reduce_columns_kernel<V>
            <<<row_blocks(outer * tiles), block, 0, stream()>>>(r, second, outer, segs, inner, segs, 1);
      }
    };
    if (packed) {
      columns(std::integral_constant<int, kV>{});
    } else {
      columns(std::integral_constant<int, 1>{});
    }
  }
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
__global__ void scatter_kernel(const T* g, const i64* idx, T* dx, i64 total, i64 k, i64 n, i64 inner) {
  GRID_STRIDE(j, total) {
    const i64 i = j % inner, o = j / (k * inner);
    dx[(o * n + idx[j]) * inner + i] = g[j];
  }
}

}  // namespace

template <class T>
void channel_sum(const T* dy, i64 n, i64 k, i64 pq, T* out) {
  MINIDL_CHECK(n >= 0 && k >= 0 && pq >= 0, ValueError, "channel_sum: sizes must be non-negative, found n = ", n,
               ", k = ", k, ", pq = ", pq);
  if (k == 0) return;
  if (n == 0 || pq == 0) return launch_map(out, k, Constant<T>{T(0)});
  const kernels::SumReducer<T> sum{T(1)};
  if (pq == 1) return launch_reduce(sum, dy, i64{1}, n, k, out, nullptr);
  if (n == 1) return launch_reduce(sum, dy, k, pq, i64{1}, out, nullptr);
  Workspace rows(static_cast<std::size_t>(n * k) * sizeof(T), "channel sums");  // stream order makes its reuse safe
  launch_reduce(sum, dy, n * k, pq, i64{1}, rows.as<T>(), nullptr);
  launch_reduce(sum, rows.as<T>(), i64{1}, n, k, out, nullptr);
}
template void channel_sum<float>(const float*, i64, i64, i64, float*);
template void channel_sum<double>(const double*, i64, i64, i64, double*);

void reduce(kernels::ReduceOp op, const kernels::ReduceParams& params, const Tensor& x, i64 outer, i64 n, i64 inner,
            Tensor& out, Tensor* indices) {
  if (outer * inner == 0) return;
  kernels::dispatch_all(x.dtype(), "reduce", [&](auto tag) {
    using In = typename decltype(tag)::type;
    kernels::visit_reducer<In>(op, params, [&](auto r) {
      using R = decltype(r);
      kernels::dispatch_all(out.dtype(), "reduce", [&](auto otag) {
        using Out = typename decltype(otag)::type;
        if constexpr (R::template writes<Out>) {
          launch_reduce(r, x.data_ptr<In>(), outer, n, inner, out.data_ptr<Out>(),
                        indices ? indices->data_ptr<i64>() : nullptr);
        } else {
          throw TypeError(detail::str("reduce: output dtype ", out.dtype(), " for input ", x.dtype()));
        }
      });
    });
  });
}

void scatter_reduced(const Tensor& grad, const Tensor& indices, i64 outer, i64 n, i64 inner, Tensor& dx) {
  fill(dx, 0.0);
  if (grad.numel() == 0) return;
  const i64 k = grad.numel() / (outer * inner);
  kernels::dispatch_all(grad.dtype(), "scatter_reduced", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_kernel<<<blocks_for(grad.numel()), kThreads, 0, stream()>>>(grad.data_ptr<T>(), indices.data_ptr<i64>(),
                                                                        dx.data_ptr<T>(), grad.numel(), k, n, inner);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
