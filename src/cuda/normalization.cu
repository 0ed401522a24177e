// Row normalisation on the GPU (kernels/backend.h; formulas in kernels/normalization.h, shared with the CPU
// reference src/cpu/normalization.cpp). A row belongs to a group of W warps: one warp for rows of up to 8 packs a
// lane (LayerNorm over GPT widths), a whole block of 8 warps for longer rows (GroupNorm's and InstanceNorm's
// planes). Rows move in 16-byte packs when n and every pointer allow; sums are per thread, then over the warp's
// butterfly and the group's warps in a fixed order, so results do not depend on scheduling.
//
// Backward: each lane owns the same columns of every row its group visits, so it sums dgamma and dbeta for them
// without atomics, in shared memory (global memory where 2n values do not fit); each block adds up its groups and
// writes one partial row, and a second kernel sums the partial rows per column. No host synchronisation, no
// allocation beyond a gpu::Workspace: capturable.
#include <algorithm>

#include "cuda/launch.cuh"
#include "cuda/per_device.h"
#include "kernels/backend.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::RowNormGrad;
using kernels::RowNormParams;
using kernels::RowStats;

constexpr i64 kMaxPacksPerLane = 8;              // longer rows take a block of warps each
constexpr int kBlockWarps = 8;                   // warps of a row's group when it takes a block
constexpr std::size_t kSharedBytes = 48 * 1024;  // the accumulators' limit without an opt-in

/// Sum of v over the W warps of this thread's row group (group = warp / W); every thread gets the result. W > 1
/// uses red[] (one value per warp of the block) and synchronises the block: all its threads must call.
template <int W, class A>
__device__ A group_sum(A v, A* red) {
  v = warp_sum(v);
  if constexpr (W == 1) {
    return v;
  } else {
    const int warp = threadIdx.x / kWarp, first = warp / W * W;
    if (threadIdx.x % kWarp == 0) red[warp] = v;
    __syncthreads();
    A total = 0;
#pragma unroll
    for (int w = 0; w < W; ++w) total += red[first + w];
    __syncthreads();
    return total;
  }
}

/// Thread geometry of a block of S row groups of W warps each.
template <int W, int S>
struct RowGroups {
  static constexpr int kRowThreads = kWarp * W;
  __device__ static int slot() { return threadIdx.x / kRowThreads; }
  __device__ static int lane() { return threadIdx.x % kRowThreads; }
};

template <int K, class T>
__device__ Wide<T, K> load_or(const T* p, i64 q, T otherwise) {
  if (p) return load_wide<K>(p + q * K);
  Wide<T, K> r;
#pragma unroll
  for (int j = 0; j < K; ++j) r.v[j] = otherwise;
  return r;
}

template <class T, int K, int W, int S>
__global__ void __launch_bounds__(kWarp* W* S)
    row_norm_forward_kernel(RowNormParams p, const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd) {
  using G = RowGroups<W, S>;
  __shared__ T red[W * S];
  const i64 packs = p.n / K;
  for (i64 base = static_cast<i64>(blockIdx.x) * S; base < p.rows; base += static_cast<i64>(gridDim.x) * S) {
    const i64 row = base + G::slot();
    const bool active = row < p.rows;  // every thread stays for group_sum's barriers
    const T* xr = x + (active ? row : 0) * p.n;
    T sum = 0;
    if (p.centered && active) {
      for (i64 q = G::lane(); q < packs; q += G::kRowThreads) {
        const Wide<T, K> v = load_wide<K>(xr + q * K);
#pragma unroll
        for (int j = 0; j < K; ++j) sum += v.v[j];
      }
    }
    RowStats<T> s;
    s.mean = RowStats<T>::mean_of(group_sum<W>(sum, red), p.n, p.centered);
    T sq = 0;  // the second pass reads the row again from cache: no E[x^2] - E[x]^2 cancellation
    if (active) {
      for (i64 q = G::lane(); q < packs; q += G::kRowThreads) {
        const Wide<T, K> v = load_wide<K>(xr + q * K);
#pragma unroll
        for (int j = 0; j < K; ++j) sq += (v.v[j] - s.mean) * (v.v[j] - s.mean);
      }
    }
    s.rstd = RowStats<T>::rstd_of(group_sum<W>(sq, red), p.n, p.eps);
    if (!active) continue;
    for (i64 q = G::lane(); q < packs; q += G::kRowThreads) {
      const Wide<T, K> v = load_wide<K>(xr + q * K), gw = load_or<K>(gamma, q, T(1)), bw = load_or<K>(beta, q, T(0));
      Wide<T, K> out;
#pragma unroll
      for (int j = 0; j < K; ++j) out.v[j] = s.xhat(v.v[j]) * gw.v[j] + bw.v[j];
      store_wide(y + row * p.n + q * K, out);
    }
    if (G::lane() == 0) {
      mean[row] = s.mean;
      rstd[row] = s.rstd;
    }
  }
}

/// `acc` (2n values: dgamma's then dbeta's, or null when neither is wanted) lies in shared memory when
/// `shared_acc`, else in this group's own partial row of `partial`. Shared accumulators are summed per block into
/// partial row blockIdx.x at the end.
template <class T, int K, int W, int S>
__global__ void __launch_bounds__(kWarp* W* S)
    row_norm_backward_kernel(RowNormParams p, const T* x, const T* dy, const T* gamma, const T* mean, const T* rstd,
                             T* dx, T* partial, bool shared_acc) {
  using G = RowGroups<W, S>;
  __shared__ T red[W * S];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const i64 packs = p.n / K, width = 2 * p.n;
  T* acc = nullptr;
  if (partial) {
    acc = shared_acc ? reinterpret_cast<T*>(smem_raw) + G::slot() * width
                     : partial + (static_cast<i64>(blockIdx.x) * S + G::slot()) * width;
    for (i64 q = G::lane(); q < packs; q += G::kRowThreads) {
#pragma unroll
      for (int j = 0; j < K; ++j) acc[q * K + j] = acc[p.n + q * K + j] = 0;
    }
  }
  for (i64 base = static_cast<i64>(blockIdx.x) * S; base < p.rows; base += static_cast<i64>(gridDim.x) * S) {
    const i64 row = base + G::slot();
    const bool active = row < p.rows;
    const i64 off = (active ? row : 0) * p.n;
    const RowStats<T> s{active ? mean[row] : T(0), active ? rstd[row] : T(0)};
    T sum_g = 0, sum_gx = 0;
    if (active) {
      for (i64 q = G::lane(); q < packs; q += G::kRowThreads) {
        const Wide<T, K> xv = load_wide<K>(x + off + q * K), dv = load_wide<K>(dy + off + q * K);
        const Wide<T, K> gw = load_or<K>(gamma, q, T(1));
        Wide<T, K> dg;
#pragma unroll
        for (int j = 0; j < K; ++j) {
          const T xhat = s.xhat(xv.v[j]), g = dv.v[j] * gw.v[j];
          sum_g += g;
          sum_gx += g * xhat;
          dg.v[j] = dv.v[j] * xhat;
        }
        if (acc) {  // one pack-wide access each: a lane's K accumulators are contiguous (no bank conflicts)
          auto* ag = reinterpret_cast<Wide<T, K>*>(acc + q * K);
          auto* ab = reinterpret_cast<Wide<T, K>*>(acc + p.n + q * K);
          Wide<T, K> a = *ag, b = *ab;
#pragma unroll
          for (int j = 0; j < K; ++j) {
            a.v[j] += dg.v[j];
            b.v[j] += dv.v[j];
          }
          *ag = a;
          *ab = b;
        }
      }
    }
    if (!dx) continue;  // uniform over the grid: no group_sum is skipped by part of a block
    const RowNormGrad<T> grad(s.rstd, group_sum<W>(sum_g, red), group_sum<W>(sum_gx, red), p.n, p.centered);
    if (!active) continue;
    for (i64 q = G::lane(); q < packs; q += G::kRowThreads) {
      const Wide<T, K> xv = load_wide<K>(x + off + q * K), dv = load_wide<K>(dy + off + q * K);
      const Wide<T, K> gw = load_or<K>(gamma, q, T(1));
      Wide<T, K> out;
#pragma unroll
      for (int j = 0; j < K; ++j) out.v[j] = grad(dv.v[j] * gw.v[j], s.xhat(xv.v[j]));
      store_wide(dx + off + q * K, out);
    }
  }
  if (partial && shared_acc) {
    __syncthreads();
    const T* sacc = reinterpret_cast<const T*>(smem_raw);
    for (i64 c = threadIdx.x; c < width; c += blockDim.x) {
      T total = 0;
#pragma unroll
      for (int g = 0; g < S; ++g) total += sacc[g * width + c];
      partial[static_cast<i64>(blockIdx.x) * width + c] = total;
    }
  }
}

constexpr int kSumSlices = 32;  // partial rows summed side by side per column (loads in flight, not a long chain)

/// dgamma[c] / dbeta[c] = the sum over the `parts` partial rows (2n values each) of column c / n + c. A block takes
/// 32 columns (threadIdx.x) and splits the rows into kSumSlices strided slices (threadIdx.y), whose sums are then
/// added in a fixed order.
template <class T>
__global__ void __launch_bounds__(kWarp* kSumSlices)
    sum_partials_kernel(const T* partial, i64 parts, i64 n, T* dgamma, T* dbeta) {
  __shared__ T slice_sums[kSumSlices][kWarp + 1];
  for (i64 tile = blockIdx.x; tile * kWarp < 2 * n; tile += gridDim.x) {
    const i64 c = tile * kWarp + threadIdx.x;
    T total = 0;
    if (c < 2 * n) {
      for (i64 b = threadIdx.y; b < parts; b += kSumSlices) total += partial[b * 2 * n + c];
    }
    slice_sums[threadIdx.y][threadIdx.x] = total;
    __syncthreads();
    if (threadIdx.y == 0 && c < 2 * n) {
      total = 0;
      for (int s = 0; s < kSumSlices; ++s) total += slice_sums[s][threadIdx.x];
      if (c < n) {
        if (dgamma) dgamma[c] = total;
      } else if (dbeta) {
        dbeta[c - n] = total;
      }
    }
    __syncthreads();
  }
}

int sm_count() {
  static PerDevice<int> counts;
  return counts.get([](int device) {
    int n = 0;
    MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  });
}

/// The pack width: 16 bytes where n and every given pointer allow, else one element.
template <class T>
bool packs_fit(const RowNormParams& p, std::initializer_list<const void*> ptrs) {
  if (p.n % Pack<T>::size != 0) return false;
  return std::all_of(ptrs.begin(), ptrs.end(), [](const void* q) { return is_aligned(q, 16); });
}

/// f(K, W-tag) for the row geometry of p: calls launch.template operator()<K, W>().
template <class T, class F>
void with_geometry(const RowNormParams& p, bool wide, F&& launch) {
  constexpr int KW = Pack<T>::size;
  const bool one_warp = (p.n + kWarp * KW - 1) / (kWarp * KW) <= kMaxPacksPerLane;
  if (wide) {
    one_warp ? launch.template operator()<KW, 1>() : launch.template operator()<KW, kBlockWarps>();
  } else {
    one_warp ? launch.template operator()<1, 1>() : launch.template operator()<1, kBlockWarps>();
  }
}

unsigned int groups_grid(i64 rows, int rows_per_block, i64 cap) {
  return static_cast<unsigned int>(std::max<i64>(1, std::min((rows + rows_per_block - 1) / rows_per_block, cap)));
}

template <class T>
struct ForwardLaunch {
  const RowNormParams& p;
  const T *x, *gamma, *beta;
  T *y, *mean, *rstd;
  template <int K, int W>
  void operator()() const {
    constexpr int S = kBlockWarps / W;
    row_norm_forward_kernel<T, K, W, S>
        <<<groups_grid(p.rows, S, kMaxRowBlocks), kWarp * W * S, 0, stream()>>>(p, x, gamma, beta, y, mean, rstd);
  }
};

template <class T>
struct BackwardLaunch {
  const RowNormParams& p;
  const T *x, *dy, *gamma, *mean, *rstd;
  T *dx, *dgamma, *dbeta;
  template <int K, int W>
  void operator()() const {
    constexpr int S = W == 1 ? 4 : 1;  // a warp's rows: four groups of accumulators per block fit 48 KiB
    const bool want_params = dgamma || dbeta;
    // Enough blocks to fill the device twice over: more only add partial rows to sum.
    const unsigned int grid =
        groups_grid(p.rows, S, want_params ? 2LL * sm_count() * (kBlockWarps / (W * S)) : kMaxRowBlocks);
    const std::size_t acc_bytes = static_cast<std::size_t>(S * 2 * p.n) * sizeof(T);
    const bool shared_acc = want_params && acc_bytes <= kSharedBytes;
    const i64 parts = shared_acc ? grid : static_cast<i64>(grid) * S;
    Workspace partial(want_params ? static_cast<std::size_t>(parts * 2 * p.n) * sizeof(T) : 0,
                      "row_norm_backward's partial sums");
    row_norm_backward_kernel<T, K, W, S><<<grid, kWarp * W * S, shared_acc ? acc_bytes : 0, stream()>>>(
        p, x, dy, gamma, mean, rstd, dx, partial.as<T>(), shared_acc);
    MINIDL_CUDA_KERNEL_CHECK();
    if (want_params) {
      sum_partials_kernel<T><<<blocks_for(2 * p.n, kWarp), dim3(kWarp, kSumSlices), 0, stream()>>>(
          partial.as<T>(), parts, p.n, dgamma, dbeta);
    }
  }
};

}  // namespace

template <class T>
void row_norm_forward(const RowNormParams& p, const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd) {
  if (p.rows == 0 || p.n == 0) return;
  with_geometry<T>(p, packs_fit<T>(p, {x, gamma, beta, y}), ForwardLaunch<T>{p, x, gamma, beta, y, mean, rstd});
  MINIDL_CUDA_KERNEL_CHECK();
}

template <class T>
void row_norm_backward(const RowNormParams& p, const T* x, const T* dy, const T* gamma, const T* mean, const T* rstd,
                       T* dx, T* dgamma, T* dbeta) {
  if (p.n == 0) return;
  if (p.rows == 0) {  // no rows: the parameter gradients are sums of nothing
    if (dgamma) MINIDL_CUDA_CHECK(cudaMemsetAsync(dgamma, 0, static_cast<std::size_t>(p.n) * sizeof(T), stream()));
    if (dbeta) MINIDL_CUDA_CHECK(cudaMemsetAsync(dbeta, 0, static_cast<std::size_t>(p.n) * sizeof(T), stream()));
    return;
  }
  if (!dx && !dgamma && !dbeta) return;
  with_geometry<T>(p, packs_fit<T>(p, {x, dy, gamma, dx}),
                   BackwardLaunch<T>{p, x, dy, gamma, mean, rstd, dx, dgamma, dbeta});
  MINIDL_CUDA_KERNEL_CHECK();
}

#define MINIDL_INSTANTIATE_ROW_NORM(T)                                                                               \
  template void row_norm_forward<T>(const RowNormParams&, const T*, const T*, const T*, T*, T*, T*);                 \
  template void row_norm_backward<T>(const RowNormParams&, const T*, const T*, const T*, const T*, const T*, T*, T*, \
                                     T*);
MINIDL_INSTANTIATE_ROW_NORM(float)
MINIDL_INSTANTIATE_ROW_NORM(double)
#undef MINIDL_INSTANTIATE_ROW_NORM

}  // namespace gpu
}  // namespace minidl
