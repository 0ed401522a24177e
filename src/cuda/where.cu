// CUDA where (see kernels/backend.h): the selection of kernels/where.h in the form kernels::run_where picks: the
// elementwise map kernels of cuda/launch.cuh (16-byte packs for contiguous operands, a StridedIndex otherwise) and
// a rows kernel for blocks repeated along the leading dims; on gpu::stream().
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/where.h"

namespace minidl {
namespace gpu {
namespace {

/// Rows per thread in the rows kernel: a thread loads its pack of each of them before it stores any, so that enough
/// bytes are in flight when the repeated operand comes from L2 and only one stream reads memory.
constexpr int kRowUnroll = 4;

/// The rows form of where: y is rows x cols; operand k's row r starts at in_k.p + r * in_k.row_stride. Blocks
/// stride over the rows (grid.y, kRowUnroll rows at a time) and the packs of a row (grid.x), so no thread divides;
/// 16-byte packs when every row of every operand starts aligned (the host checks), else element by element.
template <class T, class F, class... In>
__global__ void rows_map_kernel(T* y, i64 rows, i64 cols, i64 packs, F f, kernels::RowOperand<In>... in) {
  constexpr int k = Pack<T>::size;
  const i64 first = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x;
  const i64 step = static_cast<i64>(blockDim.x) * gridDim.x;
  for (i64 r0 = blockIdx.y; r0 < rows; r0 += static_cast<i64>(gridDim.y) * kRowUnroll) {
    for (i64 p = first; p < packs; p += step) {
      Pack<T> v[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const i64 r = r0 + static_cast<i64>(u) * gridDim.y;
        if (r < rows) v[u] = map_pack<T>(f, load_wide<k>(in.p + r * in.row_stride + p * k)...);
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const i64 r = r0 + static_cast<i64>(u) * gridDim.y;
        if (r < rows) store_wide(y + r * cols + p * k, v[u]);
      }
    }
    for (int u = 0; u < kRowUnroll; ++u) {
      const i64 r = r0 + static_cast<i64>(u) * gridDim.y;
      if (r >= rows) break;
      for (i64 i = packs * k + first; i < cols; i += step) y[r * cols + i] = f(in.p[r * in.row_stride + i]...);
    }
  }
}

template <class T, class F, class... In>
void launch_rows_map(T* y, i64 rows, i64 cols, const F& f, const kernels::RowOperand<In>&... in) {
  constexpr int k = Pack<T>::size;
  // Every row of every operand starts aligned when the bases are and a row is a whole number of packs (whose
  // narrowest operand, bool, then also steps by a multiple of its access width).
  const bool packed = cols % k == 0 && is_aligned(y, 16) && (is_aligned(in.p, 16) && ...);
  const i64 packs = packed ? cols / k : 0;
  const dim3 grid(blocks_for(packed ? packs : cols),
                  static_cast<unsigned int>(std::min<i64>((rows + kRowUnroll - 1) / kRowUnroll, 65535)));
  rows_map_kernel<<<grid, kThreads, 0, stream()>>>(y, rows, cols, packs, f, in...);
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const i64 n = out.numel();
  if (n == 0) return;
  kernels::dispatch_all(out.dtype(), "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::run_where<T>(
        cond, a, b, out, [&](T* po, auto f, const auto*... in) { launch_map(po, n, f, in...); },
        [&](T* po, i64 rows, i64 cols, auto f, auto... in) { launch_rows_map(po, rows, cols, f, in...); },
        [&](T* po, const auto& si, auto f, const auto*... in) { launch_strided_map(po, n, si, f, in...); });
  });
}

}  // namespace gpu
}  // namespace minidl
