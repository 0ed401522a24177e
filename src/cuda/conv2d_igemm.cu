// Implicit-GEMM convolution on TF32 tensor cores (see conv2d_igemm.h). The CPU reference these kernels are
// tested against is cpu::conv2d_* (tests/test_gpu_kernels.cpp, ImplicitGemm*).
//
// Forward and input gradient are the GEMM of conv_gemm.cuh, with A gathered from global memory tile by tile.
//
// The weight gradient reduces over all output pixels: dW[k][crs] = sum_m dY(m, k) · X(m, crs). The m range is
// split over blocks (there are only a few output tiles) that write partial sums; a second kernel adds the
// splits in a fixed order, so results are bitwise repeatable.
#include "cuda/conv2d_igemm.h"

#include <mma.h>

#include <algorithm>
#include <cstdint>

#include "cuda/context.h"
#include "cuda/per_device.h"
#include "cuda/conv_gemm.cuh"
#include "cuda/sum_splits.cuh"

namespace minidl {
namespace gpu {
namespace {

namespace wmma = nvcuda::wmma;
using kernels::Conv2dParams;

// TF32 fragments exist from compute capability 8.0 on. Code generated for an older architecture (a build with
// such CMAKE_CUDA_ARCHITECTURES) leaves the kernels empty, and DeviceSetup::tf32_kernels keeps them from being used.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define MINIDL_IGEMM_BODY 0
#else
#define MINIDL_IGEMM_BODY 1
#endif

// One tensor-core step: m16 n16 k8 in TF32 with float accumulation.
constexpr int kFragM = 16, kFragN = 16, kFragK = 8;

// Tiles go through a ring of kStages shared-memory buffers: while tile t is multiplied, tiles t+1 and t+2 load.
// The fp32 values go to the tensor cores as they are; TF32 math uses their upper 19 bits (truncation, which
// the tests' tolerance allows for), which spares a conversion per fragment element.
constexpr int kStages = 3;

/// Runs tiles [first, last) through the ring: `issue(t)` starts tile t's copies into buffer t % kStages, and
/// `multiply(t)` consumes that buffer once the copies of every thread have landed. Returns with every copy done
/// and the block synchronised, so that the epilogue can reuse the buffers.
template <class Issue, class Multiply>
__device__ __forceinline__ void run_pipeline(int first, int last, Issue issue, Multiply multiply) {
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (first + s < last) issue(first + s);
    commit_copies();  // empty groups too, so that the wait below counts the same everywhere
  }
  for (int t = first; t < last; ++t) {
    wait_copies<kStages - 2>();
    // Tile t has landed for every thread, and every warp is done with tile t - 1, whose buffer is refilled next.
    __syncthreads();
    if (t + kStages - 1 < last) issue(t + kStages - 1);
    commit_copies();
    multiply(t);
  }
  wait_copies<0>();
  __syncthreads();
}

template <int FN>
using Accumulators = wmma::fragment<wmma::accumulator, kFragM, kFragN, kFragK, float>[2][FN];

/// acc[i][j] += A_i B_j over a `depth`-deep tile in shared memory, a warp's 32 x 16·FN share of the block's
/// tile: A_i is the 16-row fragment at a(i, kk) (layout ALayout, leading dimension lda), B_j the 16-column
/// fragment at b(j, kk) (column-major, leading dimension ldb).
template <class ALayout, int FN, int Depth, class APtr, class BPtr>
__device__ __forceinline__ void multiply_tile(Accumulators<FN>& acc, APtr a, int lda, BPtr b, int ldb) {
#pragma unroll
  for (int kk = 0; kk < Depth; kk += kFragK) {
    wmma::fragment<wmma::matrix_a, kFragM, kFragN, kFragK, wmma::precision::tf32, ALayout> fa[2];
    wmma::fragment<wmma::matrix_b, kFragM, kFragN, kFragK, wmma::precision::tf32, wmma::col_major> fb[FN];
#pragma unroll
    for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], a(i, kk), lda);
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(fb[j], b(j, kk), ldb);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
  }
}

// ---- forward and input gradient ------------------------------------------------------------------------

// A block computes a 128 x BN output tile with 8 warps (4 along m, 2 along the channels); the reduction runs in
// tiles of 32. BN is 64, or 32 where there are only 32 channels (the forward of a 32-filter layer, the input
// gradient of a layer with 32 input channels).
constexpr int kBM = 128, kBK = 32, kThreads = 256;
// Shared tiles are column-major for wmma (A as [k][m], B as [col][k], C as [col][m]); rows padded by 8 floats
// against bank conflicts while keeping every fragment pointer 32-byte aligned, as wmma requires.
constexpr int kLdA = kBM + 8, kLdB = kBK + 8, kLdC = kBM + 8;
// The block's tap table (one entry per reduction index) sits behind the tiles in shared memory.
constexpr int kMaxReduction = 4096;

template <int BN>
struct GemmTiles {
  static constexpr int kStageFloats = kBK * kLdA + BN * kLdB;
  static constexpr int kFloats = kStages * kStageFloats > BN * kLdC ? kStages * kStageFloats : BN * kLdC;
  static constexpr int kFragsN = BN / 32;  // a warp's tile is 32 x BN/2: 2 x kFragsN fragments
  static std::size_t bytes(int reduction_tiles) {
    return sizeof(float) * kFloats + sizeof(Tap) * static_cast<std::size_t>(reduction_tiles) * kBK;
  }
};

template <int BN>
__global__ void __launch_bounds__(kThreads, 2) gather_gemm_kernel(ConvGemm g) {
#if MINIDL_IGEMM_BODY
  using Tiles = GemmTiles<BN>;
  extern __shared__ __align__(128) float smem[];
  Tap* taps = reinterpret_cast<Tap*>(smem + Tiles::kFloats);
  const int tid = threadIdx.x, warp = tid / 32;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * BN;
  const int tiles = (g.K + kBK - 1) / kBK;
  for (int k = tid; k < tiles * kBK; k += kThreads) taps[k] = g.a.tap(k, g.K);

  // A: this thread copies row m of every tile, at reduction rows a_k, a_k + 2, ...
  const int a_m = tid % kBM, a_k = tid / kBM;
  const int m = m0 + a_m;
  int image = 0, pixel = 0, base = 0, top = kOutOfRange, left = kOutOfRange;  // out of range: copies zeros
  if (m < g.M) g.a.locate(m, image, pixel, base, top, left);
  // B: reduction row b_k of channels b_n, b_n + 8, ...
  const int b_k = tid % kBK, b_n = tid / kBK;
  constexpr int kARows = kThreads / kBM, kBCols = kThreads / kBK;

  auto issue = [&](int t) {
    float* As = smem + (t % kStages) * Tiles::kStageFloats;
    float* Bs = As + kBK * kLdA;
    const Tap* tt = taps + t * kBK;
#pragma unroll
    for (int i = 0; i < kBK / kARows; ++i) {
      const int row = a_k + i * kARows;
      const float* src = nullptr;
      const bool inside = g.a.at(base, top, left, tt[row], src);
      copy_async(As + row * kLdA + a_m, src, inside);
    }
    const Tap& tb = tt[b_k];
#pragma unroll
    for (int i = 0; i < BN / kBCols; ++i) {
      const int c = b_n + i * kBCols, col = n0 + c;
      const bool ok = tb.weight >= 0 && col < g.N;
      copy_async(Bs + c * kLdB + b_k, ok ? g.w + tb.weight + col * g.w_col : g.w, ok);
    }
  };

  constexpr int kFN = Tiles::kFragsN;
  Accumulators<kFN> acc;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kFN; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  const int wm = (warp % 4) * 32, wn = (warp / 4) * (BN / 2);

  __syncthreads();  // the tap table
  run_pipeline(0, tiles, issue, [&](int t) {
    const float* As = smem + (t % kStages) * Tiles::kStageFloats;
    const float* Bs = As + kBK * kLdA;
    multiply_tile<wmma::col_major, kFN, kBK>(
        acc, [&](int i, int kk) { return As + kk * kLdA + wm + i * kFragM; }, kLdA,
        [&](int j, int kk) { return Bs + (wn + j * kFragN) * kLdB + kk; }, kLdB);
  });

  // Through shared memory so that each thread writes one output pixel of several channels: consecutive
  // threads write consecutive pixels of a channel plane.
  float* Cs = smem;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kFN; ++j)
      wmma::store_matrix_sync(Cs + (wn + j * kFragN) * kLdC + wm + i * kFragM, acc[i][j], kLdC, wmma::mem_col_major);
  __syncthreads();
  if (m >= g.M) return;
  float* out = g.out + image * g.out_image + pixel;
  for (int c = a_k; c < BN; c += kARows) {
    const int col = n0 + c;
    if (col >= g.N) break;
    out[col * g.a.plane] = kernels::activate(g.act, Cs[c * kLdC + a_m] + (g.bias ? __ldg(g.bias + col) : 0.f));
  }
#endif
}

/// Per-device launch facts, looked up once (host calls cost microseconds, as much as a small kernel): the
/// multiprocessor count, whether the kernels loaded for the device were compiled for compute capability 8.0 or
/// later, and (as a side effect) the kernels' dynamic shared memory limit raised to the most they ever ask for.
struct DeviceSetup {
  int multiprocessors = 0;
  bool tf32_kernels = false;
};
const DeviceSetup& device_setup();

template <int BN>
void launch_gather_gemm_tiles(const ConvGemm& g) {
  const std::size_t bytes = GemmTiles<BN>::bytes((g.K + kBK - 1) / kBK);
  const dim3 grid((g.M + kBM - 1) / kBM, (g.N + BN - 1) / BN);
  gather_gemm_kernel<BN><<<grid, kThreads, bytes, stream()>>>(g);
  MINIDL_CUDA_KERNEL_CHECK();
}

void launch_gather_gemm(const ConvGemm& g) {
  device_setup();
  if (g.N <= 32) {
    launch_gather_gemm_tiles<32>(g);
  } else {
    launch_gather_gemm_tiles<64>(g);
  }
}

// ---- weight gradient ------------------------------------------------------------------------------------

struct WeightGradArgs {
  Gather x;         // m over the output pixels, k over (c, r, s)
  const float* dy;  // dy[image * dy_image + k * plane + pixel]
  float* partial;   // split s writes partial[s * K * CRS + k * CRS + crs]
  int M, K, CRS, dy_image;
  int m_tiles_per_split;
};

// 64 output channels x 64 (c, r, s) per block of 4 warps, each 32 x 32; 32 output pixels per reduction tile.
constexpr int kWM = 64, kWN = 64, kWK = 32, kWThreads = 128;
constexpr int kLdW = kWK + 8, kLdWC = kWN + 8;  // A as [k][m] row-major, B as [crs][m] (col-major B), C as [k][crs]
constexpr int kWStageFloats = kWM * kLdW + kWN * kLdW;
constexpr int kWSmemFloats = kStages * kWStageFloats > kWM * kLdWC ? kStages * kWStageFloats : kWM * kLdWC;
constexpr std::size_t kWSmemBytes = sizeof(float) * kWSmemFloats;
static_assert(kWM == kWN && kWThreads % kWK == 0, "load mapping");

__global__ void __launch_bounds__(kWThreads, 3) weight_grad_kernel(WeightGradArgs g) {
#if MINIDL_IGEMM_BODY
  extern __shared__ __align__(128) float smem[];
  __shared__ Tap taps[kWN];
  const int tid = threadIdx.x, warp = tid / 32;
  const int k0 = blockIdx.x * kWM, c0 = blockIdx.y * kWN;
  // This block's taps are fixed: one table for the whole reduction.
  for (int i = tid; i < kWN; i += kWThreads) taps[i] = g.x.tap(c0 + i, g.CRS);

  // Each thread copies one output pixel (column mm of the tile) for rows row, row + 4, ... of both operands.
  const int mm = tid % kWK, row = tid / kWK;
  constexpr int kRowStep = kWThreads / kWK;
  auto issue = [&](int mt) {
    float* As = smem + (mt % kStages) * kWStageFloats;
    float* Bs = As + kWM * kLdW;
    const int m = mt * kWK + mm;
    int image = 0, pixel = 0, base = 0, top = kOutOfRange, left = kOutOfRange;
    const bool m_ok = m < g.M;
    if (m_ok) g.x.locate(m, image, pixel, base, top, left);
    const float* dy = g.dy + image * g.dy_image + pixel;
#pragma unroll
    for (int i = 0; i < kWM / kRowStep; ++i) {
      const int r = row + i * kRowStep, k = k0 + r;
      const bool ok = m_ok && k < g.K;
      copy_async(As + r * kLdW + mm, ok ? dy + k * g.x.plane : g.dy, ok);
      const float* src = nullptr;
      const bool inside = g.x.at(base, top, left, taps[r], src);
      copy_async(Bs + r * kLdW + mm, src, inside);
    }
  };

  Accumulators<2> acc;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  const int wr = (warp % 2) * 32, wc = (warp / 2) * 32;

  const int m_tiles = (g.M + kWK - 1) / kWK;
  const int first = blockIdx.z * g.m_tiles_per_split;
  const int last = min(first + g.m_tiles_per_split, m_tiles);
  __syncthreads();  // the tap table
  run_pipeline(first, last, issue, [&](int mt) {
    const float* As = smem + (mt % kStages) * kWStageFloats;
    const float* Bs = As + kWM * kLdW;
    multiply_tile<wmma::row_major, 2, kWK>(
        acc, [&](int i, int kk) { return As + (wr + i * kFragM) * kLdW + kk; }, kLdW,
        [&](int j, int kk) { return Bs + (wc + j * kFragN) * kLdW + kk; }, kLdW);
  });

  float* Cs = smem;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(Cs + (wr + i * kFragM) * kLdWC + wc + j * kFragN, acc[i][j], kLdWC,
                              wmma::mem_row_major);
  __syncthreads();
  float* out = g.partial + static_cast<std::int64_t>(blockIdx.z) * g.K * g.CRS;
  for (int i = tid; i < kWM * kWN; i += kWThreads) {
    const int k = k0 + i / kWN, crs = c0 + i % kWN;
    if (k < g.K && crs < g.CRS) out[k * g.CRS + crs] = Cs[(i / kWN) * kLdWC + i % kWN];
  }
#endif
}

const DeviceSetup& device_setup() {
  static PerDevice<DeviceSetup> setups;
  return setups.get([](int device) {
    DeviceSetup d;
    MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&d.multiprocessors, cudaDevAttrMultiProcessorCount, device));
    cudaFuncAttributes a{}, b{};
    MINIDL_CUDA_CHECK(cudaFuncGetAttributes(&a, gather_gemm_kernel<64>));
    MINIDL_CUDA_CHECK(cudaFuncGetAttributes(&b, weight_grad_kernel));
    d.tf32_kernels = a.binaryVersion >= 80 && b.binaryVersion >= 80;
    constexpr int kMaxTiles = kMaxReduction / kBK;
    MINIDL_CUDA_CHECK(cudaFuncSetAttribute(gather_gemm_kernel<32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(GemmTiles<32>::bytes(kMaxTiles))));
    MINIDL_CUDA_CHECK(cudaFuncSetAttribute(gather_gemm_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(GemmTiles<64>::bytes(kMaxTiles))));
    MINIDL_CUDA_CHECK(cudaFuncSetAttribute(weight_grad_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kWSmemBytes)));
    return d;
  });
}

bool fits_int(std::int64_t v) { return v >= 0 && v < (std::int64_t{1} << 31); }

}  // namespace

bool igemm_supports(const Conv2dParams& p, ConvPass pass) {
  if (p.groups != 1) return false;
  if (pass == ConvPass::kBackwardInput && (p.stride_h != 1 || p.stride_w != 1)) return false;
  if (!device_setup().tf32_kernels) return false;
  // The forward and input-gradient kernels hold a tap table of the whole reduction in shared memory.
  const std::int64_t reduction = pass == ConvPass::kBackwardInput ? p.K * p.R * p.S : p.C * p.R * p.S;
  if (pass != ConvPass::kBackwardWeight && reduction > kMaxReduction) return false;
  // A window's base offset (before the bounds check) lies outside its tensor by at most a few rows: the
  // padding, the dilated kernel extent and one stride.
  const std::int64_t reach = (p.pad_h + p.dil_h * p.R + p.stride_h + 1) *
                             (std::max(p.W, p.Q) + p.pad_w + p.dil_w * p.S + p.stride_w + 1);
  return fits_int(p.N * p.C * p.H * p.W + reach) && fits_int(p.N * p.K * p.P * p.Q + reach) &&
         fits_int(p.K * p.C * p.R * p.S) && fits_int(p.N * p.P * p.Q + kBM) && fits_int(p.N * p.H * p.W + kBM);
}

void igemm_conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias, float* y,
                          kernels::Activation act) {
  launch_gather_gemm(forward_gemm(p, x, w, bias, y, act));
}

void igemm_conv2d_backward_input(const Conv2dParams& p, const float* dy, const float* w, float* dx) {
  launch_gather_gemm(backward_input_gemm(p, dy, w, dx));
}

void igemm_conv2d_backward_weight(const Conv2dParams& p, const float* x, const float* dy, float* dw) {
  WeightGradArgs g;
  g.x = input_gather(p, x);
  g.dy = dy;
  g.M = static_cast<int>(p.N * p.P * p.Q), g.K = static_cast<int>(p.K), g.CRS = static_cast<int>(p.C * p.R * p.S);
  g.dy_image = static_cast<int>(p.K * p.P * p.Q);
  // Few output tiles and a long reduction: split the pixels so that one wave of blocks (three per
  // multiprocessor) runs, each with at least four reduction tiles.
  const int out_tiles = ((g.K + kWM - 1) / kWM) * ((g.CRS + kWN - 1) / kWN);
  const int m_tiles = (g.M + kWK - 1) / kWK;
  int splits = std::max(1, std::min((3 * device_setup().multiprocessors + out_tiles - 1) / out_tiles, (m_tiles + 3) / 4));
  g.m_tiles_per_split = (m_tiles + splits - 1) / splits;
  splits = (m_tiles + g.m_tiles_per_split - 1) / g.m_tiles_per_split;
  const int n = g.K * g.CRS;
  const Workspace partial(splits == 1 ? 0 : sizeof(float) * static_cast<std::size_t>(n) * splits, "split partial sums");
  g.partial = splits == 1 ? dw : partial.as<float>();
  const dim3 grid((g.K + kWM - 1) / kWM, (g.CRS + kWN - 1) / kWN, splits);
  weight_grad_kernel<<<grid, kWThreads, kWSmemBytes, stream()>>>(g);
  MINIDL_CUDA_KERNEL_CHECK();
  if (splits > 1) sum_splits(g.partial, splits, n, dw);
}

}  // namespace gpu
}  // namespace minidl
