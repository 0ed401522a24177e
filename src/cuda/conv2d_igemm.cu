// Implicit-GEMM convolution on TF32 tensor cores (see conv2d_igemm.h). The CPU reference these kernels are
// tested against is cpu::conv2d_* (tests/test_gpu_kernels.cpp, ImplicitGemm*).
//
// Forward and input gradient are one GEMM shape: C[m][col] = sum_k A(m, k) B(k, col), where m runs over the
// output pixels (image, row, column), col over the output channels, and k over (channel, r, s) of the
// gathered operand. A is read straight from the NCHW input: the address of A(m, k) splits into a part of m
// (image, top-left corner of the window) and a part of k (channel plane, tap offset), so a per-tile table of
// the k parts plus bounds checks replace im2col. The input gradient with stride 1 is the same gather over dy
// with the taps mirrored (row offset -r·dil instead of +r·dil) and the weight read transposed.
//
// The weight gradient reduces over all output pixels: dW[k][crs] = sum_m dY(m, k) · X(m, crs). The m range is
// split over blocks (there are only a few output tiles) that write partial sums; a second kernel adds the
// splits in a fixed order, so results are bitwise repeatable.
#include "cuda/conv2d_igemm.h"

#include <mma.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>

#include "cuda/context.h"
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

// A tap table entry: offset of the tap in the gathered tensor, its row and column offsets (for the bounds
// check) and the offset of its weight. A k beyond the reduction length gets a row offset that fails every
// bounds check and a weight offset of -1, so the padded part of the last tile multiplies zeros.
struct Tap {
  int offset, dr, ds, weight;
};
constexpr int kOutOfRange = INT_MIN / 2;

/// How the gathered operand is addressed: element (m, k) of A is src[base(m) + tap(k).offset] when
/// 0 <= top(m) + tap.dr < src_h and 0 <= left(m) + tap.ds < src_w, else 0.
struct Gather {
  const float* src;
  int src_image, src_h, src_w;  // elements per image, plane height and width
  int plane, out_w;             // output plane size and width: m = image * plane + row * out_w + column
  int row_mul, row_off, col_mul, col_off;  // top = row * row_mul + row_off, left likewise
  int RS, S, channel, r_step, s_step;      // k = (ci, r, s): offset ci * channel + r * r_step * src_w + s * s_step
  int w_channel;                           // weight offset of k: ci * w_channel + r * S + s

  __device__ Tap tap(int k, int k_total) const {
    if (k >= k_total) return {0, kOutOfRange, kOutOfRange, -1};
    const int ci = k / RS, rs = k - ci * RS, r = rs / S, s = rs - r * S;
    const int dr = r * r_step, ds = s * s_step;
    return {ci * channel + dr * src_w + ds, dr, ds, ci * w_channel + rs};
  }
  /// Splits m into the base offset and the window corner; `image` and `pixel` are returned for the output.
  __device__ void locate(int m, int& image, int& pixel, int& base, int& top, int& left) const {
    image = m / plane;
    pixel = m - image * plane;
    const int row = pixel / out_w, column = pixel - row * out_w;
    top = row * row_mul + row_off;
    left = column * col_mul + col_off;
    base = image * src_image + top * src_w + left;
  }
  /// Whether element (m, k) lies inside the source; `ptr` receives its address, or a valid dummy address.
  __device__ bool at(int base, int top, int left, const Tap& t, const float*& ptr) const {
    const bool inside = static_cast<unsigned>(top + t.dr) < static_cast<unsigned>(src_h) &&
                        static_cast<unsigned>(left + t.ds) < static_cast<unsigned>(src_w);
    ptr = inside ? src + base + t.offset : src;
    return inside;
  }
};

// cp.async (compute capability 8.0 on): global-to-shared copies that skip the registers, so a tile's loads
// stay in flight while the tensor cores work on an earlier one. A copy whose predicate is false reads nothing
// and writes zeros (source size 0): that is how padding, tile tails and out-of-range taps become zeros.
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

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

struct GemmArgs {
  Gather a;
  const float* w;
  const float* bias;  // may be null
  float* out;         // out[image * out_image + col * plane + pixel]
  int M, N, K;        // GEMM sizes: output pixels, output channels, reduction length
  int w_col;          // weight offset of output channel col: col * w_col
  int out_image;
};

// A block computes a 128 x BN output tile with 8 warps (4 along m, 2 along the channels); the reduction runs in
// tiles of 32. BN is 64, or 32 where there are only 32 channels (the example's conv1 and conv2's input gradient).
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
__global__ void __launch_bounds__(kThreads, 2) gather_gemm_kernel(GemmArgs g) {
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
    out[col * g.a.plane] = Cs[c * kLdC + a_m] + (g.bias ? __ldg(g.bias + col) : 0.f);
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
void launch_gather_gemm_tiles(const GemmArgs& g) {
  const std::size_t bytes = GemmTiles<BN>::bytes((g.K + kBK - 1) / kBK);
  const dim3 grid((g.M + kBM - 1) / kBM, (g.N + BN - 1) / BN);
  gather_gemm_kernel<BN><<<grid, kThreads, bytes, stream()>>>(g);
  MINIDL_CUDA_KERNEL_CHECK();
}

void launch_gather_gemm(const GemmArgs& g) {
  device_setup();
  if (g.N <= 32) {
    launch_gather_gemm_tiles<32>(g);
  } else {
    launch_gather_gemm_tiles<64>(g);
  }
}

/// The input of the convolution as the gathered operand, m over the output pixels (forward and weight gradient).
Gather input_gather(const Conv2dParams& p, const float* x) {
  Gather a;
  a.src = x;
  a.src_image = static_cast<int>(p.C * p.H * p.W);
  a.src_h = static_cast<int>(p.H), a.src_w = static_cast<int>(p.W);
  a.plane = static_cast<int>(p.P * p.Q), a.out_w = static_cast<int>(p.Q);
  a.row_mul = static_cast<int>(p.stride_h), a.row_off = static_cast<int>(-p.pad_h);
  a.col_mul = static_cast<int>(p.stride_w), a.col_off = static_cast<int>(-p.pad_w);
  a.RS = static_cast<int>(p.R * p.S), a.S = static_cast<int>(p.S);
  a.channel = static_cast<int>(p.H * p.W);
  a.r_step = static_cast<int>(p.dil_h), a.s_step = static_cast<int>(p.dil_w);
  a.w_channel = a.RS;
  return a;
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
  static std::mutex mutex;
  static std::map<int, DeviceSetup> setups;
  const int device = current_device();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = setups.find(device);
  if (it != setups.end()) return it->second;
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
  return setups.emplace(device, d).first->second;
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

void igemm_conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias, float* y) {
  GemmArgs g;
  g.a = input_gather(p, x);
  g.w = w, g.bias = bias, g.out = y;
  g.M = static_cast<int>(p.N * p.P * p.Q), g.N = static_cast<int>(p.K), g.K = static_cast<int>(p.C * p.R * p.S);
  g.w_col = g.K;
  g.out_image = static_cast<int>(p.K * p.P * p.Q);
  launch_gather_gemm(g);
}

void igemm_conv2d_backward_input(const Conv2dParams& p, const float* dy, const float* w, float* dx) {
  // dx(n, c, h, w) = sum over (k, r, s) of dy(n, k, h + pad - r·dil, w + pad - s·dil) · w(k, c, r, s).
  GemmArgs g;
  Gather& a = g.a;
  a.src = dy;
  a.src_image = static_cast<int>(p.K * p.P * p.Q);
  a.src_h = static_cast<int>(p.P), a.src_w = static_cast<int>(p.Q);
  a.plane = static_cast<int>(p.H * p.W), a.out_w = static_cast<int>(p.W);
  a.row_mul = 1, a.row_off = static_cast<int>(p.pad_h), a.col_mul = 1, a.col_off = static_cast<int>(p.pad_w);
  a.RS = static_cast<int>(p.R * p.S), a.S = static_cast<int>(p.S);
  a.channel = static_cast<int>(p.P * p.Q);
  a.r_step = static_cast<int>(-p.dil_h), a.s_step = static_cast<int>(-p.dil_w);
  a.w_channel = static_cast<int>(p.C * p.R * p.S);  // k's weight (k, ., r, s); channel c adds c * RS
  g.w = w, g.bias = nullptr, g.out = dx;
  g.M = static_cast<int>(p.N * p.H * p.W), g.N = static_cast<int>(p.C), g.K = static_cast<int>(p.K * p.R * p.S);
  g.w_col = a.RS;
  g.out_image = static_cast<int>(p.C * p.H * p.W);
  launch_gather_gemm(g);
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
  g.partial = splits == 1 ? dw : static_cast<float*>(workspace(sizeof(float) * static_cast<std::size_t>(n) * splits));
  const dim3 grid((g.K + kWM - 1) / kWM, (g.CRS + kWN - 1) / kWN, splits);
  weight_grad_kernel<<<grid, kWThreads, kWSmemBytes, stream()>>>(g);
  MINIDL_CUDA_KERNEL_CHECK();
  if (splits > 1) sum_splits(g.partial, splits, n, dw);
}

}  // namespace gpu
}  // namespace minidl
