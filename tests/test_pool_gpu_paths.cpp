// The GPU max pool's launch paths against the CPU backend, bit for bit: every output value, every saved index
// and every input gradient. src/cuda/pool2d.cu picks, per call, the pairs kernels with two outputs per thread
// (16-byte accesses for float 2x2 windows), with one (8-byte accesses), or the general kernels, from the
// geometry (windows two wide at stride two along w, Q even or odd, W a multiple of 4 or not, overlapping or
// padded rows) and from the alignment of each pointer. The cases below reach each of them: sizes chosen for
// the geometry, and buffers shifted by one or two elements from cudaMalloc's alignment (as a view with a
// storage offset would be). Inputs hold ties (between +0 and -0 too: the bits show which one won), NaNs,
// infinities and all-negative windows.
#include "minidl/config.h"

#if MINIDL_CUDA_ENABLED

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "kernels/backend.h"
#include "pool_case.h"
#include "test_util.h"

namespace minidl {
namespace {

/// A device buffer of `n` T that starts `offset` elements past cudaMalloc's (256-byte aligned) address, filled
/// with 0xFF bytes (NaN, or -1 for indices) so an element a kernel fails to write is caught. Copies run on
/// the library's (non-blocking) stream, so they are ordered with the kernels.
template <class T>
class ShiftedBuffer {
 public:
  ShiftedBuffer(std::int64_t n, std::int64_t offset) : n_(static_cast<std::size_t>(n)) {
    MINIDL_CUDA_CHECK(cudaMalloc(&base_, (n_ + static_cast<std::size_t>(offset)) * sizeof(T)));
    ptr_ = static_cast<T*>(base_) + offset;
    MINIDL_CUDA_CHECK(cudaMemsetAsync(ptr_, 0xFF, n_ * sizeof(T), gpu::stream()));
  }
  ShiftedBuffer(const std::vector<T>& host, std::int64_t offset)
      : ShiftedBuffer(static_cast<std::int64_t>(host.size()), offset) {
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice, gpu::stream()));
    MINIDL_CUDA_CHECK(cudaStreamSynchronize(gpu::stream()));  // `host` may die right after
  }
  ~ShiftedBuffer() { cudaFree(base_); }
  ShiftedBuffer(const ShiftedBuffer&) = delete;
  ShiftedBuffer& operator=(const ShiftedBuffer&) = delete;

  T* get() const { return ptr_; }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost, gpu::stream()));
    MINIDL_CUDA_CHECK(cudaStreamSynchronize(gpu::stream()));
    return out;
  }

 private:
  std::size_t n_;
  void* base_ = nullptr;
  T* ptr_ = nullptr;
};

using testing::PoolCase;
using testing::pool_params;

// Which kernels each case reaches with aligned buffers (float; double alike unless noted).
std::vector<PoolCase> cases() {
  return {
      // The example CNN's pool: two outputs per thread in both passes.
      {"k2s2_w24", 4, 8, 24, 24, 2, 2, 2, 2},
      // W a multiple of 4 with an odd H (the last row in no window): pairs forward, general backward.
      {"k2s2_h7_w8", 2, 3, 7, 8, 2, 2, 2, 2},
      // W even, Q odd (the LeNet 14 -> 7 pool): one output per thread, 8-byte loads (double: 16-byte).
      {"k2s2_w14_q7", 3, 5, 14, 14, 2, 2, 2, 2},
      // W = 6: Q odd, rows 24 bytes apart: one output per thread for float and double.
      {"k2s2_w6_q3", 2, 3, 4, 6, 2, 2, 2, 2},
      // W odd (the last column in no window, rows misaligned): general kernels.
      {"k2s2_w9", 2, 3, 8, 9, 2, 2, 2, 2},
      // Three-row windows at stride two with padding along h only: pairs forward with clipped and
      // overlapping rows; general backward.
      {"k3x2_s2_pad_h", 2, 3, 7, 8, 3, 2, 2, 2, 1, 0},
      // Overlapping rows (stride 1 along h): pairs forward, general backward.
      {"k2_s1x2", 2, 2, 6, 12, 2, 2, 1, 2},
      // One-row windows that tile: pairs in both passes, one row per window.
      {"k1x2_tiled", 2, 3, 5, 12, 1, 2, 1, 2},
      // Three-row windows that tile: pairs backward writes three rows per window.
      {"k3x2_tiled", 2, 3, 9, 8, 3, 2, 3, 2},
      // Not two wide at stride two: general kernels only.
      {"k3s2p1", 2, 3, 7, 8, 3, 3, 2, 2, 1, 1},
      {"k2_s2x1", 2, 3, 8, 8, 2, 2, 2, 1},
  };
}

/// Buffer shifts in elements: x (and dx), y (and dy), indices. cudaMalloc aligns to 256 bytes, so shifting
/// x by 2 floats leaves it 8-byte aligned (one output per thread instead of two), by 1 float 4-byte aligned
/// (general kernels); shifting y by one float or the indices by one int64 also rules out two per thread.
struct Shift {
  std::int64_t x, y, idx;
};
const Shift kShifts[] = {{0, 0, 0}, {2, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {3, 1, 1}};

/// Random inputs of one kind: continuous, ties, specials, all negative.
template <class T>
std::vector<T> input(std::int64_t n, int kind, std::mt19937& rng) {
  std::uniform_real_distribution<double> unit(-1.0, 1.0), coin(0.0, 1.0);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& e : v) {
    const double u = unit(rng);
    switch (kind) {
      case 0:
        e = static_cast<T>(u);
        break;
      case 1: {  // integers in [-2, 2]: many ties, the first maximum must win; zeros of both signs
        const T r = static_cast<T>(std::round(2.5 * u));
        e = r == T(0) ? std::copysign(T(0), static_cast<T>(coin(rng) - 0.5)) : r;
        break;
      }
      case 2: {  // NaNs (the last NaN of a window wins) and infinities among continuous values
        const double c = coin(rng);
        e = c < 0.15   ? std::numeric_limits<T>::quiet_NaN()
            : c < 0.2  ? std::numeric_limits<T>::infinity()
            : c < 0.25 ? -std::numeric_limits<T>::infinity()
                       : static_cast<T>(u);
        break;
      }
      default:  // all negative: no padding cell may win
        e = static_cast<T>(u - 2.0);
    }
  }
  return v;
}

/// Every element equal bit for bit (NaN payloads included; +0 and -0 differ).
template <class T>
void expect_bitwise(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: GPU " << got[i] << ", CPU " << want[i];
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ";
}

template <class T>
class PoolGpuPaths : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(PoolGpuPaths, FloatTypes);

TYPED_TEST(PoolGpuPaths, MaxPoolMatchesCpuBitwise) {
  using T = TypeParam;
  MINIDL_REQUIRE_GPU();
  std::mt19937 rng(2026);
  for (const PoolCase& c : cases()) {
    const kernels::Pool2dParams p = pool_params(c);
    const std::int64_t xs = p.N * p.C * p.H * p.W, ys = p.N * p.C * p.P * p.Q;
    for (int kind = 0; kind < 4; ++kind) {
      const std::vector<T> x_host = input<T>(xs, kind, rng);
      std::vector<T> y_cpu(static_cast<std::size_t>(ys));
      std::vector<std::int64_t> idx_cpu(static_cast<std::size_t>(ys));
      cpu::max_pool2d_forward<T>(p, x_host.data(), y_cpu.data(), idx_cpu.data());
      const std::vector<T> dy_host = input<T>(ys, 0, rng);
      std::vector<T> dx_cpu(static_cast<std::size_t>(xs));
      cpu::max_pool2d_backward<T>(p, dy_host.data(), idx_cpu.data(), dx_cpu.data());

      for (const Shift& s : kShifts) {
        SCOPED_TRACE(detail::str(c.name, ", input kind ", kind, ", shifts x ", s.x, " y ", s.y, " indices ", s.idx));
        const ShiftedBuffer<T> x(x_host, s.x);
        ShiftedBuffer<T> y(ys, s.y), y_only(ys, s.y);
        ShiftedBuffer<std::int64_t> idx(ys, s.idx);
        gpu::max_pool2d_forward<T>(p, x.get(), y.get(), idx.get());
        gpu::max_pool2d_forward<T>(p, x.get(), y_only.get(), nullptr);
        expect_bitwise(y.host(), y_cpu, "y");
        expect_bitwise(y_only.host(), y_cpu, "y (no indices)");
        EXPECT_EQ(idx.host(), idx_cpu);

        // The backward from the CPU's indices, so that it is checked even if the forward's were wrong.
        const ShiftedBuffer<T> dy(dy_host, s.y);
        const ShiftedBuffer<std::int64_t> idx_in(idx_cpu, s.idx);
        ShiftedBuffer<T> dx(xs, s.x);
        gpu::max_pool2d_backward<T>(p, dy.get(), idx_in.get(), dx.get());
        expect_bitwise(dx.host(), dx_cpu, "dx");
      }
    }
  }
}

}  // namespace
}  // namespace minidl

#endif  // MINIDL_CUDA_ENABLED
