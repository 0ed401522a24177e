#pragma once
// Launch helpers shared by the CUDA primitive kernels (copy.cu, elementwise.cu, random.cu, dropout.cu,
// reduce.cu, softmax.cu, cross_entropy.cu): 64-bit grid-stride loops, 16-byte packs, the elementwise map
// kernel and the deterministic block and warp sums.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "cuda/context.h"
#include "cuda/wide_access.cuh"
#include "kernels/strided_index.h"

namespace minidl {
namespace gpu {

using i64 = std::int64_t;
constexpr int kThreads = 256;
// Every index below is 64-bit and every loop strides over the grid (rows: over blocks), so tensors of more than
// 2^31 elements work and the grid never exceeds the launch limits.
constexpr i64 kMaxRowBlocks = 65535LL * 8;

inline unsigned int row_blocks(i64 rows) { return static_cast<unsigned int>(std::max<i64>(1, std::min(rows, kMaxRowBlocks))); }

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

/// y[off_0] = f(in_k[off_k]...) with the offsets of operand k (y first) of element i from a StridedIndex: the
/// map of views, broadcast and offset operands.
template <class T, class F, class... In, std::size_t... I, int N>
__device__ void strided_apply(T* y, const i64 (&off)[N], const F& f, std::index_sequence<I...>, const In*... in) {
  y[off[0]] = f(in[off[I + 1]]...);
}
template <int N, class T, class F, class... In>
__global__ void strided_map_kernel(T* y, i64 n, kernels::StridedIndex<N> si, F f, const In*... in) {
  GRID_STRIDE(i, n) {
    i64 off[N];
    si.offsets(i, off);
    strided_apply(y, off, f, std::index_sequence_for<In...>{}, in...);
  }
}
template <int N, class T, class F, class... In>
void launch_strided_map(T* y, i64 n, const kernels::StridedIndex<N>& si, const F& f, const In*... in) {
  static_assert(N == 1 + sizeof...(In), "launch_strided_map: one StridedIndex operand per pointer");
  if (n == 0) return;
  strided_map_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(y, n, si, f, in...);
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T> struct Constant {
  T v;
  __device__ T operator()() const { return v; }
};

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

/// Deterministic warp-wide sum (fixed butterfly order); every lane gets the result.
template <class T> __device__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

constexpr int kWarp = 32;

}  // namespace gpu
}  // namespace minidl
