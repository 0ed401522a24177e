// Staged convolution kernels (see conv2d_staged.h): the GEMM of conv_gemm.cuh, with the block's band of source
// rows, its 32 output channels' weights and the reduction's tap offsets in shared memory. The CPU reference they
// are tested against is cpu::conv2d_* (tests/test_gpu_kernels.cpp, Staged*).
//
// A block computes output rows [row0, row0 + rows) of one image for 32 output channels. It copies the source
// rows those outputs read (every channel; zeros where the window hangs over the edge or into the padding) into
// a patch, so that A(m, k) = patch[base(m) + tap(k)] with no bounds check: base(m) is the window's corner in
// the patch, tap(k) the offset of (channel, r, s). Each warp then multiplies 32 output pixels by the 32
// channels with mma.m16n8k8 (TF32 inputs, fp32 accumulation), its fragments loaded from the patch and the
// weights directly, and writes the results.
#include "cuda/conv2d_staged.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cuda/context.h"
#include "cuda/conv_gemm.cuh"

namespace minidl {
namespace gpu {
namespace {

using kernels::Conv2dParams;

// mma.sync with TF32 operands exists from compute capability 8.0 on; code generated for older architectures
// leaves the kernel empty, and staged_band_choices() offers nothing there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define MINIDL_STAGED_BODY 0
#else
#define MINIDL_STAGED_BODY 1
#endif

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kGroup = 32;             // output channels per block
constexpr int kNTiles = kGroup / 8;    // n8 tiles of the mma
constexpr int kMTiles = 2;             // m16 tiles a warp multiplies at once (they share the weight fragments)
constexpr int kWarpPixels = 16 * kMTiles;

/// The band a block computes and the patch it stages; the same for every block of a launch.
struct Band {
  int rows;                 // output rows per block (the last band of an image may have fewer)
  int out_rows;             // output rows of an image
  int bands;                // blocks per image and channel group
  int src_row0, src_col0;   // source row / column of the patch's (0, 0) for output row 0: row0 * row_mul + src_row0
  int patch_h, patch_w;     // patch size per channel
  int channels;             // source channels (the reduction is channels x R x S)
  int k_padded;             // reduction rounded up to 8, the mma's depth
  int ldw;                  // weight row stride in shared memory, 4 mod 32: conflict-free fragment loads

  __host__ __device__ int patch_floats() const { return (channels * patch_h * patch_w + 3) / 4 * 4; }
  /// Shared memory: the patch, the weights, and two tables over the reduction (tap offsets, weight offsets).
  std::size_t bytes() const {
    return sizeof(float) * (static_cast<std::size_t>(patch_floats()) + static_cast<std::size_t>(kGroup) * ldw) +
           2 * sizeof(int) * static_cast<std::size_t>(k_padded);
  }
};

__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The fp32 values go to the tensor cores as they are: TF32 math uses their upper 19 bits (truncation, within
// the tests' TF32 tolerance), which spares a conversion per fragment element.
__device__ __forceinline__ unsigned bits(float v) { return __float_as_uint(v); }

__global__ void __launch_bounds__(kThreads) staged_gemm_kernel(ConvGemm g, Band b) {
#if MINIDL_STAGED_BODY
  extern __shared__ __align__(16) float smem[];
  float* patch = smem;
  float* ws = smem + b.patch_floats();
  int* taps = reinterpret_cast<int*>(ws + kGroup * b.ldw);
  const Gather& a = g.a;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int image = blockIdx.x / b.bands;
  const int row0 = (blockIdx.x - image * b.bands) * b.rows;
  const int rows = min(b.rows, b.out_rows - row0);
  const int n0 = blockIdx.y * kGroup;
  const int patch_row0 = row0 * a.row_mul + b.src_row0;
  const int plane = b.patch_h * b.patch_w;

  // The reduction's tables: each k's offset in the patch (past the reduction 0, a finite element whose weight
  // is 0) and in the weights (-1 past the reduction).
  int* weight_offsets = taps + b.k_padded;
  for (int k = tid; k < b.k_padded; k += kThreads) {
    const Tap t = a.tap(k, g.K);
    taps[k] = k < g.K ? (k / a.RS) * plane + t.dr * b.patch_w + t.ds : 0;
    weight_offsets[k] = t.weight;
  }
  // The patch: one warp per (channel, row), lanes along the row.
  const float* src = a.src + static_cast<std::int64_t>(image) * a.src_image;
  for (int r = warp; r < b.channels * b.patch_h; r += kWarps) {
    const int ci = r / b.patch_h, sr = patch_row0 + (r - ci * b.patch_h);
    const bool row_inside = static_cast<unsigned>(sr) < static_cast<unsigned>(a.src_h);
    const float* src_row = src + ci * a.channel + sr * a.src_w;
    for (int pc = lane; pc < b.patch_w; pc += 32) {
      const int sc = b.src_col0 + pc;
      const bool inside = row_inside && static_cast<unsigned>(sc) < static_cast<unsigned>(a.src_w);
      copy_async(patch + r * b.patch_w + pc, inside ? src_row + sc : a.src, inside);
    }
  }
  __syncthreads();  // the weight offsets
  // The weights as [channel][k], zero past the reduction and past the last output channel.
  for (int c = warp; c < kGroup; c += kWarps) {
    const int col = n0 + c;
    const float* w_col = g.w + static_cast<std::int64_t>(col < g.N ? col : 0) * g.w_col;
    for (int k = lane; k < b.k_padded; k += 32) {
      const int offset = weight_offsets[k];
      const bool ok = offset >= 0 && col < g.N;
      copy_async(ws + c * b.ldw + k, ok ? w_col + offset : g.w, ok);
    }
  }
  commit_copies();
  wait_copies<0>();
  __syncthreads();

  const int pixels = rows * a.out_w;  // output pixels of the band
  const int group = lane / 4, quad = lane % 4;
  float* out = g.out + static_cast<std::int64_t>(image) * g.out_image;
  for (int first = warp * kWarpPixels; first < pixels; first += kWarps * kWarpPixels) {
    // This lane's fragment rows: pixels first + group + 8 j.
    int base[2 * kMTiles], pixel[2 * kMTiles];
#pragma unroll
    for (int j = 0; j < 2 * kMTiles; ++j) {
      const int m = first + group + 8 * j;
      const int mm = m < pixels ? m : 0;
      const int row = mm / a.out_w, column = mm - row * a.out_w;
      base[j] = (row * a.row_mul + a.row_off + row0 * a.row_mul - patch_row0) * b.patch_w +
                column * a.col_mul + a.col_off - b.src_col0;
      pixel[j] = m < pixels ? (row0 + row) * a.out_w + column : -1;
    }
    float acc[kMTiles][kNTiles][4] = {};
    for (int k0 = 0; k0 < b.k_padded; k0 += 8) {
      const int o0 = taps[k0 + quad], o1 = taps[k0 + quad + 4];
      unsigned fa[kMTiles][4];
#pragma unroll
      for (int t = 0; t < kMTiles; ++t) {
        fa[t][0] = bits(patch[base[2 * t] + o0]);
        fa[t][1] = bits(patch[base[2 * t + 1] + o0]);
        fa[t][2] = bits(patch[base[2 * t] + o1]);
        fa[t][3] = bits(patch[base[2 * t + 1] + o1]);
      }
      if (k0 + 8 > g.K) {  // the last step of a reduction that is not a multiple of 8: zeros past its end
        const bool lo = k0 + quad < g.K, hi = k0 + quad + 4 < g.K;
#pragma unroll
        for (int t = 0; t < kMTiles; ++t) {
          if (!lo) fa[t][0] = fa[t][1] = 0;
          if (!hi) fa[t][2] = fa[t][3] = 0;
        }
      }
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        const float* wrow = ws + (n * 8 + group) * b.ldw + k0 + quad;
        const unsigned b0 = bits(wrow[0]), b1 = bits(wrow[4]);
#pragma unroll
        for (int t = 0; t < kMTiles; ++t) mma_tf32(acc[t][n], fa[t], b0, b1);
      }
    }
    // Accumulator element e of tile (t, n): pixel row group + 8 (e / 2), channel n * 8 + 2 quad + e % 2.
#pragma unroll
    for (int t = 0; t < kMTiles; ++t)
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int p = pixel[2 * t + e / 2], col = n0 + n * 8 + 2 * quad + e % 2;
          if (p >= 0 && col < g.N)
            out[col * a.plane + p] = kernels::activate(g.act, acc[t][n][e] + (g.bias ? __ldg(g.bias + col) : 0.f));
        }
  }
#endif
}

/// Per-device launch facts, looked up once: multiprocessors, shared memory (per block with opt-in, per
/// multiprocessor), how many blocks the registers allow, and whether the kernel loaded for the device has a body
/// (compute capability 8.0 or later).
struct DeviceSetup {
  int multiprocessors = 0;
  int smem_per_block = 0, smem_per_sm = 0;
  int blocks_by_registers = 0;  // resident blocks per multiprocessor that the registers allow
  bool tf32_kernel = false;
};

const DeviceSetup& device_setup() {
  static std::mutex mutex;
  static std::map<int, DeviceSetup> setups;
  const int device = current_device();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = setups.find(device);
  if (it != setups.end()) return it->second;
  DeviceSetup d;
  MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&d.multiprocessors, cudaDevAttrMultiProcessorCount, device));
  MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&d.smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes f{};
  MINIDL_CUDA_CHECK(cudaFuncGetAttributes(&f, staged_gemm_kernel));
  d.tf32_kernel = f.binaryVersion >= 80;
  MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  int registers = 0;
  MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&registers, cudaDevAttrMaxRegistersPerMultiprocessor, device));
  d.blocks_by_registers = registers / (std::max(f.numRegs, 1) * kThreads);
  d.smem_per_block -= static_cast<int>(f.sharedSizeBytes);
  MINIDL_CUDA_CHECK(cudaFuncSetAttribute(staged_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         d.smem_per_block));
  return setups.emplace(device, d).first->second;
}

/// The band for `g` with `bands` blocks per image along the rows.
Band band_of(const ConvGemm& g, int out_rows, int bands) {
  const Gather& a = g.a;
  const int R = a.RS / a.S;
  const int reach_r = (R - 1) * a.r_step, reach_s = (a.S - 1) * a.s_step;  // negative for mirrored taps
  Band b;
  b.out_rows = out_rows;
  b.rows = (out_rows + bands - 1) / bands;
  b.bands = (out_rows + b.rows - 1) / b.rows;
  b.src_row0 = a.row_off + std::min(0, reach_r);
  b.src_col0 = a.col_off + std::min(0, reach_s);
  b.patch_h = (b.rows - 1) * a.row_mul + std::abs(reach_r) + 1;
  b.patch_w = (a.out_w - 1) * a.col_mul + std::abs(reach_s) + 1;
  b.channels = g.K / a.RS;
  b.k_padded = (g.K + 7) / 8 * 8;
  b.ldw = (b.k_padded + 31) / 32 * 32 + 4;
  return b;
}

/// Blocks of band `b` that fit on one multiprocessor at once (0: the band does not fit in shared memory).
int blocks_per_sm(const Band& b, const DeviceSetup& d) {
  if (b.bytes() > static_cast<std::size_t>(d.smem_per_block)) return 0;
  return std::min(d.blocks_by_registers, d.smem_per_sm / static_cast<int>(b.bytes() + 1024));
}

/// Estimated cycles of a launch with band `b`, from a model of the kernel's instruction counts (measured with
/// Nsight Compute on the H200: about 8 per staged element and 40 per warp and reduction step of 32 pixels, two
/// instructions per cycle and multiprocessor, a dependent chain of about 4 cycles per instruction within a warp).
/// More bands give more blocks but re-stage the weights and the halo rows; fewer leave multiprocessors idle.
double launch_cycles(const Band& b, std::int64_t images, int groups, const DeviceSetup& d, int out_w) {
  const std::int64_t per_sm = blocks_per_sm(b, d);
  if (per_sm == 0) return -1;
  const std::int64_t blocks = images * groups * b.bands;
  const std::int64_t waves = (blocks + per_sm * d.multiprocessors - 1) / (per_sm * d.multiprocessors);
  const double units = std::ceil(static_cast<double>(b.rows) * out_w / kWarpPixels), steps = b.k_padded / 8;
  const double staging = 8.0 * (b.patch_floats() + kGroup * b.k_padded) / 32, compute = units * steps * 40;
  const std::int64_t resident = std::min(per_sm, (blocks + d.multiprocessors - 1) / d.multiprocessors);
  const double throughput = static_cast<double>(resident) * (staging + compute) / 2;
  const double chain = std::ceil(units / kWarps) * steps * 40 * 4;
  return static_cast<double>(waves) * std::max(throughput, chain);
}

/// See staged_band_choices.
std::vector<int> band_choices(const ConvGemm& g, int images, int out_rows) {
  const DeviceSetup& d = device_setup();
  const int groups = (g.N + kGroup - 1) / kGroup;
  int modelled = 0, two = 0, three = 0;
  double best_cycles = 0;
  for (int bands = 1; bands <= out_rows; ++bands) {
    const Band b = band_of(g, out_rows, bands);
    if (b.bands != bands) continue;  // rounding gave a band count already seen
    const double cycles = launch_cycles(b, images, groups, d, g.a.out_w);
    if (cycles >= 0 && (modelled == 0 || cycles < best_cycles)) {
      modelled = bands;
      best_cycles = cycles;
    }
    const int per_sm = blocks_per_sm(b, d);
    if (two == 0 && per_sm >= 2) two = bands;
    if (three == 0 && per_sm >= 3) three = bands;
  }
  std::vector<int> choices;
  for (int bands : {modelled, two, three}) {
    if (bands > 0 && std::find(choices.begin(), choices.end(), bands) == choices.end()) choices.push_back(bands);
  }
  return choices;
}

void launch(const ConvGemm& g, int images, int out_rows, int bands) {
  const bool in_range = bands >= 1 && bands <= out_rows;
  const Band b = band_of(g, out_rows, in_range ? bands : 1);
  MINIDL_CHECK(in_range && b.bands == bands && blocks_per_sm(b, device_setup()) > 0, ValueError,
               "staged convolution: ", bands, " bands of ", out_rows, " output rows is not one of "
               "staged_band_choices()");
  const dim3 grid(static_cast<unsigned>(images * b.bands), static_cast<unsigned>((g.N + kGroup - 1) / kGroup));
  staged_gemm_kernel<<<grid, kThreads, b.bytes(), stream()>>>(g, b);
  MINIDL_CUDA_KERNEL_CHECK();
}

bool fits_int(std::int64_t v) { return v >= 0 && v < (std::int64_t{1} << 31); }

}  // namespace

std::vector<int> staged_band_choices(const Conv2dParams& p, ConvPass pass) {
  if (p.groups != 1 || pass == ConvPass::kBackwardWeight) return {};
  if (pass == ConvPass::kBackwardInput && (p.stride_h != 1 || p.stride_w != 1)) return {};
  if (!device_setup().tf32_kernel) return {};
  // Offsets inside an image and a weight tensor are 32-bit; an image's base is 64-bit.
  if (!fits_int(p.C * p.H * p.W) || !fits_int(p.K * p.P * p.Q) || !fits_int(p.K * p.C * p.R * p.S) ||
      !fits_int(p.N * p.C * p.H * p.W) || !fits_int(p.N * p.K * p.P * p.Q) || !fits_int(p.N * 4)) {
    return {};
  }
  const ConvGemm g = pass == ConvPass::kForward ? forward_gemm(p, nullptr, nullptr, nullptr, nullptr, kernels::Activation::None)
                                                : backward_input_gemm(p, nullptr, nullptr, nullptr);
  return band_choices(g, static_cast<int>(p.N), static_cast<int>(pass == ConvPass::kForward ? p.P : p.H));
}

void staged_conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias, float* y,
                           kernels::Activation act, int bands) {
  launch(forward_gemm(p, x, w, bias, y, act), static_cast<int>(p.N), static_cast<int>(p.P), bands);
}

void staged_conv2d_backward_input(const Conv2dParams& p, const float* dy, const float* w, float* dx, int bands) {
  launch(backward_input_gemm(p, dy, w, dx), static_cast<int>(p.N), static_cast<int>(p.H), bands);
}

}  // namespace gpu
}  // namespace minidl
