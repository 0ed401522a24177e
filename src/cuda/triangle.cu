// CUDA tril / triu (see kernels/backend.h), keeping the columns of kernels/triangle.h; on gpu::stream(). Rows of at
// least kMinRow elements go row by row (blocks stride over the rows and a row's 16-byte packs, so no thread
// divides, and a pack wholly inside or outside the kept columns moves as one); shorter rows one thread per element.
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/triangle.h"

namespace minidl {
namespace gpu {
namespace {

constexpr i64 kMinRow = 256;

template <class T>
__device__ __forceinline__ T kept(const T* x, i64 j, const kernels::ColumnRange& keep) {
  return j >= keep.begin && j < keep.end ? x[j] : T(0);
}

template <class T>
__global__ void triangle_kernel(const T* x, T* out, i64 total, i64 n, i64 m, i64 diagonal, bool upper) {
  GRID_STRIDE(e, total) {
    const i64 r = e / m;
    out[e] = kept(x + r * m, e - r * m, kernels::kept_columns(r % n, m, diagonal, upper));
  }
}

/// Rows per thread: a thread loads its pack of each of them before it stores any (enough bytes in flight).
constexpr int kRowUnroll = 4;

/// Rows of the (rows, m) matrices, kRowUnroll at a time; `packs` 16-byte packs per row (0 when the rows do not
/// start aligned).
template <class T>
__global__ void triangle_rows_kernel(const T* x, T* out, i64 rows, i64 n, i64 m, i64 packs, i64 diagonal,
                                     bool upper) {
  constexpr int k = Pack<T>::size;
  const i64 first = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x;
  const i64 step = static_cast<i64>(blockDim.x) * gridDim.x;
  for (i64 r0 = blockIdx.y; r0 < rows; r0 += static_cast<i64>(gridDim.y) * kRowUnroll) {
    kernels::ColumnRange keep[kRowUnroll];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      keep[u] = kernels::kept_columns((r0 + static_cast<i64>(u) * gridDim.y) % n, m, diagonal, upper);
    }
    for (i64 p = first; p < packs; p += step) {
      const i64 j = p * k;
      Pack<T> v[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const i64 r = r0 + static_cast<i64>(u) * gridDim.y;
        if (r >= rows) continue;
        if (j >= keep[u].begin && j + k <= keep[u].end) {
          v[u] = load_wide<k>(x + r * m + j);
        } else {
#pragma unroll
          for (int e = 0; e < k; ++e) v[u].v[e] = kept(x + r * m, j + e, keep[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const i64 r = r0 + static_cast<i64>(u) * gridDim.y;
        if (r < rows) store_wide(out + r * m + j, v[u]);
      }
    }
    for (int u = 0; u < kRowUnroll; ++u) {
      const i64 r = r0 + static_cast<i64>(u) * gridDim.y;
      if (r >= rows) break;
      for (i64 j = packs * k + first; j < m; j += step) out[r * m + j] = kept(x + r * m, j, keep[u]);
    }
  }
}

}  // namespace

void triangle(const Tensor& x, std::int64_t diagonal, bool upper, Tensor& out) {
  const i64 total = out.numel();
  if (total == 0) return;
  const std::int64_t d = x.dim();
  const i64 n = x.size(d - 2), m = x.size(d - 1);
  kernels::dispatch_all(x.dtype(), upper ? "triu" : "tril", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* po = out.data_ptr<T>();
    if (m < kMinRow) {
      triangle_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(px, po, total, n, m, diagonal, upper);
      return;
    }
    constexpr int k = Pack<T>::size;
    const i64 packs = m % k == 0 && is_aligned(px, 16) && is_aligned(po, 16) ? m / k : 0;
    const i64 rows = total / m;
    const dim3 grid(blocks_for(packs > 0 ? packs : m),
                    static_cast<unsigned int>(std::min<i64>((rows + kRowUnroll - 1) / kRowUnroll, 65535)));
    triangle_rows_kernel<<<grid, kThreads, 0, stream()>>>(px, po, rows, n, m, packs, diagonal, upper);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
