// CUDA reductions over the middle dimension of an (outer, n, inner) view (see kernels/backend.h): sums by
// deterministic chunked kernels (also behind channel_sum, cuda/reduce.h), max with its index, and the max's
// backward scatter; on gpu::stream().
#include "cuda/launch.cuh"
#include "cuda/reduce.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

// Sum reductions over more than this many elements (per row, or per column of a strided view) first sum
// fixed chunks into a buffer and then reduce the chunk sums, recursively. A full reduction of a large tensor
// thus uses the whole device rather than one block, and every value passes through short addition chains
// (about kRowChunk / kThreads + log2 kThreads terms per level), which keeps the float rounding error small.
// The chunks depend only on the shape, so results stay bitwise reproducible.
constexpr i64 kRowChunk = i64{1} << 16;
constexpr i64 kColumnChunk = 1024;

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
// the segment's rows, then combine in a fixed order. One thread per column (the obvious kernel) runs a
// bias gradient of (256, 64) on 64 threads: far too few to move 64 KB at speed.
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
    for (i64 r = 1; r < n && !kernels::m_isnan(best); ++r) {
      const T v = base[r * inner];
      if (kernels::replaces_max(v, best)) {
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
  kernels::dispatch(kernels::SumTypes{}, x.dtype(), "reduce", [&](auto tag) {
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
  kernels::dispatch(kernels::SumTypes{}, grad.dtype(), "scatter_reduced", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(grad.data_ptr<T>(), indices.data_ptr<i64>(),
                                                                         dx.data_ptr<T>(), outer, n, inner);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
