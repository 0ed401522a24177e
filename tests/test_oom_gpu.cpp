// Out-of-memory on the GPU beyond plain tensor allocation: the cuDNN algorithm-search workspace, a cuBLAS
// matmul and the cuBLAS handle's own workspace. Each must surface as OutOfMemoryError naming the sizes, and
// the process must carry on. The device is made "full" with cuda::set_per_process_memory_fraction, which caps
// what minidl's allocator may reserve (the driver's memory stays untouched).
#include "minidl/config.h"
#include "test_util.h"

#if MINIDL_CUDA_ENABLED
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "minidl/nn/functional.h"

namespace {

using namespace minidl;
using minidl::testing::expect_close;

const Device kGpu("cuda");
constexpr std::size_t kMiB = std::size_t{1} << 20;

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

/// Caps minidl's reservations at what it holds now plus `headroom` bytes (after returning the cache to the
/// driver, so that only live tensors count).
void cap_memory(std::size_t headroom) {
  cuda::synchronize();
  cuda::empty_cache();
  const std::size_t total = cuda::devices().at(0).total_memory;
  const std::size_t limit = cuda::memory_stats().reserved + headroom;
  cuda::set_per_process_memory_fraction(static_cast<double>(limit) / static_cast<double>(total));
}

/// Restores the settings a test changes, also when it fails half-way.
struct RestoreSettings {
  bool det = deterministic(), tf32_conv = cuda::allow_tf32_conv(), tf32_matmul = cuda::allow_tf32_matmul();
  bool benchmark = cuda::cudnn_benchmark();
  ~RestoreSettings() {
    cuda::set_per_process_memory_fraction(1.0);
    cuda::set_cudnn_benchmark(benchmark);
    set_deterministic(det);
    cuda::set_allow_tf32(tf32_conv, tf32_matmul);
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(OomGpu, MemoryFractionCapsAllocationsAndNamesTheLimit) {
  MINIDL_REQUIRE_GPU();
  RestoreSettings restore;
  EXPECT_THROW(cuda::set_per_process_memory_fraction(1.5), ValueError);
  EXPECT_THROW(cuda::set_per_process_memory_fraction(-0.1), ValueError);
  cap_memory(16 * kMiB);
  const std::size_t request = 64 * kMiB;
  try {
    const Tensor t = empty({static_cast<std::int64_t>(request / 4)}, TensorOptions(kFloat32).device(kGpu));
    FAIL() << "expected OutOfMemoryError under a 16 MiB headroom, got " << t.nbytes() << " bytes";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), request);
    EXPECT_TRUE(contains(e.what(), std::to_string(request))) << e.what();
    EXPECT_TRUE(contains(e.what(), "per-process limit")) << e.what();
  }
  const Tensor small = ones({1000}, TensorOptions(kFloat32).device(kGpu));  // within the headroom
  EXPECT_EQ(small.sum().item<float>(), 1000.f);
  cuda::set_per_process_memory_fraction(1.0);
  const Tensor big = full({static_cast<std::int64_t>(request / 4)}, 0.5, TensorOptions(kFloat32).device(kGpu));
  EXPECT_EQ(big.sum().item<float>(), static_cast<float>(request / 8));
}

TEST(OomGpu, CudnnWorkspaceOutOfMemoryIsAnExceptionAndConvolutionWorksAfterwards) {
  MINIDL_REQUIRE_GPU();
  RestoreSettings restore;
  cuda::set_allow_tf32(false, false);  // full precision, and none of minidl's own (TF32) kernels applies
  set_deterministic(false);
  const TensorOptions o = TensorOptions(kFloat32).device(kGpu);
  // 5x5 kernels on 64x64 images: the FFT and Winograd algorithms want tens of MiB of scratch.
  const Tensor x = uniform({32, 64, 64, 64}, -1.0, 1.0, o), w = uniform({64, 64, 5, 5}, -1.0, 1.0, o);
  const std::size_t y_bytes = std::size_t{32} * 64 * 64 * 64 * sizeof(float);
  // The reference comes from an untimed choice (benchmark off): cuDNN's heuristic, no trial runs and no search
  // workspace. It also creates the cuDNN handle before the cap.
  cuda::set_cudnn_benchmark(false);
  const Tensor expected = nn::functional::conv2d(x, w, Tensor(), 1, 2).cpu();
  // The two choices may differ (FFT, Winograd, implicit GEMM), whose float errors scale with sum |x||w| over
  // each window rather than with the result.
  const Tensor magnitude = nn::functional::conv2d(abs(x), abs(w), Tensor(), 1, 2).cpu();
  // A timed search is a new plan of the shape, and its workspace is mandatory: it is sized for the hungriest
  // algorithm under the search's cap before anything is timed, whatever the search then picks. (A new plan that
  // is chosen untimed, e.g. in deterministic mode, may take an algorithm without workspace.) It does not fit next
  // to the output.
  cuda::set_cudnn_benchmark(true);
  const std::size_t headroom = round_up(y_bytes, 2 * kMiB) + 2 * kMiB;
  cap_memory(headroom);
  cuda::reset_peak_memory_stats();
  const std::size_t before = cuda::memory_stats().allocated;
  try {
    const Tensor y = nn::functional::conv2d(x, w, Tensor(), 1, 2);
    const std::size_t search = cuda::memory_stats().peak_allocated - before - y_bytes;
    if (search <= headroom - y_bytes) {
      GTEST_SKIP() << "cuDNN's search for this shape takes only " << search << " bytes of workspace; the test "
                   << "needs a shape whose workspace exceeds the " << headroom - y_bytes << " bytes it leaves";
    }
    FAIL() << "expected OutOfMemoryError for a " << search << "-byte search workspace, got an output of "
           << y.nbytes() << " bytes";
  } catch (const OutOfMemoryError& e) {
    EXPECT_GT(e.requested_bytes(), 2 * kMiB);
    EXPECT_LE(e.requested_bytes(), 256 * kMiB);  // the search's cap on one algorithm's workspace (conv2d.cpp)
    EXPECT_TRUE(contains(e.what(), std::to_string(e.requested_bytes()))) << e.what();
    EXPECT_TRUE(contains(e.what(), "search's workspace")) << e.what();
    EXPECT_TRUE(contains(e.what(), "per-process limit")) << e.what();
  }
  // The failed search left no choice behind: the same settings search again, now with room, and compute.
  cuda::set_per_process_memory_fraction(1.0);
  const Tensor y = nn::functional::conv2d(x, w, Tensor(), 1, 2);
  const Tensor got = y.cpu();
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.data_ptr<float>()[i], e = expected.data_ptr<float>()[i];
    const float tol = 1e-5f + 2e-5f * magnitude.data_ptr<float>()[i];
    if (!(std::abs(g - e) <= tol) && bad++ < 5) {
      ADD_FAILURE() << "conv2d after the out-of-memory: element " << i << " is " << g << ", expected " << e
                    << " (tolerance " << tol << ")";
    }
  }
  std::string choices;
  for (const std::string& c : cuda::conv2d_algorithm_choices()) choices += "\n  " + c;
  EXPECT_EQ(bad, 0) << "of " << got.numel() << " elements; the search's choices:" << choices;
}

TEST(OomGpu, CublasMatmulOutOfMemoryIsAnExceptionAndMatmulWorksAfterwards) {
  MINIDL_REQUIRE_GPU();
  RestoreSettings restore;
  cuda::set_allow_tf32(true, false);
  const TensorOptions o = TensorOptions(kFloat32).device(kGpu);
  const Tensor a = uniform({8192, 64}, -1.0, 1.0, o), b = uniform({64, 8192}, -1.0, 1.0, o);
  const Tensor warm = matmul(a.reshape({64, 8192}), b.reshape({8192, 64}));  // creates the cuBLAS handle
  const std::size_t out_bytes = std::size_t{8192} * 8192 * sizeof(float);  // 256 MiB
  cap_memory(64 * kMiB);
  try {
    const Tensor c = matmul(a, b);
    FAIL() << "expected OutOfMemoryError for a " << out_bytes << "-byte product, got " << c.nbytes() << " bytes";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), out_bytes);
    EXPECT_TRUE(contains(e.what(), std::to_string(out_bytes))) << e.what();
  }
  // Still capped: a product that fits works.
  const Tensor small_a = uniform({96, 64}, -1.0, 1.0, o), small_b = uniform({64, 80}, -1.0, 1.0, o);
  expect_close(matmul(small_a, small_b), matmul(small_a.cpu().to(kFloat64), small_b.cpu().to(kFloat64)).to(kFloat32),
               1e-5, 1e-5, "small matmul under the cap");
  cuda::set_per_process_memory_fraction(1.0);
  const Tensor c = matmul(a, b);
  const Tensor rows = matmul(a.cpu().to(kFloat64).reshape({8192, 64}), b.cpu().to(kFloat64));
  expect_close(c, rows.to(kFloat32), 1e-5, 1e-5, "matmul after the out-of-memory");
}

// The cuBLAS handle takes a fixed 32 MiB workspace when it is created (so that cuBLAS never allocates inside a
// CUDA graph). A fresh process is needed to see that creation fail, hence a death-test child that exits 0
// when everything behaved.
void cublas_workspace_oom_then_recover() {
  auto fail = [](int code, const std::string& why) {
    std::fprintf(stderr, "%s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  };
  const TensorOptions o = TensorOptions(kFloat64).device(kGpu);
  const Tensor a = uniform({40, 30}, -1.0, 1.0, o), b = uniform({30, 20}, -1.0, 1.0, o);
  cap_memory(8 * kMiB);
  try {
    const Tensor c = matmul(a, b);
    fail(2, "no OutOfMemoryError although the cuBLAS workspace cannot fit");
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    if (!contains(msg, "cuBLAS workspace") || !contains(msg, std::to_string(32 * kMiB))) {
      fail(3, "message does not name the cuBLAS workspace and its size: " + msg);
    }
  } catch (const std::exception& e) {
    fail(4, std::string("expected OutOfMemoryError, got: ") + e.what());
  }
  cuda::set_per_process_memory_fraction(1.0);
  try {
    const std::vector<double> got = matmul(a, b).cpu().to_vector<double>();
    const std::vector<double> want = matmul(a.cpu(), b.cpu()).to_vector<double>();
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (std::fabs(got[i] - want[i]) > 1e-12) fail(5, "wrong product after the out-of-memory at " + std::to_string(i));
    }
  } catch (const std::exception& e) {
    fail(6, std::string("matmul after the out-of-memory failed: ") + e.what());
  }
  std::fflush(stderr);
  std::_Exit(0);
}

TEST(OomGpuDeathTest, CublasHandleWorkspaceOutOfMemoryIsAnExceptionAndTheHandleIsCreatedLater) {
  MINIDL_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-executes the binary: a fresh CUDA context
  EXPECT_EXIT(cublas_workspace_oom_then_recover(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
#endif  // MINIDL_CUDA_ENABLED
