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
#include <numeric>

#include "cuda/context.h"
#include "cuda/conv2d_staged.cuh"
#include "cuda/conv_gemm.cuh"
#include "cuda/per_device.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::Conv2dParams;

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kGroup = 32;             // output channels per block
constexpr int kNTiles = kGroup / 8;    // n8 tiles of the mma
constexpr int kMTiles = 2;             // m16 tiles a warp multiplies at once (they share the weight fragments)
constexpr int kWarpPixels = 16 * kMTiles;
constexpr int kStepFloats = 8 * kGroup;  // the weights of one mma step (8 reduction indices x 32 channels)

/// The band a block computes and the patch it stages; the same for every block of a launch.
struct Band {
  int rows;                 // output rows per block (the last band of an image may have fewer)
  int out_rows;             // output rows of an image
  int bands;                // blocks per image and channel group
  int src_row0, src_col0;   // source row / column of the patch's (0, 0) for output row 0: row0 * row_mul + src_row0
  int patch_h, patch_w;     // patch size per channel
  int channels;             // source channels (the reduction is channels x R x S)
  int planes;               // patch planes: the channels, plus one of zeros that the taps past the reduction read
                            // when it is not a multiple of 8 (their weights are 0, and 0 times an Inf is NaN)
  int steps;                // mma steps: the reduction / 8, rounded up
  Divisor by_patch_w, by_patch_h, by_out_w, by_rs, by_s;

  __host__ __device__ int patch_floats() const { return (planes * patch_h * patch_w + 3) / 4 * 4; }
  /// Shared memory: the patch, the weights, the bias, and the tap table (one spare step, read ahead by the k loop).
  std::size_t bytes() const {
    return sizeof(float) * (static_cast<std::size_t>(patch_floats()) + static_cast<std::size_t>(steps) * kStepFloats +
                            kGroup) +
           sizeof(int2) * 4 * (static_cast<std::size_t>(steps) + 1);
  }
};

// The fp32 values go to the tensor cores as they are: TF32 math uses their upper 19 bits (truncation, within
// the tests' TF32 tolerance), which spares a conversion per fragment element.
__device__ __forceinline__ unsigned bits(float v) { return __float_as_uint(v); }

/// Offset in the patch of reduction index k, relative to the window's corner; past the reduction, the zero plane.
__device__ int patch_tap(const ConvGemm& g, const Band& b, int k) {
  const Gather& a = g.a;
  if (k >= g.K) return b.channels * b.patch_h * b.patch_w;
  const int ci = b.by_rs(k), rs = k - ci * a.RS, r = b.by_s(rs), s = rs - r * a.S;
  return (ci * b.patch_h + r * a.r_step) * b.patch_w + s * a.s_step;
}

// Three blocks per multiprocessor (80 registers) where the shared memory allows them.
__global__ void __launch_bounds__(kThreads, 3) staged_gemm_kernel(ConvGemm g, Band b) {
#if MINIDL_STAGED_BODY
  extern __shared__ __align__(16) float smem[];
  float* patch = smem;
  float* ws = smem + b.patch_floats();
  float* sbias = ws + b.steps * kStepFloats;
  int2* taps = reinterpret_cast<int2*>(sbias + kGroup);
  const Gather& a = g.a;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = lane / 4, quad = lane % 4;
  const int image = blockIdx.x / b.bands;
  const int row0 = (blockIdx.x - image * b.bands) * b.rows;
  const int rows = min(b.rows, b.out_rows - row0);
  const int n0 = blockIdx.y * kGroup;
  const int patch_row0 = row0 * a.row_mul + b.src_row0;

  // The tap table: for step s and quad q, the byte offsets of reduction indices 8s + q and 8s + q + 4, the two
  // columns of A whose elements a lane holds in its fragment, so that one 64-bit load fetches both.
  for (int i = tid; i < 4 * (b.steps + 1); i += kThreads) {
    const int k = i / 4 * 8 + i % 4;
    taps[i] = make_int2(static_cast<int>(sizeof(float)) * patch_tap(g, b, k),
                        static_cast<int>(sizeof(float)) * patch_tap(g, b, k + 4));
  }
  // The patch, element by element over all planes (the warps' loads follow the rows across their ends); zeros
  // where the window hangs over the edge or into the padding, and in the zero plane.
  const int src0 = image * a.src_image;  // offsets in a whole tensor fit an int (staged_band_choices)
  for (int e = tid; e < b.planes * b.patch_h * b.patch_w; e += kThreads) {
    const int pr = b.by_patch_w(e), sc = b.src_col0 + (e - pr * b.patch_w);
    const int ci = b.by_patch_h(pr), sr = patch_row0 + (pr - ci * b.patch_h);
    const bool inside = ci < b.channels && static_cast<unsigned>(sr) < static_cast<unsigned>(a.src_h) &&
                        static_cast<unsigned>(sc) < static_cast<unsigned>(a.src_w);
    const unsigned offset = inside ? src0 + ci * a.channel + sr * a.src_w + sc : 0;  // unsigned: no sign extension
    copy_async(patch + e, a.src + offset, inside);
  }
  // The weights in the order the k loop reads them: per step, per pair of n8 tiles, per lane the four values
  // (b0, b1) of both tiles, so that a lane's B fragments of a step are two 128-bit loads, a warp's reading 512
  // consecutive bytes each (no bank conflicts). Thread (c, j) copies channel c's reduction indices j mod 8;
  // zeros past the reduction and past the last output channel.
  {
    const int c = tid / 8, j = tid % 8, col = n0 + c;
    const int k_end = col < g.N ? g.K : 0;
    const float* w_col = g.w + (col < g.N ? col * g.w_col : 0);
    float* dst = ws + (c / 16 * 32 + c % 8 * 4 + j % 4) * 4 + c / 8 % 2 * 2 + j / 4;
    for (int k = j; k < b.steps * 8; k += 8, dst += kStepFloats) {
      const int ci = b.by_rs(k);
      const bool ok = k < k_end;
      const unsigned offset = ok ? ci * a.w_channel + (k - ci * a.RS) : 0;
      copy_async(dst, w_col + offset, ok);
    }
  }
  if (tid < kGroup) {  // the bias, zeros without one and past the last output channel
    const bool ok = g.bias && n0 + tid < g.N;
    copy_async(sbias + tid, ok ? g.bias + n0 + tid : g.w, ok);
  }
  commit_copies();
  wait_copies<0>();
  __syncthreads();

  const int pixels = rows * a.out_w;  // output pixels of the band
  const int out0 = image * g.out_image + row0 * a.out_w;
  for (int first = warp * kWarpPixels; first < pixels; first += kWarps * kWarpPixels) {
    // This lane's fragment rows, pixels first + group + 8 j: the address of the window's corner in the patch.
    const char* row[2 * kMTiles];
#pragma unroll
    for (int j = 0; j < 2 * kMTiles; ++j) {
      const int m = min(first + group + 8 * j, pixels - 1);
      const int r = b.by_out_w(m), column = m - r * a.out_w;
      row[j] = reinterpret_cast<const char*>(patch + (r * a.row_mul + a.row_off - b.src_row0) * b.patch_w +
                                             column * a.col_mul + a.col_off - b.src_col0);
    }
    // The A fragments of a step: per element one add (row address + tap) and one load.
    const auto load_a = [&](unsigned (&f)[kMTiles][4], int2 tap) {
#pragma unroll
      for (int t = 0; t < kMTiles; ++t) {
        f[t][0] = bits(*reinterpret_cast<const float*>(row[2 * t] + tap.x));
        f[t][1] = bits(*reinterpret_cast<const float*>(row[2 * t + 1] + tap.x));
        f[t][2] = bits(*reinterpret_cast<const float*>(row[2 * t] + tap.y));
        f[t][3] = bits(*reinterpret_cast<const float*>(row[2 * t + 1] + tap.y));
      }
    };
    // Software pipelined, so that the loads' latency overlaps the mma: step s + 1's A fragments load before step
    // s's mma (two register sets that swap roles every step, unrolled by two: no copies), their taps a step
    // earlier still, and each pair of n8 tiles' B fragments as soon as step s's mma have read the previous ones.
    float acc[kMTiles][kNTiles][4] = {};
    const int2* next_taps = taps + quad;
    const float4* w_at = reinterpret_cast<const float4*>(ws) + lane;
    unsigned a_even[kMTiles][4], a_odd[kMTiles][4];
    float4 w[kNTiles / 2];
    load_a(a_even, *next_taps);
    int2 tap = next_taps[4];
    next_taps += 8;
#pragma unroll
    for (int h = 0; h < kNTiles / 2; ++h) w[h] = w_at[h * 32];
    // One step: its mma on a_cur and w, and with `prefetch` the next step's loads into a_next and w.
    const auto advance = [&](const unsigned (&a_cur)[kMTiles][4], unsigned (&a_next)[kMTiles][4], bool prefetch) {
      if (prefetch) {
        load_a(a_next, tap);
        tap = *next_taps;
        next_taps += 4;
      }
      w_at += kStepFloats / 4;
#pragma unroll
      for (int h = 0; h < kNTiles / 2; ++h) {
#pragma unroll
        for (int t = 0; t < kMTiles; ++t) {
          mma_tf32(acc[t][2 * h], a_cur[t], w[h].x, w[h].y);
          mma_tf32(acc[t][2 * h + 1], a_cur[t], w[h].z, w[h].w);
        }
        if (prefetch) w[h] = w_at[h * 32];
      }
    };
    // The last step, which loads nothing, out of the loop: no branch per step. The loop counts in w_at.
    const float4* const w_last = w_at + (b.steps - 1) * (kStepFloats / 4);
#pragma unroll 1
    while (w_at + kStepFloats / 4 < w_last) {
      advance(a_even, a_odd, true);
      advance(a_odd, a_even, true);
    }
    if (w_at < w_last) {
      advance(a_even, a_odd, true);
      advance(a_odd, a_even, false);
    } else {
      advance(a_even, a_odd, false);
    }
    // acc[t][n][i] is pixel first + group + 8 j with j = 2 t + i / 2, channel n0 + n * 8 + 2 quad + e with
    // e = i % 2. The lane index is read again here (a volatile read stays after the k loop): offsets derived from
    // it early would occupy registers throughout the loop.
    unsigned lane_now;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane_now));
    const int q = static_cast<int>(lane_now % 4), m = first + static_cast<int>(lane_now / 4);
    const float2* lane_bias = reinterpret_cast<const float2*>(sbias) + q;
    // Channel n0 + 2 q, pixel m (unsigned: the lane's channels may lie past the last, and are not written then).
    float* o = g.out + (out0 + m + static_cast<unsigned>(n0 + 2 * q) * a.plane);
#pragma unroll
    for (int n = 0; n < kNTiles; ++n, o += 8 * a.plane) {
      const float2 bias = lane_bias[n * 4];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (n0 + 2 * q + n * 8 + e >= g.N) continue;
#pragma unroll
        for (int j = 0; j < 2 * kMTiles; ++j) {
          if (m + 8 * j < pixels) {
            o[e * a.plane + 8 * j] = kernels::activate(g.act, acc[j / 2][n][j % 2 * 2 + e] + (e ? bias.y : bias.x));
          }
        }
      }
    }
  }
#endif
}

/// Per-device launch facts, looked up once: the multiprocessors, shared memory per block (with opt-in), how many
/// blocks the registers allow, and whether the kernel loaded for the device has a body (compute capability 8.0 or
/// later).
struct DeviceSetup {
  Multiprocessors sm;
  int smem_per_block = 0;
  int blocks_by_registers = 0;  // resident blocks per multiprocessor that the registers allow
  bool tf32_kernel = false;
};

const DeviceSetup& device_setup() {
  static PerDevice<DeviceSetup> setups;
  return setups.get([](int device) {
    DeviceSetup d;
    d.sm = multiprocessors();
    MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&d.smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes f{};
    MINIDL_CUDA_CHECK(cudaFuncGetAttributes(&f, staged_gemm_kernel));
    d.tf32_kernel = f.binaryVersion >= 80;
    d.blocks_by_registers = d.sm.registers / (std::max(f.numRegs, 1) * kThreads);
    d.smem_per_block -= static_cast<int>(f.sharedSizeBytes);
    MINIDL_CUDA_CHECK(cudaFuncSetAttribute(staged_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           d.smem_per_block));
    return d;
  });
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
  b.planes = b.channels + (g.K % 8 != 0 ? 1 : 0);
  b.steps = (g.K + 7) / 8;
  b.by_patch_w = Divisor::of(b.patch_w);
  b.by_patch_h = Divisor::of(b.patch_h);
  b.by_out_w = Divisor::of(a.out_w);
  b.by_rs = Divisor::of(a.RS);
  b.by_s = Divisor::of(a.S);
  return b;
}

/// Blocks of band `b` that fit on one multiprocessor at once (0: the band does not fit in shared memory).
int blocks_per_sm(const Band& b, const DeviceSetup& d) {
  if (b.bytes() > static_cast<std::size_t>(d.smem_per_block)) return 0;
  return std::min(d.blocks_by_registers, d.sm.smem / static_cast<int>(b.bytes() + 1024));
}

/// Estimated cycles of a launch with band `b`, from a model of the kernel's warp instructions: as counted in its
/// SASS for sm_90 (not yet measured with Nsight Compute), about 28 per 32 patch elements and 15 per 32 weights
/// staged, and per warp and 32 pixels 31 per reduction step plus 370 for the fragment rows and the output; two
/// instructions per cycle and multiprocessor, and a dependent chain of about 4 cycles per instruction within a
/// warp (from Nsight Compute, with the kernel before its k loop was pipelined, at IPC 1.35 to 1.82).
/// More bands give more blocks but re-stage the weights and the halo rows; fewer leave multiprocessors idle.
double launch_cycles(const Band& b, std::int64_t images, int groups, const DeviceSetup& d, int out_w) {
  const std::int64_t per_sm = blocks_per_sm(b, d);
  if (per_sm == 0) return -1;
  const std::int64_t blocks = images * groups * b.bands;
  const std::int64_t waves = (blocks + per_sm * d.sm.count - 1) / (per_sm * d.sm.count);
  const double units = std::ceil(static_cast<double>(b.rows) * out_w / kWarpPixels);
  const double staging = (28.0 * b.patch_floats() + 15.0 * kStepFloats * b.steps) / 32;
  const double per_unit = 31.0 * b.steps + 370, compute = units * per_unit;
  const std::int64_t resident = std::min(per_sm, (blocks + d.sm.count - 1) / d.sm.count);
  const double throughput = static_cast<double>(resident) * (staging + compute) / 2;
  const double chain = (staging / kWarps + std::ceil(units / kWarps) * per_unit) * 4;
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

}  // namespace

std::vector<int> staged_band_choices(const Conv2dParams& p, ConvPass pass) {
  if (p.groups != 1) return {};
  if (pass == ConvPass::kBackwardInput && (p.stride_h != 1 || p.stride_w != 1)) return {};
  if (!device_setup().tf32_kernel) return {};
  // Offsets inside an image and a weight tensor are 32-bit; an image's base is 64-bit.
  if (!fits_int(p.C * p.H * p.W) || !fits_int(p.K * p.P * p.Q) || !fits_int(p.K * p.C * p.R * p.S) ||
      !fits_int(p.N * p.C * p.H * p.W) || !fits_int(p.N * p.K * p.P * p.Q) || !fits_int(p.N * 4)) {
    return {};
  }
  if (pass == ConvPass::kBackwardWeight) return staged_wgrad_band_choices(p);
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
