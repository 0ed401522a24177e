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

#include "cuda/context.h"

namespace minidl {
namespace gpu {
namespace {

namespace wmma = nvcuda::wmma;
using kernels::Conv2dParams;

// TF32 fragments exist from compute capability 8.0 on. Code generated for an older architecture (a build with
// such CMAKE_CUDA_ARCHITECTURES) leaves the kernels empty, and kernels_have_tf32() keeps them from being used.
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
  __device__ float load(int base, int top, int left, const Tap& t) const {
    const bool inside = static_cast<unsigned>(top + t.dr) < static_cast<unsigned>(src_h) &&
                        static_cast<unsigned>(left + t.ds) < static_cast<unsigned>(src_w);
    return inside ? __ldg(src + base + t.offset) : 0.f;
  }
};

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

// 128 x 64 output tile per block of 8 warps, each warp 32 x 32; 32-deep reduction tiles.
constexpr int kBM = 128, kBN = 64, kBK = 32, kThreads = 256;
// Shared tiles are column-major for wmma (A as [k][m], B as [col][k], C as [col][m]); rows padded by 8 floats
// against bank conflicts while keeping every fragment pointer 32-byte aligned, as wmma requires.
constexpr int kLdA = kBM + 8, kLdB = kBK + 8, kLdC = kBM + 8;
constexpr int kTileFloats = kBK * kLdA + kBN * kLdB;
constexpr int kSmemFloats = kTileFloats > kBN * kLdC ? kTileFloats : kBN * kLdC;
constexpr int kALoads = kBM * kBK / kThreads, kBLoads = kBN * kBK / kThreads;
static_assert(kThreads % kBM == 0 && kThreads % kBK == 0, "load mapping");

__global__ void __launch_bounds__(kThreads, 2) gather_gemm_kernel(GemmArgs g) {
#if MINIDL_IGEMM_BODY
  __shared__ __align__(128) float smem[kSmemFloats];
  __shared__ Tap taps[2][kBK];
  float* As = smem;
  float* Bs = smem + kBK * kLdA;
  const int tid = threadIdx.x, warp = tid / 32;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;

  // A: this thread loads row m of every tile, at reduction rows a_k, a_k + 2, ...
  const int a_m = tid % kBM, a_k = tid / kBM;
  const int m = m0 + a_m;
  const bool m_ok = m < g.M;
  int image = 0, pixel = 0, base = 0, top = kOutOfRange, left = kOutOfRange;
  if (m_ok) g.a.locate(m, image, pixel, base, top, left);
  // B: reduction row b_k of output channels b_n, b_n + 8, ...
  const int b_k = tid % kBK, b_n = tid / kBK;

  float ra[kALoads], rb[kBLoads];
  auto load_tile = [&](const Tap* t) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) ra[i] = g.a.load(base, top, left, t[a_k + i * (kThreads / kBM)]);
    const Tap& tb = t[b_k];
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int col = n0 + b_n + i * (kThreads / kBK);
      rb[i] = (tb.weight >= 0 && col < g.N) ? __ldg(g.w + tb.weight + col * g.w_col) : 0.f;
    }
  };

  wmma::fragment<wmma::accumulator, kFragM, kFragN, kFragK, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  const int wm = (warp % 4) * 32, wn = (warp / 4) * 32;

  const int tiles = (g.K + kBK - 1) / kBK;
  if (tid < kBK) taps[0][tid] = g.a.tap(tid, g.K);
  __syncthreads();
  load_tile(taps[0]);
  for (int t = 0; t < tiles; ++t) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) As[(a_k + i * (kThreads / kBM)) * kLdA + a_m] = wmma::__float_to_tf32(ra[i]);
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) Bs[(b_n + i * (kThreads / kBK)) * kLdB + b_k] = wmma::__float_to_tf32(rb[i]);
    // The other table was last read while loading tile t, before the barrier that ended iteration t - 1.
    if (t + 1 < tiles && tid < kBK) taps[(t + 1) & 1][tid] = g.a.tap((t + 1) * kBK + tid, g.K);
    __syncthreads();
    if (t + 1 < tiles) load_tile(taps[(t + 1) & 1]);  // in flight while the tensor cores work on tile t
#pragma unroll
    for (int kk = 0; kk < kBK; kk += kFragK) {
      wmma::fragment<wmma::matrix_a, kFragM, kFragN, kFragK, wmma::precision::tf32, wmma::col_major> fa[2];
      wmma::fragment<wmma::matrix_b, kFragM, kFragN, kFragK, wmma::precision::tf32, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], As + kk * kLdA + wm + i * kFragM, kLdA);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], Bs + (wn + j * kFragN) * kLdB + kk, kLdB);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Through shared memory so that each thread writes one output pixel of several channels: consecutive
  // threads write consecutive pixels of a channel plane.
  float* Cs = smem;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(Cs + (wn + j * kFragN) * kLdC + wm + i * kFragM, acc[i][j], kLdC, wmma::mem_col_major);
  __syncthreads();
  if (!m_ok) return;
  float* out = g.out + image * g.out_image + pixel;
  for (int c = a_k; c < kBN; c += kThreads / kBM) {
    const int col = n0 + c;
    if (col >= g.N) break;
    out[col * g.a.plane] = Cs[c * kLdC + a_m] + (g.bias ? __ldg(g.bias + col) : 0.f);
  }
#endif
}

void launch_gather_gemm(const GemmArgs& g) {
  const dim3 grid((g.M + kBM - 1) / kBM, (g.N + kBN - 1) / kBN);
  gather_gemm_kernel<<<grid, kThreads, 0, stream()>>>(g);
  MINIDL_CUDA_KERNEL_CHECK();
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
constexpr int kWTileFloats = kWM * kLdW + kWN * kLdW;
constexpr int kWSmemFloats = kWTileFloats > kWM * kLdWC ? kWTileFloats : kWM * kLdWC;
constexpr int kWLoads = kWM * kWK / kWThreads;
static_assert(kWM == kWN && kWThreads % kWK == 0, "load mapping");

__global__ void __launch_bounds__(kWThreads, 4) weight_grad_kernel(WeightGradArgs g) {
#if MINIDL_IGEMM_BODY
  __shared__ __align__(128) float smem[kWSmemFloats];
  __shared__ Tap taps[kWN];
  float* As = smem;
  float* Bs = smem + kWM * kLdW;
  const int tid = threadIdx.x, warp = tid / 32;
  const int k0 = blockIdx.x * kWM, c0 = blockIdx.y * kWN;
  // This block's taps are fixed: one table for the whole reduction.
  for (int i = tid; i < kWN; i += kWThreads) taps[i] = g.x.tap(c0 + i, g.CRS);

  // Each thread loads one output pixel (column mm of the tile) for rows row, row + 4, ... of both operands.
  const int mm = tid % kWK, row = tid / kWK;
  constexpr int kRowStep = kWThreads / kWK;
  float ra[kWLoads], rb[kWLoads];
  auto load_tile = [&](int mt) {
    const int m = mt * kWK + mm;
    int image = 0, pixel = 0, base = 0, top = kOutOfRange, left = kOutOfRange;
    const bool m_ok = m < g.M;
    if (m_ok) g.x.locate(m, image, pixel, base, top, left);
    const float* dy = g.dy + image * g.dy_image + pixel;
#pragma unroll
    for (int i = 0; i < kWLoads; ++i) {
      const int k = k0 + row + i * kRowStep;
      ra[i] = (m_ok && k < g.K) ? __ldg(dy + k * g.x.plane) : 0.f;
      rb[i] = g.x.load(base, top, left, taps[row + i * kRowStep]);
    }
  };

  wmma::fragment<wmma::accumulator, kFragM, kFragN, kFragK, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  const int wr = (warp % 2) * 32, wc = (warp / 2) * 32;

  const int m_tiles = (g.M + kWK - 1) / kWK;
  const int first = blockIdx.z * g.m_tiles_per_split;
  const int last = min(first + g.m_tiles_per_split, m_tiles);
  __syncthreads();
  if (first < last) load_tile(first);
  for (int mt = first; mt < last; ++mt) {
#pragma unroll
    for (int i = 0; i < kWLoads; ++i) {
      As[(row + i * kRowStep) * kLdW + mm] = wmma::__float_to_tf32(ra[i]);
      Bs[(row + i * kRowStep) * kLdW + mm] = wmma::__float_to_tf32(rb[i]);
    }
    __syncthreads();
    if (mt + 1 < last) load_tile(mt + 1);
#pragma unroll
    for (int kk = 0; kk < kWK; kk += kFragK) {
      wmma::fragment<wmma::matrix_a, kFragM, kFragN, kFragK, wmma::precision::tf32, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, kFragM, kFragN, kFragK, wmma::precision::tf32, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], As + (wr + i * kFragM) * kLdW + kk, kLdW);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], Bs + (wc + j * kFragN) * kLdW + kk, kLdW);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

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

/// dw[i] = sum over the splits of partial[s * n + i], in split order.
__global__ void sum_splits_kernel(const float* partial, int splits, int n, float* dw) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float s = 0.f;
    for (int k = 0; k < splits; ++k) s += partial[static_cast<std::int64_t>(k) * n + i];
    dw[i] = s;
  }
}

int multiprocessors() {
  int count = 0;
  MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, current_device()));
  return count;
}

/// Whether the kernels loaded for this device were compiled for compute capability 8.0 or later.
bool kernels_have_tf32() {
  cudaFuncAttributes a{}, b{};
  MINIDL_CUDA_CHECK(cudaFuncGetAttributes(&a, gather_gemm_kernel));
  MINIDL_CUDA_CHECK(cudaFuncGetAttributes(&b, weight_grad_kernel));
  return a.binaryVersion >= 80 && b.binaryVersion >= 80;
}

bool fits_int(std::int64_t v) { return v >= 0 && v < (std::int64_t{1} << 31); }

}  // namespace

bool igemm_supports(const Conv2dParams& p, ConvPass pass) {
  if (p.groups != 1) return false;
  if (pass == ConvPass::kBackwardInput && (p.stride_h != 1 || p.stride_w != 1)) return false;
  if (!kernels_have_tf32()) return false;
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
  // Few output tiles and a long reduction: split the pixels so that about four blocks per multiprocessor run,
  // each with at least four reduction tiles.
  const int out_tiles = ((g.K + kWM - 1) / kWM) * ((g.CRS + kWN - 1) / kWN);
  const int m_tiles = (g.M + kWK - 1) / kWK;
  int splits = std::max(1, std::min((4 * multiprocessors() + out_tiles - 1) / out_tiles, (m_tiles + 3) / 4));
  g.m_tiles_per_split = (m_tiles + splits - 1) / splits;
  splits = (m_tiles + g.m_tiles_per_split - 1) / g.m_tiles_per_split;
  const int n = g.K * g.CRS;
  g.partial = splits == 1 ? dw : static_cast<float*>(workspace(sizeof(float) * static_cast<std::size_t>(n) * splits));
  const dim3 grid((g.K + kWM - 1) / kWM, (g.CRS + kWN - 1) / kWN, splits);
  weight_grad_kernel<<<grid, kWThreads, 0, stream()>>>(g);
  MINIDL_CUDA_KERNEL_CHECK();
  if (splits > 1) {
    sum_splits_kernel<<<blocks_for(n), 256, 0, stream()>>>(g.partial, splits, n, dw);
    MINIDL_CUDA_KERNEL_CHECK();
  }
}

}  // namespace gpu
}  // namespace minidl
