// CUDA scans along the middle dimension of an (outer, n, inner) view (see kernels/backend.h) and cumprod's
// backward, on gpu::stream(), nothing synchronised.
//
// Rows (inner == 1) are one CUB segmented scan (DeviceScan::InclusiveScanByKey, keyed by the row, whose single
// pass with decoupled look-back reads and writes every element once however the rows are shaped). Strided slices
// with many columns take one thread per column stepping down n (neighbouring threads read neighbouring columns);
// few long columns are transposed into rows for CUB and back.
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

template <class In, class Out, class A, class F>
void scan_rows(F f, bool reverse, const In* x, i64 rows, i64 n, Out* out) {
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
      if (inner == 1) return scan_rows<In, Out, A>(f, reverse, px, outer, n, po);
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
      scan_rows<In, Out, A>(f, reverse, rows_in.as<In>(), outer * inner, n, rows_out.as<Out>());
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
