// The staged weight-gradient kernel (see conv2d_staged.h), its launch plans and cost model. Pieces shared with the
// forward and input-gradient kernel (conv2d_staged.cu) are in conv2d_staged.cuh.
//
// dW[k][col] = sum over the output pixels m of dy(m, k) X(m, col), col = (c, r, s): a GEMM of K x C·R·S whose
// reduction runs over all N·P·Q pixels. A block takes 16·MT output channels and kWgCols columns; its threads
// form groups of four warps, each group with its own buffers and barrier, working through its own run of
// pixels: groups on one multiprocessor overlap one's staging with the others' multiplications, and sharing a
// block halves or quarters the partial sums, which the groups add in shared memory. The blocks along the pixels
// write partial sums that sum_splits adds in a fixed order, so results are bitwise repeatable.
//
// A group takes its pixels in bands of up to band_chunks chunks of 16 pixels of one image. Per band it copies
// the source rows the band's windows read (its block's channels, zeros in the padding) into a patch, dy of its
// output channels in chunk order (row k of chunk u holds its 16 pixels: 16-byte copies from global memory) and
// a table of each pixel's window corner in the patch. A warp multiplies its 16·MT channels (A, dy) by its 24
// columns (B, X), two mma steps per chunk: step s takes pixels 8s .. 8s + 7 of the chunk as reduction rows 0..7.
// ldmatrix hands each lane its A fragment of a step straight from the dy rows (32-bit words as pairs of 16-bit
// ones): one instruction per m16 tile and step. X(m, col) is the patch at corner(m) + tap(col): per chunk and
// column one add and one load per pixel, the taps in registers, the corners of a lane's four pixels one 128-bit
// load. Pixels past the band's end get dy 0 and the last pixel's corner, so every value they multiply is finite
// where the reference's are (0 times an Inf in the padding would be NaN).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>

#include "cuda/conv2d_staged.h"
#include "cuda/conv2d_staged.cuh"
#include "cuda/conv_gemm.cuh"
#include "cuda/sum_splits.cuh"

namespace minidl {
namespace gpu {
namespace {

using kernels::Conv2dParams;

constexpr int kWgWarps = 4;                          // warps per group
constexpr int kWgGroupThreads = 32 * kWgWarps;
constexpr int kWgMaxGroups = 4;                      // groups per block
constexpr int kWgNTiles = 3;                         // n8 tiles (of 8 columns) per warp
constexpr int kWgCols = kWgWarps * 8 * kWgNTiles;    // columns per block: 96
constexpr int kChunk = 16;                           // pixels per chunk: two mma steps

struct WgradArgs {
  const float* x;
  const float* dy;
  float* out;       // [splits][K][CRS] partial sums, or dw itself with one split
  float* out_bias;  // [splits][K] partial sums, or db itself with one split; null: no bias gradient
  int C, H, W, HW, x_image;  // input
  int K, Q, PQ, dy_image;    // output
  int CRS, RS, S;
  int stride_h, stride_w, dil_h, dil_w, pad_h;
  int segments;              // 1: a plane is one run of source rows (pad_w 0: rp = W), copied as such
  int col0;                  // source column of patch column 0: -pad_w rounded down to a multiple of vx
  int colshift;              // patch column of output column 0's window: -pad_w - col0
  int rp, hmax, ps;          // patch row pitch, rows per channel plane, plane size (ps a multiple of vx,
                             // and rp without segments)
  int patch_floats, dy_floats, group_floats;  // a group's buffers: patch, dy, then the table of corners
  int band_chunks, cpi;      // chunks per band at most, per image
  int total_chunks, groups;  // chunks of the batch, groups of the launch
  int group_waits;           // named-barrier waits every group makes (the most any group's bands need); set at
                             // the launch, as the cost model does not need it
  int vx, vdy;               // floats per copy of x and dy: 1, 2 or 4
  Divisor by_vecs, by_hmax, by_q, by_cpi;  // vecs: copies per patch row (rp / vx), or per plane (ps / vx)
};

/// cp.async of V floats (4, 8 or 16 bytes, both addresses aligned to that), or V zeros when `valid` is false.
template <int V>
__device__ __forceinline__ void copy_async_floats(float* dst, const float* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(4 * V),
               "r"(valid ? 4 * V : 0));
}

/// The 128 threads of group `group` wait for each other (named barrier 1 + group; 0 is __syncthreads).
__device__ __forceinline__ void group_barrier(int group) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(group + 1), "n"(kWgGroupThreads) : "memory");
}

/// The patch: `channels` planes of hmax rows of rp floats, row i from source row row0 + i, column j from source
/// column col0 + j; zeros outside the image. Copies of V floats: V divides W, col0 and rp, so a copy lies inside
/// or outside the image as a whole.
template <int V>
__device__ void stage_patch(const WgradArgs& a, float* patch, const float* x_image, int c_first, int channels,
                            int row0, int gt) {
  const int row_vecs = a.rp / V, total = channels * a.hmax * row_vecs;
  for (int e = gt; e < total; e += kWgGroupThreads) {
    const int rr = a.by_vecs(e), col = a.col0 + (e - rr * row_vecs) * V;
    const int cl = a.by_hmax(rr), row = row0 + (rr - cl * a.hmax);
    const bool inside = static_cast<unsigned>(row) < static_cast<unsigned>(a.H) &&
                        static_cast<unsigned>(col) < static_cast<unsigned>(a.W);
    const unsigned offset = inside ? (c_first + cl) * a.HW + row * a.W + col : 0;  // unsigned: no sign extension
    copy_async_floats<V>(patch + e * V, x_image + offset, inside);
  }
}

/// The patch when its rows are whole source rows (segments): plane cl is the ps floats of channel c_first + cl
/// from source offset row0·W - delta on (delta = row0·W mod V, so that the copies are aligned; the corners add
/// it), zeros outside the image. V divides H·W, so a copy lies inside or outside the image as a whole.
template <int V>
__device__ void stage_segments(const WgradArgs& a, float* patch, const float* x_image, int c_first, int channels,
                               int row0, int delta, int gt) {
  const int plane_vecs = a.ps / V, total = channels * plane_vecs, start = row0 * a.W - delta;
  for (int e = gt; e < total; e += kWgGroupThreads) {
    const int cl = a.by_vecs(e), at = start + (e - cl * plane_vecs) * V;
    const bool inside = static_cast<unsigned>(at) < static_cast<unsigned>(a.HW);
    const unsigned offset = inside ? (c_first + cl) * a.HW + at : 0;
    copy_async_floats<V>(patch + e * V, x_image + offset, inside);
  }
}

/// Where row R of the dy buffer starts, in floats: rows of 16 floats, every second row 4 floats further on, so
/// that the 16-byte pieces ldmatrix reads from 8 consecutive rows fall in 8 different bank quads.
__host__ __device__ constexpr int dy_row(int row) { return 16 * row + 4 * (row / 2); }

/// dy of output channels k0 .. k0 + KB - 1 at pixels pix0 .. pix0 + npix - 1 in chunk order: row u·KB + k holds
/// pixels pix0 + 16u .. pix0 + 16u + 15 of channel k0 + k; zeros past the pixels and past the last channel. A
/// thread copies the same piece of every chunk for a fixed set of channels.
template <int KB, int V>
__device__ void stage_dy(const WgradArgs& a, float* dys, const float* dy_image, int k0, int pix0, int npix,
                         int chunks, int gt) {
  constexpr int kPieces = kChunk / V, kChannelsPerPass = kWgGroupThreads / kPieces;
  constexpr int kPasses = KB / kChannelsPerPass;
  static_assert(KB % kChannelsPerPass == 0, "every pass covers whole channels");
  const int piece = gt % kPieces, k_first = gt / kPieces;
#pragma unroll 1
  for (int h = 0; h < kPasses; ++h) {
    const int k = k0 + k_first + h * kChannelsPerPass;
    // V divides npix (it divides P·Q, and a band starts at a multiple of 16): a copy is all pixels or none.
    const int limit = k < a.K ? npix - piece * V : 0;
    // unsigned: no sign extension
    const unsigned offset = k < a.K ? static_cast<unsigned>(k * a.PQ + pix0 + piece * V) : 0u;
    float* dst = dys + dy_row(k - k0) + piece * V;
    for (int u = 0; u < chunks; ++u, dst += dy_row(KB)) {
      const bool valid = u * kChunk < limit;
      copy_async_floats<V>(dst, dy_image + (valid ? offset + u * kChunk : 0u), valid);
    }
  }
}

/// The table of window corners: the byte offset in the patch of the window of pixel pix0 + 16u + i (of the last
/// pixel past npix; `shift` floats further on), for `slots` slots, at position 16u + 4 (i % 4) + i / 4: lane quad
/// q's pixels q, q + 4, q + 8 and q + 12 of a chunk are one 128-bit load.
__device__ void stage_corners(const WgradArgs& a, int* table, int pix0, int npix, int p_first, int shift, int slots,
                              int gt) {
  for (int slot = gt; slot < slots; slot += kWgGroupThreads) {
    const int pix = pix0 + min(slot, npix - 1);
    const int p = a.by_q(pix), q = pix - p * a.Q, i = slot % kChunk;
    table[slot - i + i % 4 * 4 + i / 4] =
        static_cast<int>(sizeof(float)) * ((p - p_first) * a.stride_h * a.rp + q * a.stride_w + shift);
  }
}

/// ldmatrix of four 8x8 matrices of 16-bit values, i.e. 8 rows of four 32-bit words each: lanes 8i .. 8i + 7 give
/// the addresses of matrix i's rows, and lane (g, q) receives word q of row g of matrix i in r[i].
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// One block per multiprocessor at up to 128 registers: four groups of four warps.
template <int MT>
__global__ void __launch_bounds__(kWgMaxGroups* kWgGroupThreads, 1) staged_wgrad_kernel(WgradArgs a) {
#if MINIDL_STAGED_BODY
  constexpr int KB = 16 * MT;  // output channels per block
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = warp / kWgWarps, wg = warp % kWgWarps, gt = tid % kWgGroupThreads;
  const int g = lane / 4, quad = lane % 4;
  const int groups_here = static_cast<int>(blockDim.x) / kWgGroupThreads;
  float* patch = smem + group * a.group_floats;
  float* dys = patch + a.patch_floats;
  int* table = reinterpret_cast<int*>(dys + a.dy_floats);
  const int block_col0 = blockIdx.y * kWgCols, k0 = blockIdx.z * KB;
  const int c_first = block_col0 / a.RS;
  const int channels = (min(block_col0 + kWgCols, a.CRS) - 1) / a.RS - c_first + 1;
  const int warp_col0 = block_col0 + wg * 8 * kWgNTiles;

  // This lane's columns (warp_col0 + 8 j + g, the B fragment's column g of n8 tile j) as their taps' addresses
  // in the patch; past the last column the patch's start (those results are not written).
  const char* col_at[kWgNTiles];
#pragma unroll
  for (int j = 0; j < kWgNTiles; ++j) {
    const int col = warp_col0 + 8 * j + g;
    int offset = 0;
    if (col < a.CRS) {
      const int c = col / a.RS, rs = col - c * a.RS, r = rs / a.S, s = rs - r * a.S;
      offset = (c - c_first) * a.ps + r * a.dil_h * a.rp + s * a.dil_w;
    }
    col_at[j] = reinterpret_cast<const char*>(patch + offset);
  }

  // The group's chunks: an equal share of the batch's, in order.
  const int gid = static_cast<int>(blockIdx.x) * groups_here + group;
  const int per = a.total_chunks / a.groups, extra = a.total_chunks % a.groups;
  const int begin = gid * per + min(gid, extra), end = begin + per + (gid < extra ? 1 : 0);

  float acc[MT][kWgNTiles][4] = {};
  float bias_sum = 0.f;
  int waits = 0;
  const bool bias = a.out_bias != nullptr && blockIdx.y == 0;  // the first column block sums dy too
  for (int cur = begin; cur < end;) {
    const int image = a.by_cpi(cur), chunk0 = cur - image * a.cpi;
    const int chunks = min(min(a.band_chunks, a.cpi - chunk0), end - cur);
    const int pix0 = chunk0 * kChunk, npix = min(chunks * kChunk, a.PQ - pix0);
    const int p_first = a.by_q(pix0);
    if (cur != begin) {  // every warp of the group is done with the previous band
      group_barrier(group);
      ++waits;
    }
    const float* x_image = a.x + static_cast<std::int64_t>(image) * a.x_image;
    const float* dy_image = a.dy + static_cast<std::int64_t>(image) * a.dy_image;
    const int row0 = p_first * a.stride_h - a.pad_h;
    const int delta = a.segments ? (row0 * a.W) & (a.vx - 1) : 0;
    if (a.segments) {
      if (a.vx == 4) {
        stage_segments<4>(a, patch, x_image, c_first, channels, row0, delta, gt);
      } else if (a.vx == 2) {
        stage_segments<2>(a, patch, x_image, c_first, channels, row0, delta, gt);
      } else {
        stage_segments<1>(a, patch, x_image, c_first, channels, row0, delta, gt);
      }
    } else if (a.vx == 4) {
      stage_patch<4>(a, patch, x_image, c_first, channels, row0, gt);
    } else if (a.vx == 2) {
      stage_patch<2>(a, patch, x_image, c_first, channels, row0, gt);
    } else {
      stage_patch<1>(a, patch, x_image, c_first, channels, row0, gt);
    }
    if (a.vdy == 4) {
      stage_dy<KB, 4>(a, dys, dy_image, k0, pix0, npix, chunks, gt);
    } else if (a.vdy == 2) {
      stage_dy<KB, 2>(a, dys, dy_image, k0, pix0, npix, chunks, gt);
    } else {
      stage_dy<KB, 1>(a, dys, dy_image, k0, pix0, npix, chunks, gt);
    }
    // Two chunks past the band: the k loop reads the corners one chunk ahead of the chunk it gathers.
    stage_corners(a, table, pix0, npix, p_first, a.colshift + delta, (chunks + 2) * kChunk, gt);
    commit_copies();
    wait_copies<0>();
    group_barrier(group);
    ++waits;

    if (bias) {  // thread (k, part) adds every parts-th chunk of channel k, in order
      constexpr int kParts = kWgGroupThreads / KB;
      for (int u = gt / KB; u < chunks; u += kParts) {
        const float4* row = reinterpret_cast<const float4*>(dys + dy_row(u * KB + gt % KB));
#pragma unroll
        for (int i = 0; i < kChunk / 4; ++i) {
          const float4 v = row[i];
          bias_sum += v.x;
          bias_sum += v.y;
          bias_sum += v.z;
          bias_sum += v.w;
        }
      }
    }

    // The k loop. Per chunk: the corners of the lane's four pixels (a chunk ahead), its B fragments gathered from
    // the patch (a chunk ahead, into the other register set: unrolled by two, no copies), and per m16 tile and
    // step one ldmatrix of dy, then 2·MT·kWgNTiles mma. Lane l gives row l % 8 of matrix l / 8: channel rows
    // + 8 for matrices 1 and 3, pixels + 4 for matrices 2 and 3; m16 tile t adds 16 rows, step s 8 pixels.
    const int dy_lane = dy_row((lane >> 3 & 1) * 8 + (lane & 7)) + 4 * (lane >> 4);
    unsigned dy_at = static_cast<unsigned>(__cvta_generic_to_shared(dys) + sizeof(float) * dy_lane);
    const int4* corners = reinterpret_cast<const int4*>(table) + quad;
    const auto gather = [&](float (&v)[kWgNTiles][4], int4 c) {
#pragma unroll
      for (int j = 0; j < kWgNTiles; ++j) {
        v[j][0] = *reinterpret_cast<const float*>(col_at[j] + c.x);
        v[j][1] = *reinterpret_cast<const float*>(col_at[j] + c.y);
        v[j][2] = *reinterpret_cast<const float*>(col_at[j] + c.z);
        v[j][3] = *reinterpret_cast<const float*>(col_at[j] + c.w);
      }
    };
    float x_even[kWgNTiles][4], x_odd[kWgNTiles][4];
    gather(x_even, corners[0]);
    int4 next = corners[4];
    const auto advance = [&](const float (&x_cur)[kWgNTiles][4], float (&x_next)[kWgNTiles][4]) {
      unsigned frag[MT][2][4];
#pragma unroll
      for (int t = 0; t < MT; ++t) {
#pragma unroll
        for (int step = 0; step < 2; ++step) {
          ldmatrix_x4(frag[t][step], dy_at + static_cast<unsigned>(sizeof(float)) * (dy_row(16 * t) + 8 * step));
        }
      }
      gather(x_next, next);
      corners += 4;
      next = corners[4];
      dy_at += static_cast<unsigned>(sizeof(float)) * dy_row(KB);
#pragma unroll
      for (int t = 0; t < MT; ++t) {
#pragma unroll
        for (int j = 0; j < kWgNTiles; ++j) {
          mma_tf32(acc[t][j], frag[t][0], x_cur[j][0], x_cur[j][1]);
          mma_tf32(acc[t][j], frag[t][1], x_cur[j][2], x_cur[j][3]);
        }
      }
    };
    int u = 0;
#pragma unroll 1
    for (; u + 2 <= chunks; u += 2) {
      advance(x_even, x_odd);
      advance(x_odd, x_even);
    }
    if (u < chunks) advance(x_even, x_odd);
    cur += chunks;
  }

  // Every group waits at its barrier equally often: the kernel does not need it, but compute-sanitizer's
  // racecheck does. With counts that differed between groups it reported hazards across the __syncthreads below
  // (and in a 30-line program that is correct by the PTX barrier rules).
  for (; waits < a.group_waits; ++waits) group_barrier(group);

  // The groups' sums, added in shared memory in group order by group 0: acc[t][j][i] is output channel
  // k0 + 16 t + g + 8 (i / 2), column warp_col0 + 8 j + 2 quad + i % 2.
  constexpr int kAcc = MT * kWgNTiles * 4;
  __syncthreads();  // every group is done with its buffers
  float* red = smem;  // [group - 1][warp][kAcc][lane]
  float* red_bias = smem + (groups_here - 1) * kWgWarps * kAcc * 32;  // [group][thread]
  if (group > 0) {
    float* r = red + ((group - 1) * kWgWarps + wg) * kAcc * 32 + lane;
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int j = 0; j < kWgNTiles; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) r[((t * kWgNTiles + j) * 4 + i) * 32] = acc[t][j][i];
  }
  if (bias) red_bias[group * kWgGroupThreads + gt] = bias_sum;
  __syncthreads();
  if (group != 0) return;
  for (int other = 1; other < groups_here; ++other) {
    const float* r = red + ((other - 1) * kWgWarps + wg) * kAcc * 32 + lane;
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int j = 0; j < kWgNTiles; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][j][i] += r[((t * kWgNTiles + j) * 4 + i) * 32];
  }
  float* out = a.out + static_cast<std::int64_t>(blockIdx.x) * a.K * a.CRS;
#pragma unroll
  for (int t = 0; t < MT; ++t) {
#pragma unroll
    for (int j = 0; j < kWgNTiles; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int k = k0 + 16 * t + g + 8 * (i / 2), col = warp_col0 + 8 * j + 2 * quad + i % 2;
        if (k < a.K && col < a.CRS) out[k * a.CRS + col] = acc[t][j][i];
      }
    }
  }
  if (bias && gt < KB && k0 + gt < a.K) {
    constexpr int kParts = kWgGroupThreads / KB;
    float s = 0.f;
    for (int other = 0; other < groups_here; ++other) {
#pragma unroll
      for (int part = 0; part < kParts; ++part) s += red_bias[other * kWgGroupThreads + part * KB + gt];
    }
    a.out_bias[static_cast<std::int64_t>(blockIdx.x) * a.K + k0 + gt] = s;
  }
#endif
}

/// Per-device launch facts of the weight-gradient kernels, looked up once (see DeviceSetup).
struct WgradSetup {
  Multiprocessors sm;
  int smem_per_block = 0;
  int registers[2] = {0, 0};  // per thread, MT = 2 and 4
};

template <int MT>
void setup_wgrad_kernel(WgradSetup& d, int device, int& registers) {
  cudaFuncAttributes f{};
  MINIDL_CUDA_CHECK(cudaFuncGetAttributes(&f, staged_wgrad_kernel<MT>));
  registers = std::max(f.numRegs, 1);
  int limit = 0;
  MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  limit -= static_cast<int>(f.sharedSizeBytes);
  d.smem_per_block = d.smem_per_block == 0 ? limit : std::min(d.smem_per_block, limit);
  MINIDL_CUDA_CHECK(cudaFuncSetAttribute(staged_wgrad_kernel<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
}

const WgradSetup& wgrad_setup() {
  static PerDevice<WgradSetup> setups;
  return setups.get([](int device) {
    WgradSetup d;
    d.sm = multiprocessors();
    setup_wgrad_kernel<2>(d, device, d.registers[0]);
    setup_wgrad_kernel<4>(d, device, d.registers[1]);
    return d;
  });
}

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

/// The most named-barrier waits any group of the launch makes: two per band but the first's one. A group's
/// chunks (as the kernel divides them) split into bands at image boundaries and every band_chunks chunks within
/// an image.
int group_waits(const WgradArgs& a) {
  const int per = a.total_chunks / a.groups, extra = a.total_chunks % a.groups;
  int most = 0;
  for (int gid = 0; gid < a.groups; ++gid) {
    const int begin = gid * per + std::min(gid, extra), end = begin + per + (gid < extra ? 1 : 0);
    int bands = 0;
    for (int cur = begin; cur < end;) {
      const int image_end = (cur / a.cpi + 1) * a.cpi, stop = std::min(end, image_end);
      bands += (stop - cur + a.band_chunks - 1) / a.band_chunks;
      cur = stop;
    }
    most = std::max(most, bands > 0 ? 2 * bands - 1 : 0);
  }
  return most;
}

/// A weight-gradient launch: the kernel's arguments (pointers and group_waits aside: the launch sets them), its grid
/// and shared memory.
struct WgradPlan {
  WgradArgs a{};
  int mt = 4;                 // m16 tiles per warp: 16·mt output channels per block
  int splits = 1;             // blocks along the pixels (partial sums to add)
  int groups_per_block = 1;
  int blocks_per_sm = 0;      // 0: the buffers do not fit in shared memory
  dim3 grid;
  std::size_t smem = 0;
};

/// Floats per copy for runs of `extent` floats: the widest of 4, 2 and 1 that divides it, so that a copy never
/// straddles a run's end.
int copy_width(std::int64_t extent) { return extent % 4 == 0 ? 4 : extent % 2 == 0 ? 2 : 1; }

/// The plan for `band_chunks` chunks of 16 pixels per band. The layout of the patch depends on the shape only;
/// copy widths narrower than the shape allows (for misaligned pointers) are set by the caller.
WgradPlan plan_wgrad(const Conv2dParams& p, int band_chunks) {
  const WgradSetup& d = wgrad_setup();
  WgradPlan pl;
  WgradArgs& a = pl.a;
  pl.mt = p.K <= 32 ? 2 : 4;
  const int kb = 16 * pl.mt;
  a.C = static_cast<int>(p.C), a.H = static_cast<int>(p.H), a.W = static_cast<int>(p.W);
  a.HW = a.H * a.W, a.x_image = static_cast<int>(p.C * p.H * p.W);
  a.K = static_cast<int>(p.K), a.Q = static_cast<int>(p.Q), a.PQ = static_cast<int>(p.P * p.Q);
  a.dy_image = static_cast<int>(p.K * p.P * p.Q);
  a.RS = static_cast<int>(p.R * p.S), a.S = static_cast<int>(p.S), a.CRS = a.C * a.RS;
  a.stride_h = static_cast<int>(p.stride_h), a.stride_w = static_cast<int>(p.stride_w);
  a.dil_h = static_cast<int>(p.dil_h), a.dil_w = static_cast<int>(p.dil_w), a.pad_h = static_cast<int>(p.pad_h);
  a.segments = p.pad_w == 0 ? 1 : 0;
  a.vx = copy_width(a.segments ? p.H * p.W : p.W);
  a.vdy = copy_width(p.P * p.Q);
  a.col0 = -static_cast<int>(round_up(p.pad_w, a.vx));
  a.colshift = -static_cast<int>(p.pad_w) - a.col0;
  // Without horizontal padding the windows' columns lie in 0 .. W - 1: rows of W floats, as in the source. With
  // it, rows as wide as the windows reach, padded to 8 floats past a multiple of 16: a column group's taps one
  // row apart then fall in other banks than the runs of four pixels next to them (gathers of 3x3 convolutions
  // with padding 1 in the emulator: 1.6 instead of 2.3 bank wavefronts per load on average).
  const int reach = static_cast<int>((p.Q - 1) * p.stride_w + a.colshift + (p.S - 1) * p.dil_w + 1);
  a.rp = a.segments ? a.W : reach + ((8 - reach % 16) % 16 + 16) % 16;
  // Rows a band spans: a band starts at a multiple of 16 pixels, whose column is at most Q - gcd(16, Q).
  const int bp = band_chunks * kChunk;
  const int span = std::min(a.Q - std::gcd(kChunk, a.Q) + bp - 1, static_cast<int>(p.P - 1) * a.Q) / a.Q;
  a.hmax = static_cast<int>(span * p.stride_h + (p.R - 1) * p.dil_h + 1);
  a.ps = static_cast<int>(a.segments ? round_up(a.hmax * a.rp + 3, 4) : a.hmax * a.rp);  // + delta
  // Channels a block's columns span: a block starts at a multiple of kWgCols, at most RS - gcd(kWgCols, RS)
  // columns into its first channel.
  const int channels = std::min(a.C, (a.RS - std::gcd(kWgCols, a.RS) + kWgCols - 1) / a.RS + 1);
  a.patch_floats = static_cast<int>(round_up(static_cast<std::int64_t>(channels) * a.ps, 4));
  a.dy_floats = dy_row(band_chunks * kb);
  a.group_floats = a.patch_floats + a.dy_floats + (band_chunks + 2) * kChunk;
  a.band_chunks = band_chunks;
  a.cpi = (a.PQ + kChunk - 1) / kChunk;
  a.total_chunks = static_cast<int>(p.N) * a.cpi;
  a.by_vecs = Divisor::of((a.segments ? a.ps : a.rp) / a.vx);
  a.by_hmax = Divisor::of(a.hmax);
  a.by_q = Divisor::of(a.Q);
  a.by_cpi = Divisor::of(a.cpi);

  pl.groups_per_block = std::min(kWgMaxGroups, a.total_chunks);
  const int threads = pl.groups_per_block * kWgGroupThreads;
  const std::int64_t reduction = static_cast<std::int64_t>(pl.groups_per_block - 1) * kWgWarps * pl.mt * kWgNTiles *
                                     4 * 32 + static_cast<std::int64_t>(pl.groups_per_block) * kWgGroupThreads;
  pl.smem = sizeof(float) * static_cast<std::size_t>(
                                std::max(static_cast<std::int64_t>(pl.groups_per_block) * a.group_floats, reduction));
  const int registers = d.registers[pl.mt == 2 ? 0 : 1];
  pl.blocks_per_sm = pl.smem > static_cast<std::size_t>(d.smem_per_block)
                         ? 0
                         : std::min(d.sm.registers / (registers * threads),
                                    d.sm.smem / static_cast<int>(pl.smem + 1024));
  const int tiles = ((a.CRS + kWgCols - 1) / kWgCols) * ((a.K + kb - 1) / kb);
  // One wave: as many pixel splits as fill the multiprocessors, each group at least a chunk.
  const int fill = (std::max(pl.blocks_per_sm, 1) * d.sm.count + tiles - 1) / tiles;
  pl.splits = std::max(1, std::min(fill, a.total_chunks / pl.groups_per_block));
  a.groups = pl.splits * pl.groups_per_block;
  pl.grid = dim3(static_cast<unsigned>(pl.splits), static_cast<unsigned>((a.CRS + kWgCols - 1) / kWgCols),
                 static_cast<unsigned>((a.K + kb - 1) / kb));
  return pl;
}

/// Estimated cycles of a plan, from a model not yet checked against Nsight Compute. Per group and chunk, shared
/// memory serves four warps' 8·MT ldmatrix (4 wavefronts each), 12 gathered loads (1 wavefront each, assuming no
/// bank conflicts) and a corner load: 4 (13 + 8·MT) cycles, against 24·MT/4 mma per warp (per SASS for
/// sm_90, 2.5 instructions per mma: bandwidth-bound). Per band, the staging's instructions as counted in its SASS
/// (about 17 per copy of whole source rows, 25 per copy of padded ones, 10 per copy of dy, 20 per corner) at
/// two warp instructions per cycle. The groups of a multiprocessor add up; the partial sums' bytes are written and
/// read again at about 1.5 KB per cycle, plus the sum_splits launch.
double wgrad_cycles(const WgradPlan& pl) {
  const WgradArgs& a = pl.a;
  const WgradSetup& d = wgrad_setup();
  if (pl.blocks_per_sm == 0) return -1;
  const std::int64_t blocks = static_cast<std::int64_t>(pl.grid.x) * pl.grid.y * pl.grid.z;
  const std::int64_t per_wave = static_cast<std::int64_t>(pl.blocks_per_sm) * d.sm.count;
  const std::int64_t waves = (blocks + per_wave - 1) / per_wave;
  const std::int64_t resident =
      std::min<std::int64_t>(pl.blocks_per_sm, (blocks + d.sm.count - 1) / d.sm.count);
  const double chunks = std::ceil(static_cast<double>(a.total_chunks) / a.groups);
  const double bands = std::ceil(chunks / std::min(a.band_chunks, a.cpi)) + 1;
  const double staging = (static_cast<double>(a.patch_floats) / a.vx * (a.segments ? 17 : 25) +
                          static_cast<double>(a.band_chunks) * kChunk * 16 * pl.mt / a.vdy * 10 +
                          (a.band_chunks + 2) * kChunk * 20.0) / 32 / 2;
  const double group = chunks * 4 * (13 + 8 * pl.mt) + bands * staging;
  const double partial = pl.splits > 1 ? 8.0 * pl.splits * a.K * a.CRS / 1500 + 3000 : 0;
  return static_cast<double>(waves) * static_cast<double>(resident * pl.groups_per_block) * group + partial;
}

/// The band length in chunks for `bands` bands per image, or 0 when another band count gives the same length.
int band_chunks_of(const Conv2dParams& p, int bands) {
  const std::int64_t pq = p.P * p.Q;
  if (bands < 1 || bands > pq) return 0;
  const std::int64_t chunks = ((pq + bands - 1) / bands + kChunk - 1) / kChunk;
  return (pq + chunks * kChunk - 1) / (chunks * kChunk) == bands ? static_cast<int>(chunks) : 0;
}

/// See staged_band_choices: the cost model's pick, the longest band that fits, and bands of half the pick's length.
std::vector<int> wgrad_band_choices(const Conv2dParams& p) {
  const std::int64_t pq = p.P * p.Q, cpi = (pq + kChunk - 1) / kChunk;
  const auto bands_of = [&](std::int64_t chunks) {
    return static_cast<int>((pq + chunks * kChunk - 1) / (chunks * kChunk));
  };
  std::int64_t modelled = 0, longest = 0;
  double best_cycles = 0;
  for (std::int64_t chunks = 1; chunks <= std::min<std::int64_t>(cpi, 64); ++chunks) {
    if (band_chunks_of(p, bands_of(chunks)) != chunks) continue;  // a shorter band gives the same band count
    const double cycles = wgrad_cycles(plan_wgrad(p, static_cast<int>(chunks)));
    if (cycles < 0) continue;
    longest = chunks;
    if (modelled == 0 || cycles < best_cycles) modelled = chunks, best_cycles = cycles;
  }
  std::vector<int> choices;
  if (modelled == 0) return choices;  // not even a band of 16 pixels fits
  for (std::int64_t chunks : {modelled, longest, std::max<std::int64_t>(1, modelled / 2)}) {
    const int bands = bands_of(chunks);
    if (band_chunks_of(p, bands) > 0 && wgrad_cycles(plan_wgrad(p, band_chunks_of(p, bands))) >= 0 &&
        std::find(choices.begin(), choices.end(), bands) == choices.end()) {
      choices.push_back(bands);
    }
  }
  return choices;
}

/// `width` (floats per copy), halved until `ptr` is aligned to that many floats: tensor views may start anywhere.
int aligned_width(int width, const float* ptr) {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  while (width > 1 && address % (sizeof(float) * width) != 0) width /= 2;
  return width;
}

}  // namespace

std::vector<int> staged_wgrad_band_choices(const Conv2dParams& p) {
  return fits_int(p.N * (p.P * p.Q + kChunk)) ? wgrad_band_choices(p) : std::vector<int>{};
}

void staged_conv2d_backward_weight(const Conv2dParams& p, const float* x, const float* dy, float* dw, float* dbias,
                                   int bands) {
  const int chunks = band_chunks_of(p, bands);
  WgradPlan pl = chunks > 0 ? plan_wgrad(p, chunks) : WgradPlan{};
  MINIDL_CHECK(pl.blocks_per_sm > 0, ValueError, "staged convolution (weight gradient): ", bands, " bands of ",
               p.P * p.Q, " output pixels is not one of staged_band_choices()");
  WgradArgs& a = pl.a;
  a.vx = aligned_width(a.vx, x);
  a.by_vecs = Divisor::of((a.segments ? a.ps : a.rp) / a.vx);
  a.vdy = aligned_width(a.vdy, dy);
  const std::size_t outputs = static_cast<std::size_t>(a.K) * static_cast<std::size_t>(a.CRS);
  const std::size_t splits = static_cast<std::size_t>(pl.splits);
  const Workspace partial(splits == 1 ? 0 : sizeof(float) * splits * (outputs + (dbias ? a.K : 0)),
                          "split partial sums");
  a.x = x, a.dy = dy;
  a.out = splits == 1 ? dw : partial.as<float>();
  a.out_bias = dbias == nullptr ? nullptr : splits == 1 ? dbias : partial.as<float>() + splits * outputs;
  a.group_waits = group_waits(a);
  const unsigned threads = static_cast<unsigned>(pl.groups_per_block * kWgGroupThreads);
  if (pl.mt == 2) {
    staged_wgrad_kernel<2><<<pl.grid, threads, pl.smem, stream()>>>(a);
  } else {
    staged_wgrad_kernel<4><<<pl.grid, threads, pl.smem, stream()>>>(a);
  }
  MINIDL_CUDA_KERNEL_CHECK();
  if (splits > 1) {
    sum_splits(a.out, pl.splits, static_cast<int>(outputs), dw);
    if (dbias) sum_splits(a.out_bias, pl.splits, a.K, dbias);
  }
}

}  // namespace gpu
}  // namespace minidl
