// Flash attention (Dao et al., FlashAttention-2's loop order) in float32 on CUDA cores. Never materialises the
// L x S matrix of scores: the forward pass walks the key tiles of one query tile keeping each query's running
// maximum m and softmax denominator l (the online softmax), and saves lse = m + log(l); the backward pass
// recomputes each tile of probabilities P = exp(scale * Q·Kᵀ - lse) from it.
//
// Tiling: a block of 256 threads works on 64-row tiles staged in shared memory. Thread (ty, tx) = (t / 16, t % 16)
// owns rows 4·ty .. 4·ty+3 of its block's own tile and, of a 64-wide tile of scores, the columns tx, tx+16, tx+32,
// tx+48; of a head-dim-wide tile of outputs the columns tx, tx+16, ... Two micro-kernels do all the arithmetic:
// tile_abt (a 64x64 tile of A·Bᵀ over the head dim) and tile_ab_accumulate (a 64x64 tile times a 64xDP tile). The
// 16 threads that share a row are 16 consecutive lanes of one warp, so a row's max and sum are warp shuffles.
// Shared-memory rows are padded by four floats: they stay 16-byte aligned for vector loads, and the lanes that read
// rows tx, tx+16, ... at one column hit distinct banks.
//
// Head dims are padded (with zeros, in shared memory only) to DP = 32, 64 or 128; query/key dims (E) and value
// dims (Ev) may differ. The backward pass is two kernels: one per key tile accumulates dK and dV over the query
// tiles, one per query tile accumulates dQ over the key tiles. That recomputes Q·Kᵀ and dO·Vᵀ once more than
// FlashAttention-2's single kernel, whose dQ needs atomic adds; here every result is written once, by one thread,
// so the gradients are deterministic and need no zeroed buffer.
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "cuda/context.h"
#include "cuda/flash_attention.h"
#include "cuda/per_device.h"
#include "minidl/errors.h"

namespace minidl {
namespace gpu {
namespace {

constexpr int kTile = 64;                // rows of every tile (queries and keys)
constexpr int kThreads = 256;            // 16 x 16
constexpr int kRowsPerThread = 4;        // rows 4·ty .. 4·ty+3 of the block's own tile
constexpr int kScoreStride = kTile + 4;  // a 64x64 tile of scores in shared memory, padded (16-byte rows)
constexpr float kNegInf = -INFINITY;

template <int DP>
struct Tiles {
  static constexpr int kStride = DP + 4;           // one padded row of a head-dim-wide tile
  static constexpr int kFloats = kTile * kStride;  // one head-dim-wide tile
  static constexpr int kScoreFloats = kTile * kScoreStride;
  static constexpr int kCols = DP / 16;  // output columns per thread
  static constexpr std::size_t forward_bytes() { return (3 * kFloats + kScoreFloats) * sizeof(float); }
  static constexpr std::size_t dq_bytes() { return (4 * kFloats + kScoreFloats) * sizeof(float); }
  static constexpr std::size_t dkdv_bytes() { return (4 * kFloats + 2 * kScoreFloats) * sizeof(float); }
};

__device__ __forceinline__ int thread_row() { return static_cast<int>(threadIdx.x) / 16; }
__device__ __forceinline__ int thread_col() { return static_cast<int>(threadIdx.x) % 16; }

/// The first element of head (b, h) of an operand, b = blockIdx.x / heads, h = blockIdx.x % heads.
template <class P>
__device__ __forceinline__ P head_base(const AttentionRows<P>& t, std::int64_t heads) {
  const std::int64_t bh = blockIdx.x;
  return t.data + (bh / heads) * t.batch_stride + (bh % heads) * t.head_stride;
}

/// Stages rows [row0, row0 + 64) x cols [0, DP) of one head in shared memory; zeros past n_rows and n_cols, so
/// padded rows and columns add nothing to the products. Consecutive threads read consecutive columns.
template <int DP>
__device__ void load_tile(float* tile, const float* head, std::int64_t row_stride, int row0, int n_rows, int n_cols) {
  for (int i = threadIdx.x; i < kTile * DP; i += kThreads) {
    const int r = i / DP, c = i % DP, row = row0 + r;
    tile[r * Tiles<DP>::kStride + c] =
        row < n_rows && c < n_cols ? head[static_cast<std::int64_t>(row) * row_stride + c] : 0.f;
  }
}

/// Component k (0..3) of v; k is a constant once the loops around it are unrolled.
__device__ __forceinline__ float component(const float4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

/// acc[i][j] = Σ_d A[4·ty + i][d] · B[tx + 16·j][d]: this thread's 4x4 of the 64x64 tile A·Bᵀ. Four d at a time
/// as 16-byte loads: the rows of B that 8 consecutive lanes read start 4 banks apart (stride DP + 4), so each
/// quarter-warp's loads are conflict-free, and A's rows are broadcast to the 16 lanes that share them.
template <int DP>
__device__ __forceinline__ void tile_abt(const float* a, const float* b, float (&acc)[kRowsPerThread][4]) {
  const int ty = thread_row(), tx = thread_col();
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
#pragma unroll 2
  for (int d = 0; d < DP; d += 4) {
    float4 av[kRowsPerThread], bv[4];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
      av[i] = *reinterpret_cast<const float4*>(a + (4 * ty + i) * Tiles<DP>::kStride + d);
#pragma unroll
    for (int j = 0; j < 4; ++j) bv[j] = *reinterpret_cast<const float4*>(b + (tx + 16 * j) * Tiles<DP>::kStride + d);
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(component(av[i], k), component(bv[j], k), acc[i][j]);
  }
}

/// acc[i][j] += Σ_c P[4·ty + i][c] · T[c][tx + 16·j]: a 64x64 tile of weights times a 64xDP tile, this thread's
/// 4 x DP/16 of the result. P's rows are read four columns at a time (broadcast), T's by consecutive lanes.
template <int DP>
__device__ __forceinline__ void tile_ab_accumulate(const float* p, const float* t,
                                                   float (&acc)[kRowsPerThread][Tiles<DP>::kCols]) {
  const int ty = thread_row(), tx = thread_col();
#pragma unroll 2
  for (int c = 0; c < kTile; c += 4) {
    float4 pv[kRowsPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
      pv[i] = *reinterpret_cast<const float4*>(p + (4 * ty + i) * kScoreStride + c);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int j = 0; j < Tiles<DP>::kCols; ++j) {
        const float tv = t[(c + k) * Tiles<DP>::kStride + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) acc[i][j] = fmaf(component(pv[i], k), tv, acc[i][j]);
      }
    }
  }
}

/// Max and sum over the 16 lanes that share a row (lanes 0-15 or 16-31 of the warp).
__device__ __forceinline__ float row_max(float v) {
#pragma unroll
  for (int o = 8; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int o = 8; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Whether query `row` sees key `col`.
__device__ __forceinline__ bool visible(const FlashAttentionShape& s, int row, int col) {
  return row < s.L && col < s.S && (!s.causal || col <= row);
}

/// The key rows a query tile starting at q0 sees: all, or under the causal mask those up to its last row.
__device__ __forceinline__ int keys_seen(const FlashAttentionShape& s, int q0) {
  return s.causal ? min(s.S, q0 + kTile) : s.S;
}

/// Query tile index of this block: the highest first, since under the causal mask they see the most keys and
/// starting them first shortens the tail.
__device__ __forceinline__ int query_tile() { return static_cast<int>(gridDim.y - 1 - blockIdx.y); }

// ---- forward: one block per (head, query tile) ----------------------------------------------------------------
template <int DP>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(FlashAttentionShape s, AttentionRows<const float*> q, AttentionRows<const float*> k,
                         AttentionRows<const float*> v, AttentionRows<float*> out, float* lse) {
  extern __shared__ float smem[];
  float* qs = smem;
  float* ks = qs + Tiles<DP>::kFloats;
  float* vs = ks + Tiles<DP>::kFloats;
  float* ps = vs + Tiles<DP>::kFloats;
  const int ty = thread_row(), tx = thread_col(), q0 = query_tile() * kTile;
  const float* kh = head_base(k, s.heads);
  const float* vh = head_base(v, s.heads);
  load_tile<DP>(qs, head_base(q, s.heads), q.row_stride, q0, s.L, s.E);

  float m[kRowsPerThread], l[kRowsPerThread], acc[kRowsPerThread][Tiles<DP>::kCols];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    m[i] = kNegInf;
    l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < Tiles<DP>::kCols; ++j) acc[i][j] = 0.f;
  }
  const int n_keys = keys_seen(s, q0);
  for (int k0 = 0; k0 < n_keys; k0 += kTile) {
    __syncthreads();  // the previous tile's readers of ks, vs and ps are done
    load_tile<DP>(ks, kh, k.row_stride, k0, s.S, s.E);
    load_tile<DP>(vs, vh, v.row_stride, k0, s.S, s.Ev);
    __syncthreads();
    float sc[kRowsPerThread][4];
    tile_abt<DP>(qs, ks, sc);
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int row = q0 + 4 * ty + i;
      float tile_max = kNegInf;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sc[i][j] = visible(s, row, k0 + tx + 16 * j) ? sc[i][j] * s.scale : kNegInf;
        tile_max = fmaxf(tile_max, sc[i][j]);
      }
      const float m_new = fmaxf(m[i], row_max(tile_max));
      // A row that has seen no visible key yet keeps m = -inf; subtracting 0 then gives exp(-inf) = 0, not NaN.
      const float m_ref = m_new == kNegInf ? 0.f : m_new;
      const float rescale = __expf(m[i] - m_ref);
      float tile_sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = __expf(sc[i][j] - m_ref);
        tile_sum += p;
        ps[(4 * ty + i) * kScoreStride + tx + 16 * j] = p;
      }
      l[i] = l[i] * rescale + row_sum(tile_sum);
      m[i] = m_new;
#pragma unroll
      for (int j = 0; j < Tiles<DP>::kCols; ++j) acc[i][j] *= rescale;
    }
    __syncthreads();
    tile_ab_accumulate<DP>(ps, vs, acc);
  }

  float* oh = head_base(out, s.heads);
  const std::int64_t lse_base = static_cast<std::int64_t>(blockIdx.x) * s.L;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = q0 + 4 * ty + i;
    if (row >= s.L) continue;
    // A row without a visible key (only with S = 0, which does not come here) would get zeros and lse = +inf,
    // so that the backward pass's probabilities exp(score - lse) are 0 too.
    const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
#pragma unroll
    for (int j = 0; j < Tiles<DP>::kCols; ++j) {
      const int col = tx + 16 * j;
      if (col < s.Ev) oh[static_cast<std::int64_t>(row) * out.row_stride + col] = acc[i][j] * inv;
    }
    if (tx == 0) lse[lse_base + row] = l[i] > 0.f ? m[i] + logf(l[i]) : INFINITY;
  }
}

// ---- backward, dQ: one block per (head, query tile) ---------------------------------------------------------
// dS = P ∘ (dO·Vᵀ - delta), dQ = scale · dS·K over the key tiles.
template <int DP>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dq_kernel(FlashAttentionShape s, AttentionRows<const float*> q, AttentionRows<const float*> k,
                             AttentionRows<const float*> v, AttentionRows<const float*> dout, const float* lse,
                             const float* delta, AttentionRows<float*> dq) {
  extern __shared__ float smem[];
  float* qs = smem;
  float* dos = qs + Tiles<DP>::kFloats;
  float* ks = dos + Tiles<DP>::kFloats;
  float* vs = ks + Tiles<DP>::kFloats;
  float* dss = vs + Tiles<DP>::kFloats;
  const int ty = thread_row(), tx = thread_col(), q0 = query_tile() * kTile;
  const float* kh = head_base(k, s.heads);
  const float* vh = head_base(v, s.heads);
  load_tile<DP>(qs, head_base(q, s.heads), q.row_stride, q0, s.L, s.E);
  load_tile<DP>(dos, head_base(dout, s.heads), dout.row_stride, q0, s.L, s.Ev);
  const std::int64_t stat_base = static_cast<std::int64_t>(blockIdx.x) * s.L;
  float row_lse[kRowsPerThread], row_delta[kRowsPerThread], acc[kRowsPerThread][Tiles<DP>::kCols];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = q0 + 4 * ty + i;
    row_lse[i] = row < s.L ? lse[stat_base + row] : 0.f;
    row_delta[i] = row < s.L ? delta[stat_base + row] : 0.f;
#pragma unroll
    for (int j = 0; j < Tiles<DP>::kCols; ++j) acc[i][j] = 0.f;
  }
  const int n_keys = keys_seen(s, q0);
  for (int k0 = 0; k0 < n_keys; k0 += kTile) {
    __syncthreads();
    load_tile<DP>(ks, kh, k.row_stride, k0, s.S, s.E);
    load_tile<DP>(vs, vh, v.row_stride, k0, s.S, s.Ev);
    __syncthreads();
    float sc[kRowsPerThread][4], dp[kRowsPerThread][4];
    tile_abt<DP>(qs, ks, sc);
    tile_abt<DP>(dos, vs, dp);
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int row = q0 + 4 * ty + i;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = visible(s, row, k0 + tx + 16 * j) ? __expf(sc[i][j] * s.scale - row_lse[i]) : 0.f;
        dss[(4 * ty + i) * kScoreStride + tx + 16 * j] = p * (dp[i][j] - row_delta[i]);
      }
    }
    __syncthreads();
    tile_ab_accumulate<DP>(dss, ks, acc);
  }
  float* dqh = head_base(dq, s.heads);
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = q0 + 4 * ty + i;
    if (row >= s.L) continue;
#pragma unroll
    for (int j = 0; j < Tiles<DP>::kCols; ++j) {
      const int col = tx + 16 * j;
      if (col < s.E) dqh[static_cast<std::int64_t>(row) * dq.row_stride + col] = acc[i][j] * s.scale;
    }
  }
}

// ---- backward, dK and dV: one block per (head, key tile) -------------------------------------------------------
// With the transposed tiles Pᵀ and dSᵀ (rows are keys): dV = Pᵀ·dO, dK = scale · dSᵀ·Q over the query tiles.
template <int DP>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dkdv_kernel(FlashAttentionShape s, AttentionRows<const float*> q, AttentionRows<const float*> k,
                               AttentionRows<const float*> v, AttentionRows<const float*> dout, const float* lse,
                               const float* delta, AttentionRows<float*> dk, AttentionRows<float*> dv) {
  extern __shared__ float smem[];
  float* ks = smem;
  float* vs = ks + Tiles<DP>::kFloats;
  float* qs = vs + Tiles<DP>::kFloats;
  float* dos = qs + Tiles<DP>::kFloats;
  float* pts = dos + Tiles<DP>::kFloats;
  float* dsts = pts + Tiles<DP>::kScoreFloats;
  const int ty = thread_row(), tx = thread_col(), k0 = static_cast<int>(blockIdx.y) * kTile;
  const float* qh = head_base(q, s.heads);
  const float* doh = head_base(dout, s.heads);
  load_tile<DP>(ks, head_base(k, s.heads), k.row_stride, k0, s.S, s.E);
  load_tile<DP>(vs, head_base(v, s.heads), v.row_stride, k0, s.S, s.Ev);
  const std::int64_t stat_base = static_cast<std::int64_t>(blockIdx.x) * s.L;
  float dk_acc[kRowsPerThread][Tiles<DP>::kCols], dv_acc[kRowsPerThread][Tiles<DP>::kCols];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
    for (int j = 0; j < Tiles<DP>::kCols; ++j) dk_acc[i][j] = dv_acc[i][j] = 0.f;
  // Under the causal mask the queries before k0 see none of these keys; tiles of both kinds start at multiples
  // of 64, so the first query tile that matters starts at k0.
  for (int q0 = s.causal ? k0 : 0; q0 < s.L; q0 += kTile) {
    __syncthreads();
    load_tile<DP>(qs, qh, q.row_stride, q0, s.L, s.E);
    load_tile<DP>(dos, doh, dout.row_stride, q0, s.L, s.Ev);
    __syncthreads();
    float st[kRowsPerThread][4], dpt[kRowsPerThread][4];
    tile_abt<DP>(ks, qs, st);    // (Q·Kᵀ)ᵀ: rows are keys, columns queries
    tile_abt<DP>(vs, dos, dpt);  // (dO·Vᵀ)ᵀ
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = q0 + tx + 16 * j;  // the query
      const float q_lse = row < s.L ? lse[stat_base + row] : 0.f;
      const float q_delta = row < s.L ? delta[stat_base + row] : 0.f;
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const float p = visible(s, row, k0 + 4 * ty + i) ? __expf(st[i][j] * s.scale - q_lse) : 0.f;
        pts[(4 * ty + i) * kScoreStride + tx + 16 * j] = p;
        dsts[(4 * ty + i) * kScoreStride + tx + 16 * j] = p * (dpt[i][j] - q_delta);
      }
    }
    __syncthreads();
    tile_ab_accumulate<DP>(pts, dos, dv_acc);
    tile_ab_accumulate<DP>(dsts, qs, dk_acc);
  }
  float* dkh = head_base(dk, s.heads);
  float* dvh = head_base(dv, s.heads);
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int key = k0 + 4 * ty + i;
    if (key >= s.S) continue;
#pragma unroll
    for (int j = 0; j < Tiles<DP>::kCols; ++j) {
      const int col = tx + 16 * j;
      if (col < s.E) dkh[static_cast<std::int64_t>(key) * dk.row_stride + col] = dk_acc[i][j] * s.scale;
      if (col < s.Ev) dvh[static_cast<std::int64_t>(key) * dv.row_stride + col] = dv_acc[i][j];
    }
  }
}

// ---- launch ----------------------------------------------------------------------------------------------------
/// Allows each kernel its shared memory (above the default 48 KiB), once per device.
template <int DP>
void allow_shared_memory() {
  MINIDL_CUDA_CHECK(cudaFuncSetAttribute(flash_forward_kernel<DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(Tiles<DP>::forward_bytes())));
  MINIDL_CUDA_CHECK(cudaFuncSetAttribute(flash_backward_dq_kernel<DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(Tiles<DP>::dq_bytes())));
  MINIDL_CUDA_CHECK(cudaFuncSetAttribute(flash_backward_dkdv_kernel<DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(Tiles<DP>::dkdv_bytes())));
}

void setup_device() {
  static PerDevice<bool> done;
  done.get([](int device) {
    int limit = 0;
    MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    MINIDL_CHECK(static_cast<std::size_t>(limit) >= Tiles<kFlashMaxHeadDim>::dkdv_bytes(), CudaError,
                 "flash attention: device ", device, " offers ", limit, " bytes of shared memory per block, the ",
                 "kernels need ", Tiles<kFlashMaxHeadDim>::dkdv_bytes(), " (turn them off with ",
                 "cuda::set_flash_attention_enabled(false))");
    allow_shared_memory<32>();
    allow_shared_memory<64>();
    allow_shared_memory<kFlashMaxHeadDim>();
    return true;
  });
}

/// Calls f with the padded head dim DP (32, 64 or 128) that holds both E and Ev, as std::integral_constant.
template <class F>
void with_head_dim(const FlashAttentionShape& s, F&& f) {
  const int d = s.E > s.Ev ? s.E : s.Ev;
  if (d <= 32) {
    f(std::integral_constant<int, 32>());
  } else if (d <= 64) {
    f(std::integral_constant<int, 64>());
  } else {
    f(std::integral_constant<int, kFlashMaxHeadDim>());
  }
}

int tiles(int rows) { return (rows + kTile - 1) / kTile; }

}  // namespace

void flash_attention_forward(const FlashAttentionShape& s, AttentionRows<const float*> q, AttentionRows<const float*> k,
                             AttentionRows<const float*> v, AttentionRows<float*> out, float* lse) {
  setup_device();
  const dim3 grid(static_cast<unsigned>(s.batch * s.heads), static_cast<unsigned>(tiles(s.L)));
  with_head_dim(s, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    flash_forward_kernel<DP><<<grid, kThreads, Tiles<DP>::forward_bytes(), stream()>>>(s, q, k, v, out, lse);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void flash_attention_backward(const FlashAttentionShape& s, AttentionRows<const float*> q,
                              AttentionRows<const float*> k, AttentionRows<const float*> v,
                              AttentionRows<const float*> dout, const float* lse, const float* delta,
                              AttentionRows<float*> dq, AttentionRows<float*> dk, AttentionRows<float*> dv) {
  setup_device();
  const unsigned heads = static_cast<unsigned>(s.batch * s.heads);
  with_head_dim(s, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    flash_backward_dkdv_kernel<DP><<<dim3(heads, tiles(s.S)), kThreads, Tiles<DP>::dkdv_bytes(), stream()>>>(
        s, q, k, v, dout, lse, delta, dk, dv);
    MINIDL_CUDA_KERNEL_CHECK();
    flash_backward_dq_kernel<DP>
        <<<dim3(heads, tiles(s.L)), kThreads, Tiles<DP>::dq_bytes(), stream()>>>(s, q, k, v, dout, lse, delta, dq);
    MINIDL_CUDA_KERNEL_CHECK();
  });
}

}  // namespace gpu
}  // namespace minidl
