// The GPU layer kernels (cuDNN convolution and batch norm, own pooling kernels) against the plain references in
// reference_kernels.h: random inputs, float and double, every element of every output compared, TF32 off.
// Device outputs start filled with NaN bytes (indices with -1) so an element a kernel fails to write is caught.
#include "minidl/config.h"

#if MINIDL_CUDA_ENABLED

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"
#include "cuda/context.h"
#include "cuda/conv2d_direct.h"
#include "cuda/conv2d_igemm.h"
#include "cuda/conv2d_staged.h"
#include "minidl/cuda.h"
#include "minidl/errors.h"
#include "pool_case.h"
#include "reference_kernels.h"

namespace minidl {
namespace {

std::string no_device_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return detail::str("cudaGetDeviceCount failed: ", cudaGetErrorString(err));
  if (count == 0) return "cudaGetDeviceCount returned 0";
  return "";
}

// A convolution output sums up to tens of thousands of products, and cuDNN's algorithms (blocked GEMMs,
// Winograd, FFT) round differently from the reference. Their error grows with the sum of the products'
// magnitudes, not with the (cancelling) result, so convolution outputs may also differ by sum_rtol times the
// same convolution of |x|, |w| and |dy|. For float that is about 30 units of roundoff of that sum (TF32 is
// off); a wrong tap still shows up as an error of the order of the result itself.
template <class T>
struct Tolerance;
template <>
struct Tolerance<float> {
  static constexpr double rtol = 1e-4, atol = 1e-5, sum_rtol = 4e-6;
};
template <>
struct Tolerance<double> {
  static constexpr double rtol = 1e-10, atol = 1e-10, sum_rtol = 1e-13;
};

template <class T>
std::vector<T> uniform(std::int64_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& e : v) e = static_cast<T>(dist(rng));
  return v;
}

template <class T>
std::vector<T> nans(std::int64_t n) {
  return std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN());
}

/// Checks |got - want| <= atol + rtol * |want| (+ sum_rtol * magnitude, where given) for every element.
template <class T>
void expect_all_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what,
                      double rtol = Tolerance<T>::rtol, double atol = Tolerance<T>::atol,
                      const std::vector<T>* magnitude = nullptr, double sum_rtol = 0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (magnitude) {
    ASSERT_EQ(magnitude->size(), want.size()) << what;
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double tol = atol + rtol * std::abs(w) + (magnitude ? sum_rtol * (*magnitude)[i] : 0.0);
    if (!(std::abs(g - w) <= tol)) {  // NaN fails too
      if (bad < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << g << ", expected " << w << " (tolerance " << tol << ")";
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ";
}

/// Device memory for one test, copied on the library's stream (a non-blocking stream: plain cudaMemcpy would
/// not be ordered with the kernels).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::int64_t n) : n_(static_cast<std::size_t>(n)) {
    MINIDL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), bytes()));
    MINIDL_CUDA_CHECK(cudaMemsetAsync(ptr_, 0xFF, bytes(), gpu::stream()));  // NaN, or -1 for indices
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(static_cast<std::int64_t>(host.size())) {
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice, gpu::stream()));
    // The host vector may die right after; wait until the copy has read it.
    MINIDL_CUDA_CHECK(cudaStreamSynchronize(gpu::stream()));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    MINIDL_CUDA_CHECK(cudaMemcpyAsync(out.data(), ptr_, bytes(), cudaMemcpyDeviceToHost, gpu::stream()));
    MINIDL_CUDA_CHECK(cudaStreamSynchronize(gpu::stream()));
    return out;
  }

 private:
  std::size_t bytes() const { return n_ * sizeof(T); }
  std::size_t n_;
  T* ptr_ = nullptr;
};

/// Skips without a device; runs every test with TF32 off and nondeterministic algorithms allowed, restoring the
/// global settings afterwards.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = no_device_reason();
    if (!reason.empty()) GTEST_SKIP() << "no CUDA device: " << reason;
    saved_tf32_conv_ = cuda::allow_tf32_conv();
    saved_tf32_matmul_ = cuda::allow_tf32_matmul();
    saved_deterministic_ = deterministic();
    saved_benchmark_ = cuda::cudnn_benchmark();  // left as the environment set it (MINIDL_CUDNN_BENCHMARK)
    cuda::set_allow_tf32(false, false);
    set_deterministic(false);
  }
  void TearDown() override {
    cuda::set_allow_tf32(saved_tf32_conv_, saved_tf32_matmul_);
    set_deterministic(saved_deterministic_);
    cuda::set_cudnn_benchmark(saved_benchmark_);
  }

 private:
  bool saved_tf32_conv_ = true, saved_tf32_matmul_ = false, saved_deterministic_ = false, saved_benchmark_ = true;
};

template <class T>
class GpuKernels : public GpuTest {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GpuKernels, FloatTypes);

// ---- convolution -------------------------------------------------------------------------------------------

struct ConvCase {
  const char* name;
  std::int64_t N, C, H, W, K, R, S;
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool bias = true;
};

std::vector<ConvCase> conv_cases() {
  return {
      {"odd_7x5_batch1", 1, 1, 7, 5, 2, 3, 3},
      {"batch3_stride2_pad1", 3, 3, 7, 5, 4, 3, 3, 2, 2, 1, 1},
      {"dilation2_pad1_nonsquare_kernel", 3, 2, 7, 5, 3, 3, 2, 1, 1, 1, 1, 2, 2},
      {"groups2_pad1_nobias", 3, 4, 7, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, false},
      {"depthwise_stride2", 2, 3, 6, 7, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3},
      {"1x1", 3, 5, 7, 5, 4, 1, 1},
      {"asymmetric_everything", 3, 3, 9, 6, 5, 2, 4, 2, 1, 1, 2, 1, 2},
      {"taps_entirely_in_padding", 2, 2, 1, 2, 3, 5, 3, 1, 1, 2, 1},
      {"batch5_groups2_stride2_dilation2", 5, 4, 9, 8, 4, 3, 3, 2, 2, 2, 2, 2, 2, 2},
      {"mnist_conv1", 64, 1, 28, 28, 32, 3, 3},
      {"mnist_conv2", 8, 32, 26, 26, 64, 3, 3},
  };
}

kernels::Conv2dParams conv_params(const ConvCase& c) {
  kernels::Conv2dParams p;
  p.N = c.N, p.C = c.C, p.H = c.H, p.W = c.W, p.K = c.K, p.R = c.R, p.S = c.S;
  p.stride_h = c.sh, p.stride_w = c.sw, p.pad_h = c.ph, p.pad_w = c.pw, p.dil_h = c.dh, p.dil_w = c.dw;
  p.groups = c.groups;
  p.finalize("test conv");
  return p;
}

template <class T>
std::vector<T> absolute(const std::vector<T>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::abs(v[i]);
  return out;
}

/// Host inputs of one convolution case, the reference outputs, and the reference run on absolute values (the
/// sums of the products' magnitudes, which bound the rounding error).
template <class T>
struct ConvProblem {
  kernels::Conv2dParams p;
  bool bias;
  std::int64_t xs, ws, ys;
  std::vector<T> x, w, b, dy;
  std::vector<T> y_ref, dx_ref, dw_ref, db_ref;
  std::vector<T> y_mag, dx_mag, dw_mag, db_mag;

  ConvProblem(const ConvCase& c, std::mt19937& rng) : p(conv_params(c)), bias(c.bias) {
    xs = p.N * p.C * p.H * p.W, ws = p.K * (p.C / p.groups) * p.R * p.S, ys = p.N * p.K * p.P * p.Q;
    x = uniform<T>(xs, rng), w = uniform<T>(ws, rng), b = uniform<T>(p.K, rng), dy = uniform<T>(ys, rng);
    run_reference(x, w, b, dy, y_ref, dx_ref, dw_ref, db_ref);
    run_reference(absolute(x), absolute(w), absolute(b), absolute(dy), y_mag, dx_mag, dw_mag, db_mag);
  }

  void run_reference(const std::vector<T>& x_, const std::vector<T>& w_, const std::vector<T>& b_,
                     const std::vector<T>& dy_, std::vector<T>& y_, std::vector<T>& dx_, std::vector<T>& dw_,
                     std::vector<T>& db_) const {
    y_ = nans<T>(ys), dx_ = nans<T>(xs), dw_ = nans<T>(ws), db_ = nans<T>(p.K);
    ref::conv2d_forward(p, x_.data(), w_.data(), bias ? b_.data() : nullptr, y_.data());
    ref::conv2d_backward_input(p, dy_.data(), w_.data(), dx_.data());
    ref::conv2d_backward_weight(p, x_.data(), dy_.data(), dw_.data(), bias ? db_.data() : nullptr);
  }
};

struct ConvTolerance {
  double rtol, atol, sum_rtol;
};
/// Full-precision (FMA, no TF32) convolutions. cuDNN's search may pick its FFT algorithms, whose float error
/// grows with the whole sum's magnitude rather than the result's: 4.8e-6 of sum |x||w| was measured on the
/// H200 (2026-11-29, backward-data of the example's conv2), so float allows 2e-5 of it; double keeps its bound.
template <class T>
constexpr ConvTolerance full_precision() {
  return {Tolerance<T>::rtol, Tolerance<T>::atol, std::is_same<T, float>::value ? 2e-5 : Tolerance<T>::sum_rtol};
}

/// The fused ReLU epilogue (conv2d_forward with Activation::Relu) against the same kernel's plain output: the
/// same accumulation, so every element must be exactly Relu of the plain one.
template <class T>
void expect_relu_of(const std::vector<T>& plain, const std::vector<T>& fused) {
  ASSERT_EQ(plain.size(), fused.size());
  int negatives = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    negatives += plain[i] < 0;
    ASSERT_EQ(fused[i], kernels::Relu<T>{T(0)}(plain[i])) << "element " << i << " of " << plain.size();
  }
  EXPECT_GT(negatives, 0) << "the inputs should give negative outputs for the ReLU to act on";
}

constexpr kernels::Activation kNoAct = kernels::Activation::None, kRelu = kernels::Activation::Relu;

/// Runs the three GPU passes of `prob` and compares them with the references; the forward also with the
/// fused ReLU.
template <class T>
void check_conv(const ConvProblem<T>& prob, const ConvTolerance& tol) {
  const kernels::Conv2dParams& p = prob.p;
  const DeviceBuffer<T> x(prob.x), w(prob.w), b(prob.b), dy(prob.dy);
  DeviceBuffer<T> y(prob.ys), y_relu(prob.ys), dx(prob.xs), dw(prob.ws), db(p.K);
  gpu::conv2d_forward<T>(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y.get(), kNoAct);
  expect_all_close(y.host(), prob.y_ref, "y", tol.rtol, tol.atol, &prob.y_mag, tol.sum_rtol);
  gpu::conv2d_forward<T>(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y_relu.get(), kRelu);
  expect_relu_of(y.host(), y_relu.host());
  gpu::conv2d_backward_input<T>(p, dy.get(), w.get(), dx.get());
  expect_all_close(dx.host(), prob.dx_ref, "dx", tol.rtol, tol.atol, &prob.dx_mag, tol.sum_rtol);
  gpu::conv2d_backward_weight<T>(p, x.get(), dy.get(), dw.get(), prob.bias ? db.get() : nullptr);
  expect_all_close(dw.host(), prob.dw_ref, "dw", tol.rtol, tol.atol, &prob.dw_mag, tol.sum_rtol);
  if (prob.bias) expect_all_close(db.host(), prob.db_ref, "dbias", tol.rtol, tol.atol, &prob.db_mag, tol.sum_rtol);
}

TYPED_TEST(GpuKernels, Conv2dMatchesReference) {
  using T = TypeParam;
  std::mt19937 rng(1234);
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const ConvProblem<T> prob(c, rng);
    check_conv(prob, full_precision<T>());
    // The second round runs on the cached plans (the first one searched for the algorithms).
    check_conv(prob, full_precision<T>());
  }
}

TYPED_TEST(GpuKernels, Conv2dDeterministicModeIsBitwiseRepeatable) {
  using T = TypeParam;
  set_deterministic(true);
  std::mt19937 rng(77);
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const ConvProblem<T> prob(c, rng);
    const kernels::Conv2dParams& p = prob.p;
    const DeviceBuffer<T> x(prob.x), w(prob.w), dy(prob.dy);
    DeviceBuffer<T> dx1(prob.xs), dx2(prob.xs), dw1(prob.ws), dw2(prob.ws), db1(p.K), db2(p.K);
    gpu::conv2d_backward_input<T>(p, dy.get(), w.get(), dx1.get());
    gpu::conv2d_backward_input<T>(p, dy.get(), w.get(), dx2.get());
    gpu::conv2d_backward_weight<T>(p, x.get(), dy.get(), dw1.get(), db1.get());
    gpu::conv2d_backward_weight<T>(p, x.get(), dy.get(), dw2.get(), db2.get());
    EXPECT_EQ(dx1.host(), dx2.host());
    EXPECT_EQ(dw1.host(), dw2.host());
    EXPECT_EQ(db1.host(), db2.host());
    const ConvTolerance tol = full_precision<T>();
    expect_all_close(dx1.host(), prob.dx_ref, "dx", tol.rtol, tol.atol, &prob.dx_mag, tol.sum_rtol);
    expect_all_close(dw1.host(), prob.dw_ref, "dw", tol.rtol, tol.atol, &prob.dw_mag, tol.sum_rtol);
  }
}

/// TF32 keeps 10 mantissa bits of each factor: rounded (cuDNN) that is a relative error up to 2^-11, truncated
/// (minidl's kernels feed fp32 bits to the tensor cores) up to 2^-10, so a product is off by at most 2e-3 of
/// its magnitude, and the sum by at most that fraction of sum |x||w| plus the fp32 accumulation.
constexpr ConvTolerance kTf32{0, 1e-6, 2.5e-3};

// TF32 results are only checked loosely (TF32 keeps 10 mantissa bits: roundoff 2^-11); what matters is that
// switching TF32 back off selects the full-precision plan again instead of reusing the TF32 one cached for the
// same shape.
TEST_F(GpuTest, Conv2dTf32SettingSelectsItsOwnPlan) {
  std::mt19937 rng(5);
  const ConvProblem<float> prob({"mnist_conv2", 8, 32, 26, 26, 64, 3, 3}, rng);
  cuda::set_allow_tf32(true, false);
  check_conv(prob, ConvTolerance{1e-3, 1e-4, 4e-3});
  cuda::set_allow_tf32(false, false);
  check_conv(prob, full_precision<float>());
}

// A shape first seen while the stream is being captured cannot be timed (cudnnFind synchronises); it must take
// an untimed choice, and the replayed graph must compute the right result. With 3 input channels (27 taps) that
// is the direct kernel; with 5 (45 taps) cuDNN's heuristic choice, or with TF32 on the implicit-GEMM kernel.
TEST_F(GpuTest, Conv2dFirstSeenDuringGraphCapture) {
  for (const bool tf32 : {false, true}) {
    for (const std::int64_t channels : {3, 5}) {
      SCOPED_TRACE(detail::str(tf32 ? "TF32 on" : "TF32 off", ", ", channels, " input channels"));
      cuda::set_allow_tf32(tf32, false);
      std::mt19937 rng(11);
      // Shapes no other test uses, so no plan for them is cached yet.
      const ConvProblem<float> prob({"capture_only_shape", 2, channels, 11, 9, tf32 ? 6 : 5, 3, 3, 1, 1, 1, 1}, rng);
      const DeviceBuffer<float> x(prob.x), w(prob.w), b(prob.b);
      DeviceBuffer<float> y(prob.ys);
      // Create the handle beforehand: cudnnCreate synchronises, which capture forbids. (Scratch memory may be
      // allocated during this relaxed-mode capture.)
      gpu::cudnn();
      cudaGraph_t graph = nullptr;
      MINIDL_CUDA_CHECK(cudaStreamBeginCapture(gpu::stream(), cudaStreamCaptureModeRelaxed));
      try {
        gpu::conv2d_forward<float>(prob.p, x.get(), w.get(), b.get(), y.get(), kNoAct);
      } catch (const std::exception& e) {
        (void)cudaStreamEndCapture(gpu::stream(), &graph);
        if (graph) cudaGraphDestroy(graph);
        FAIL() << "conv2d_forward during capture threw: " << e.what();
      }
      MINIDL_CUDA_CHECK(cudaStreamEndCapture(gpu::stream(), &graph));
      cudaGraphExec_t exec = nullptr;
      MINIDL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      MINIDL_CUDA_CHECK(cudaGraphLaunch(exec, gpu::stream()));
      const std::vector<float> got = y.host();
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      const ConvTolerance tol = tf32 ? kTf32 : full_precision<float>();
      expect_all_close(got, prob.y_ref, "y", tol.rtol, tol.atol, &prob.y_mag, tol.sum_rtol);
      // Eager calls reuse the plan chosen during capture.
      check_conv(prob, tol);
    }
  }
}

// ---- minidl's implicit-GEMM convolution (TF32), called directly: the search may prefer cuDNN for a shape ---

std::vector<ConvCase> igemm_cases() {
  std::vector<ConvCase> cases = conv_cases();
  // Tails in every tile dimension: output pixels, output channels (64 per tile) and reduction (32 per tile).
  cases.push_back({"tails_K70_C37", 3, 37, 13, 11, 70, 3, 3, 1, 1, 1, 1});
  cases.push_back({"1x1_C130_K130", 2, 130, 5, 5, 130, 1, 1});
  cases.push_back({"5x5_pad2_dilation3", 2, 6, 17, 15, 9, 5, 5, 1, 1, 2, 2, 3, 3});
  cases.push_back({"mnist_conv2_batch32", 32, 32, 26, 26, 64, 3, 3});
  return cases;
}

TEST_F(GpuTest, ImplicitGemmConv2dMatchesReference) {
  std::mt19937 rng(4321);
  int covered[3] = {0, 0, 0};
  for (const ConvCase& c : igemm_cases()) {
    SCOPED_TRACE(c.name);
    const ConvProblem<float> prob(c, rng);
    const kernels::Conv2dParams& p = prob.p;
    const DeviceBuffer<float> x(prob.x), w(prob.w), b(prob.b), dy(prob.dy);
    if (gpu::igemm_supports(p, gpu::ConvPass::kForward)) {
      ++covered[0];
      DeviceBuffer<float> y(prob.ys), y_relu(prob.ys);
      gpu::igemm_conv2d_forward(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y.get(), kNoAct);
      expect_all_close(y.host(), prob.y_ref, "y", kTf32.rtol, kTf32.atol, &prob.y_mag, kTf32.sum_rtol);
      gpu::igemm_conv2d_forward(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y_relu.get(), kRelu);
      expect_relu_of(y.host(), y_relu.host());
    }
    if (gpu::igemm_supports(p, gpu::ConvPass::kBackwardInput)) {
      ++covered[1];
      DeviceBuffer<float> dx(prob.xs);
      gpu::igemm_conv2d_backward_input(p, dy.get(), w.get(), dx.get());
      expect_all_close(dx.host(), prob.dx_ref, "dx", kTf32.rtol, kTf32.atol, &prob.dx_mag, kTf32.sum_rtol);
    }
    if (gpu::igemm_supports(p, gpu::ConvPass::kBackwardWeight)) {
      ++covered[2];
      DeviceBuffer<float> dw1(prob.ws), dw2(prob.ws);
      gpu::igemm_conv2d_backward_weight(p, x.get(), dy.get(), dw1.get());
      expect_all_close(dw1.host(), prob.dw_ref, "dw", kTf32.rtol, kTf32.atol, &prob.dw_mag, kTf32.sum_rtol);
      // The batch splits are summed in a fixed order.
      gpu::igemm_conv2d_backward_weight(p, x.get(), dy.get(), dw2.get());
      EXPECT_EQ(dw1.host(), dw2.host());
    }
  }
  // Everything but the grouped cases, and for the input gradient the strided ones, runs the own kernels.
  EXPECT_EQ(covered[0], 12);
  EXPECT_EQ(covered[1], 10);
  EXPECT_EQ(covered[2], 12);
}

// ---- minidl's staged convolution (source band in shared memory), called directly ------------------------

std::vector<ConvCase> staged_cases() {
  std::vector<ConvCase> cases = igemm_cases();
  // An image too large for one block's shared memory: many bands, each with its halo of rows.
  cases.push_back({"many_bands_pad1", 2, 64, 40, 44, 40, 3, 3, 1, 1, 1, 1});
  cases.push_back({"stride2_dilation2_pad2", 3, 5, 17, 19, 33, 3, 3, 2, 2, 2, 2, 2, 2});
  cases.push_back({"one_image_mnist_conv2", 1, 32, 26, 26, 64, 3, 3});  // more bands so that blocks fill the GPU
  // 7x6 images and 6x5 outputs: the weight gradient copies x and dy 8 bytes at a time.
  cases.push_back({"pairs_of_floats_K40", 3, 12, 7, 6, 40, 2, 2});
  return cases;
}

TEST_F(GpuTest, StagedConv2dMatchesReference) {
  std::mt19937 rng(2468);
  int covered[3] = {0, 0, 0};
  for (const ConvCase& c : staged_cases()) {
    SCOPED_TRACE(c.name);
    const ConvProblem<float> prob(c, rng);
    const kernels::Conv2dParams& p = prob.p;
    const DeviceBuffer<float> x(prob.x), w(prob.w), b(prob.b), dy(prob.dy);
    // Every band choice the search would time: each splits the rows differently.
    for (int bands : gpu::staged_band_choices(p, gpu::ConvPass::kForward)) {
      SCOPED_TRACE(::testing::Message() << bands << " bands (forward)");
      ++covered[0];
      DeviceBuffer<float> y1(prob.ys), y2(prob.ys), y_relu(prob.ys);
      gpu::staged_conv2d_forward(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y1.get(), kNoAct, bands);
      expect_all_close(y1.host(), prob.y_ref, "y", kTf32.rtol, kTf32.atol, &prob.y_mag, kTf32.sum_rtol);
      gpu::staged_conv2d_forward(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y2.get(), kNoAct, bands);
      EXPECT_EQ(y1.host(), y2.host());  // no atomics: bitwise repeatable
      gpu::staged_conv2d_forward(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y_relu.get(), kRelu, bands);
      expect_relu_of(y1.host(), y_relu.host());
    }
    for (int bands : gpu::staged_band_choices(p, gpu::ConvPass::kBackwardInput)) {
      SCOPED_TRACE(::testing::Message() << bands << " bands (input gradient)");
      ++covered[1];
      DeviceBuffer<float> dx(prob.xs);
      gpu::staged_conv2d_backward_input(p, dy.get(), w.get(), dx.get(), bands);
      expect_all_close(dx.host(), prob.dx_ref, "dx", kTf32.rtol, kTf32.atol, &prob.dx_mag, kTf32.sum_rtol);
    }
    for (int bands : gpu::staged_band_choices(p, gpu::ConvPass::kBackwardWeight)) {
      SCOPED_TRACE(::testing::Message() << bands << " bands (weight gradient)");
      ++covered[2];
      DeviceBuffer<float> dw1(prob.ws), dw2(prob.ws), dw_alone(prob.ws), db1(p.K), db2(p.K);
      gpu::staged_conv2d_backward_weight(p, x.get(), dy.get(), dw1.get(), db1.get(), bands);
      expect_all_close(dw1.host(), prob.dw_ref, "dw", kTf32.rtol, kTf32.atol, &prob.dw_mag, kTf32.sum_rtol);
      // The bias gradient adds dy in fp32 (no tensor cores): full precision.
      const ConvTolerance fp32 = full_precision<float>();
      expect_all_close(db1.host(), prob.db_ref, "dbias", fp32.rtol, fp32.atol, &prob.db_mag, fp32.sum_rtol);
      gpu::staged_conv2d_backward_weight(p, x.get(), dy.get(), dw2.get(), db2.get(), bands);
      EXPECT_EQ(dw1.host(), dw2.host());  // partial sums added in a fixed order: bitwise repeatable
      EXPECT_EQ(db1.host(), db2.host());
      gpu::staged_conv2d_backward_weight(p, x.get(), dy.get(), dw_alone.get(), nullptr, bands);
      EXPECT_EQ(dw1.host(), dw_alone.host());  // the bias gradient changes nothing else
    }
    if (c.groups == 1) {
      EXPECT_FALSE(gpu::staged_band_choices(p, gpu::ConvPass::kForward).empty());
      EXPECT_FALSE(gpu::staged_band_choices(p, gpu::ConvPass::kBackwardWeight).empty());
    }
    if (c.groups == 1 && c.sh == 1 && c.sw == 1) {
      EXPECT_FALSE(gpu::staged_band_choices(p, gpu::ConvPass::kBackwardInput).empty());
    }
  }
  // Everything but the grouped cases, and for the input gradient the strided ones, at one band choice or more.
  EXPECT_GE(covered[0], 16);
  EXPECT_GE(covered[1], 13);
  EXPECT_GE(covered[2], 16);
}

// The weight gradient copies 16 bytes at a time where the tensors' alignment allows, 8 or 4 otherwise: tensors
// one float past an allocation's start (tensor views may start anywhere) take the narrower copies.
TEST_F(GpuTest, StagedWeightGradientOfMisalignedTensors) {
  std::mt19937 rng(1357);
  const ConvProblem<float> prob({"mnist_conv2_misaligned", 4, 32, 26, 26, 64, 3, 3}, rng);
  const kernels::Conv2dParams& p = prob.p;
  std::vector<float> x(prob.x), dy(prob.dy);
  x.insert(x.begin(), 0.f);
  dy.insert(dy.begin(), 0.f);
  const DeviceBuffer<float> x_at(x), dy_at(dy);
  for (int bands : gpu::staged_band_choices(p, gpu::ConvPass::kBackwardWeight)) {
    SCOPED_TRACE(::testing::Message() << bands << " bands");
    DeviceBuffer<float> dw(prob.ws), db(p.K);
    gpu::staged_conv2d_backward_weight(p, x_at.get() + 1, dy_at.get() + 1, dw.get(), db.get(), bands);
    expect_all_close(dw.host(), prob.dw_ref, "dw", kTf32.rtol, kTf32.atol, &prob.dw_mag, kTf32.sum_rtol);
    const ConvTolerance fp32 = full_precision<float>();
    expect_all_close(db.host(), prob.db_ref, "dbias", fp32.rtol, fp32.atol, &prob.db_mag, fp32.sum_rtol);
  }
}

TEST_F(GpuTest, StagedDeclinesWhatItDoesNotHandle) {
  const auto supports = [](const kernels::Conv2dParams& p, gpu::ConvPass pass) {
    return !gpu::staged_band_choices(p, pass).empty();
  };
  kernels::Conv2dParams p;
  p.N = 2, p.C = 4, p.H = 9, p.W = 9, p.K = 6, p.R = 3, p.S = 3;
  p.finalize("test conv");
  EXPECT_TRUE(supports(p, gpu::ConvPass::kForward));
  EXPECT_TRUE(supports(p, gpu::ConvPass::kBackwardInput));
  EXPECT_TRUE(supports(p, gpu::ConvPass::kBackwardWeight));
  p.stride_h = 2;
  p.finalize("test conv");
  EXPECT_TRUE(supports(p, gpu::ConvPass::kForward));
  EXPECT_FALSE(supports(p, gpu::ConvPass::kBackwardInput));  // strided input gradient
  EXPECT_TRUE(supports(p, gpu::ConvPass::kBackwardWeight));
  p.stride_h = 1, p.groups = 2;
  p.finalize("test conv");
  EXPECT_FALSE(supports(p, gpu::ConvPass::kForward));
  EXPECT_FALSE(supports(p, gpu::ConvPass::kBackwardWeight));
  p.groups = 1, p.C = 2048;  // 32 channels' weights of a 2048 x 3 x 3 reduction: 2.4 MB, more than shared memory
  p.finalize("test conv");
  EXPECT_FALSE(supports(p, gpu::ConvPass::kForward));
  EXPECT_TRUE(supports(p, gpu::ConvPass::kBackwardWeight));  // a block takes 96 of the 18432 columns
  p.C = 4, p.H = p.W = 1024, p.R = p.S = 40, p.pad_h = p.pad_w = 0;
  p.finalize("test conv");
  // The shortest band (16 pixels) reads 41 rows of 1024 floats of the 2 channels a block's columns span: 336 KB,
  // more than shared memory.
  EXPECT_FALSE(supports(p, gpu::ConvPass::kBackwardWeight));
}

TEST_F(GpuTest, StagedRejectsABandCountItDidNotOffer) {
  kernels::Conv2dParams p;
  p.N = 2, p.C = 4, p.H = 9, p.W = 9, p.K = 6, p.R = 3, p.S = 3;
  p.finalize("test conv");
  const DeviceBuffer<float> x(2 * 4 * 81), w(6 * 4 * 9);  // never read: the launch is refused first
  DeviceBuffer<float> y(2 * 6 * 49);
  EXPECT_THROW(gpu::staged_conv2d_forward(p, x.get(), w.get(), nullptr, y.get(), kNoAct, 0), ValueError);
  EXPECT_THROW(gpu::staged_conv2d_forward(p, x.get(), w.get(), nullptr, y.get(), kNoAct, 8), ValueError);  // 7 rows
  const DeviceBuffer<float> dy(2 * 6 * 49);
  DeviceBuffer<float> dw(6 * 4 * 9);
  // 49 pixels: bands of 64, 32 or 16 pixels give 1, 2 and 4 bands; 3 bands would be 32 pixels long as well.
  for (int bands : {0, 3, 50}) {
    EXPECT_THROW(gpu::staged_conv2d_backward_weight(p, x.get(), dy.get(), dw.get(), nullptr, bands), ValueError);
  }
}

// Through the public entry points with TF32 on: whichever of cuDNN and the own kernel the search picks per
// pass, results stay within TF32 rounding, also on the cached plan. One test per case, so that gtest shards
// (and compute-sanitizer's parallel jobs) can split the search's runs of every cuDNN algorithm.
class GpuConvTf32 : public GpuTest, public ::testing::WithParamInterface<ConvCase> {};

TEST_P(GpuConvTf32, MatchesReference) {
  cuda::set_allow_tf32(true, false);
  std::mt19937 rng(99);
  const ConvProblem<float> prob(GetParam(), rng);
  check_conv(prob, kTf32);
  check_conv(prob, kTf32);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuConvTf32, ::testing::ValuesIn(igemm_cases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

TEST_F(GpuTest, ImplicitGemmDeclinesWhatItDoesNotHandle) {
  kernels::Conv2dParams p;
  p.N = 2, p.C = 4, p.H = 9, p.W = 9, p.K = 6, p.R = 3, p.S = 3;
  p.finalize("test conv");
  EXPECT_TRUE(gpu::igemm_supports(p, gpu::ConvPass::kBackwardInput));
  p.stride_h = 2;
  p.finalize("test conv");
  EXPECT_TRUE(gpu::igemm_supports(p, gpu::ConvPass::kForward));
  EXPECT_FALSE(gpu::igemm_supports(p, gpu::ConvPass::kBackwardInput));  // strided input gradient
  p.stride_h = 1, p.groups = 2;
  p.finalize("test conv");
  EXPECT_FALSE(gpu::igemm_supports(p, gpu::ConvPass::kForward));
  p.groups = 1, p.N = std::int64_t{1} << 27;  // 2^27 * 4 * 81 elements: past 32-bit offsets
  p.finalize("test conv");
  EXPECT_FALSE(gpu::igemm_supports(p, gpu::ConvPass::kForward));
  EXPECT_FALSE(gpu::igemm_supports(p, gpu::ConvPass::kBackwardWeight));
}

// ---- minidl's direct convolution (at most 32 taps), called directly: the search may prefer another ----------

std::vector<ConvCase> direct_cases() {
  std::vector<ConvCase> cases = conv_cases();
  cases.push_back({"rgb_stride2_pad1_K40", 4, 3, 15, 13, 40, 3, 3, 2, 2, 1, 1});
  cases.push_back({"32_taps_dilation2", 2, 2, 12, 11, 7, 4, 4, 1, 1, 3, 3, 2, 2});
  cases.push_back({"1x1_C32", 3, 32, 6, 5, 9, 1, 1});
  cases.push_back({"16_taps_K128", 2, 1, 9, 10, 128, 4, 4, 1, 1, 1, 1});
  // More than kMaxSplits (256) runs of 256 pixels: blocks loop over several runs.
  cases.push_back({"more_pixels_than_splits", 4, 1, 260, 260, 3, 3, 3});
  return cases;
}

TYPED_TEST(GpuKernels, DirectConv2dMatchesReference) {
  using T = TypeParam;
  const ConvTolerance tol = full_precision<T>();
  std::mt19937 rng(2468);
  int covered = 0;
  for (const ConvCase& c : direct_cases()) {
    SCOPED_TRACE(c.name);
    const ConvProblem<T> prob(c, rng);
    const kernels::Conv2dParams& p = prob.p;
    if (!gpu::direct_conv_supports(p)) continue;
    ++covered;
    const DeviceBuffer<T> x(prob.x), w(prob.w), b(prob.b), dy(prob.dy);
    DeviceBuffer<T> y(prob.ys), y_relu(prob.ys), dw1(prob.ws), dw2(prob.ws);
    gpu::direct_conv2d_forward<T>(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y.get(), kNoAct);
    expect_all_close(y.host(), prob.y_ref, "y", tol.rtol, tol.atol, &prob.y_mag, tol.sum_rtol);
    gpu::direct_conv2d_forward<T>(p, x.get(), w.get(), prob.bias ? b.get() : nullptr, y_relu.get(), kRelu);
    expect_relu_of(y.host(), y_relu.host());
    gpu::direct_conv2d_backward_weight<T>(p, x.get(), dy.get(), dw1.get());
    expect_all_close(dw1.host(), prob.dw_ref, "dw", tol.rtol, tol.atol, &prob.dw_mag, tol.sum_rtol);
    // Partial sums are added in a fixed order.
    gpu::direct_conv2d_backward_weight<T>(p, x.get(), dy.get(), dw2.get());
    EXPECT_EQ(dw1.host(), dw2.host());
  }
  // All but the grouped cases and the 288-tap mnist_conv2.
  EXPECT_EQ(covered, 12);
}

TEST_F(GpuTest, DirectConvDeclinesWhatItDoesNotHandle) {
  kernels::Conv2dParams p;
  p.N = 2, p.C = 2, p.H = 9, p.W = 9, p.K = 128, p.R = 4, p.S = 4;  // 32 taps, 128 channels
  p.finalize("test conv");
  EXPECT_TRUE(gpu::direct_conv_supports(p));
  p.K = 129;  // more weights than its shared memory holds
  EXPECT_FALSE(gpu::direct_conv_supports(p));
  p.K = 6, p.C = 3;  // 48 taps
  p.finalize("test conv");
  EXPECT_FALSE(gpu::direct_conv_supports(p));
  p.C = 2, p.groups = 2;
  p.finalize("test conv");
  EXPECT_FALSE(gpu::direct_conv_supports(p));
  p.groups = 1, p.H = p.W = std::int64_t{1} << 16;  // one image of x: 2 * 2^32 elements
  p.finalize("test conv");
  EXPECT_FALSE(gpu::direct_conv_supports(p));
}

// The search's decisions are reported, one line per shape and pass, naming who runs it.
TEST_F(GpuTest, Conv2dAlgorithmChoicesNameEveryDecidedPass) {
  cuda::set_cudnn_benchmark(true);
  std::mt19937 rng(31);
  const ConvProblem<float> prob({"choices_report_shape", 2, 3, 9, 13, 5, 3, 3}, rng);
  check_conv(prob, full_precision<float>());
  int found = 0;
  for (const std::string& line : cuda::conv2d_algorithm_choices()) {
    if (line.find("input 2x3x9x13, weight 5x3x3x3") == std::string::npos) continue;
    ++found;
    // TF32 off: cuDNN or the direct kernel (27 taps), never the implicit-GEMM one.
    EXPECT_TRUE(line.find("cuDNN algorithm") != std::string::npos || line.find("minidl direct") != std::string::npos)
        << line;
    EXPECT_NE(line.find(" ms"), std::string::npos) << line;  // timed, not chosen during capture
  }
  EXPECT_EQ(found, 3);  // forward, input gradient, weight gradient
}

// With the benchmark setting off nothing is timed: cuDNN's heuristic ranks its algorithms and the own kernels are
// taken untimed where they apply; the results must still be right, and the setting keeps its own plans.
TEST_F(GpuTest, Conv2dWithCudnnBenchmarkOffChoosesUntimed) {
  std::mt19937 rng(37);
  const ConvProblem<float> wide({"benchmark_off_45_taps", 3, 5, 11, 9, 7, 3, 3}, rng);  // cuDNN's heuristic
  const ConvProblem<float> mnist({"benchmark_off_mnist_conv2", 4, 32, 26, 26, 64, 3, 3}, rng);
  cuda::set_cudnn_benchmark(false);
  check_conv(wide, full_precision<float>());
  cuda::set_allow_tf32(true, false);  // TF32: the own staged and implicit-GEMM kernels apply
  check_conv(mnist, kTf32);
  cuda::set_allow_tf32(false, false);
  cuda::set_cudnn_benchmark(true);
  check_conv(wide, full_precision<float>());  // a timed plan of its own for the same shape
  int untimed = 0, timed = 0;
  for (const std::string& line : cuda::conv2d_algorithm_choices()) {
    const bool is_wide = line.find("input 3x5x11x9, weight 7x5x3x3") != std::string::npos;
    const bool is_mnist = line.find("input 4x32x26x26, weight 64x32x3x3") != std::string::npos;
    if (!is_wide && !is_mnist) continue;
    if (line.find("untimed (benchmark off or deterministic)") != std::string::npos) {
      ++untimed;
      EXPECT_NE(line.find("chosen untimed"), std::string::npos) << line;
      if (is_mnist && line.find("(weight)") == std::string::npos) {
        EXPECT_NE(line.find("minidl"), std::string::npos) << line;  // the own kernels apply to these passes
      }
    } else if (is_wide && line.find("TF32") == std::string::npos) {
      ++timed;
      EXPECT_NE(line.find(" ms"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(untimed, 6);  // three passes of each shape
  EXPECT_EQ(timed, 3);
}

// The deterministic setting chooses untimed even with the benchmark setting on (timed choices can differ between
// runs, and different algorithms sum in different orders).
TEST_F(GpuTest, Conv2dDeterministicChoosesUntimed) {
  std::mt19937 rng(41);
  const ConvProblem<float> conv({"deterministic_untimed", 2, 6, 10, 8, 5, 3, 3}, rng);
  cuda::set_cudnn_benchmark(true);
  set_deterministic(true);
  check_conv(conv, full_precision<float>());
  set_deterministic(false);
  int untimed = 0;
  for (const std::string& line : cuda::conv2d_algorithm_choices()) {
    if (line.find("input 2x6x10x8, weight 5x6x3x3") == std::string::npos) continue;
    EXPECT_NE(line.find("untimed (benchmark off or deterministic)"), std::string::npos) << line;
    EXPECT_NE(line.find("chosen untimed"), std::string::npos) << line;
    ++untimed;
  }
  EXPECT_EQ(untimed, 3);  // forward, input gradient, weight gradient
}

TEST_F(GpuTest, Conv2dRejectsInvalidParams) {
  kernels::Conv2dParams p;
  p.N = 1, p.C = 3, p.H = 5, p.W = 5, p.K = 4, p.R = 3, p.S = 3;
  DeviceBuffer<float> x(75), w(108), y(100);
  // Not finalized: the output size 0x0 disagrees with the shape.
  EXPECT_THROW(gpu::conv2d_forward<float>(p, x.get(), w.get(), nullptr, y.get(), kNoAct), ValueError);
  p.groups = 2;  // 4 output channels divide, 3 input channels do not
  p.finalize("test conv");
  EXPECT_THROW(gpu::conv2d_forward<float>(p, x.get(), w.get(), nullptr, y.get(), kNoAct), ValueError);
  p.groups = 1;
  p.finalize("test conv");
  EXPECT_THROW(gpu::conv2d_forward<float>(p, nullptr, w.get(), nullptr, y.get(), kNoAct), ValueError);
}

// ---- pooling -----------------------------------------------------------------------------------------------

using testing::PoolCase;
using testing::pool_params;

std::vector<PoolCase> pool_cases() {
  return {
      {"mnist_k2s2", 64, 64, 24, 24, 2, 2, 2, 2},
      {"odd_7x5_batch1_k2s2", 1, 2, 7, 5, 2, 2, 2, 2},
      {"batch3_k3s2p1", 3, 2, 7, 5, 3, 3, 2, 2, 1, 1},
      {"nonsquare", 3, 2, 7, 6, 3, 2, 1, 2, 1, 0},
      {"overlapping_s1", 2, 1, 5, 5, 3, 3, 1, 1},
      {"stride_larger_than_kernel", 2, 3, 9, 7, 2, 2, 3, 3},
      {"k1", 1, 2, 4, 3, 1, 1, 1, 1},
      {"global", 3, 2, 7, 5, 7, 5, 1, 1},
  };
}

// Continuous inputs, inputs with many ties (integers in [-2, 2]: the first maximum must win) and all-negative
// inputs (padding must not produce a 0 maximum).
TYPED_TEST(GpuKernels, MaxPool2dMatchesReference) {
  using T = TypeParam;
  std::mt19937 rng(99);
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    const kernels::Pool2dParams p = pool_params(c);
    const std::int64_t xs = p.N * p.C * p.H * p.W, ys = p.N * p.C * p.P * p.Q;
    auto ties = uniform<T>(xs, rng, -2.5, 2.5);
    for (T& v : ties) v = std::round(v);
    for (const auto& x_host : {uniform<T>(xs, rng), ties, uniform<T>(xs, rng, -3.0, -1.0)}) {
      auto y_ref = nans<T>(ys);
      std::vector<std::int64_t> idx_ref(static_cast<std::size_t>(ys), -7);
      ref::max_pool2d_forward(p, x_host.data(), y_ref.data(), idx_ref.data());
      const DeviceBuffer<T> x(x_host);
      DeviceBuffer<T> y(ys), y_no_idx(ys);
      DeviceBuffer<std::int64_t> idx(ys);
      gpu::max_pool2d_forward<T>(p, x.get(), y.get(), idx.get());
      gpu::max_pool2d_forward<T>(p, x.get(), y_no_idx.get(), nullptr);
      expect_all_close(y.host(), y_ref, "y");
      expect_all_close(y_no_idx.host(), y_ref, "y (no indices)");
      EXPECT_EQ(idx.host(), idx_ref);

      const auto dy_host = uniform<T>(ys, rng);
      auto dx_ref = nans<T>(xs);
      ref::max_pool2d_backward(p, dy_host.data(), idx_ref.data(), dx_ref.data());
      const DeviceBuffer<T> dy(dy_host);
      DeviceBuffer<T> dx(xs);
      gpu::max_pool2d_backward<T>(p, dy.get(), idx.get(), dx.get());
      expect_all_close(dx.host(), dx_ref, "dx");
    }
  }
}

TYPED_TEST(GpuKernels, MaxPool2dPropagatesNaN) {
  using T = TypeParam;
  kernels::Pool2dParams p;
  p.N = 1, p.C = 1, p.H = 2, p.W = 3, p.kh = 2, p.kw = 3, p.sh = 1, p.sw = 1;
  p.finalize("test pool");
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const DeviceBuffer<T> x(std::vector<T>{T(1), nan, T(5), T(2), nan, T(0)});
  DeviceBuffer<T> y(1);
  DeviceBuffer<std::int64_t> idx(1);
  gpu::max_pool2d_forward<T>(p, x.get(), y.get(), idx.get());
  EXPECT_TRUE(std::isnan(y.host()[0]));
  EXPECT_EQ(idx.host()[0], 4);  // the last NaN, as on the CPU
}

TYPED_TEST(GpuKernels, AvgPool2dMatchesReference) {
  using T = TypeParam;
  std::mt19937 rng(7);
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    const kernels::Pool2dParams p = pool_params(c);
    const std::int64_t xs = p.N * p.C * p.H * p.W, ys = p.N * p.C * p.P * p.Q;
    const auto x_host = uniform<T>(xs, rng), dy_host = uniform<T>(ys, rng);
    auto y_ref = nans<T>(ys), dx_ref = nans<T>(xs);
    ref::avg_pool2d_forward(p, x_host.data(), y_ref.data());
    ref::avg_pool2d_backward(p, dy_host.data(), dx_ref.data());
    const DeviceBuffer<T> x(x_host), dy(dy_host);
    DeviceBuffer<T> y(ys), dx(xs);
    gpu::avg_pool2d_forward<T>(p, x.get(), y.get());
    gpu::avg_pool2d_backward<T>(p, dy.get(), dx.get());
    expect_all_close(y.host(), y_ref, "y");
    expect_all_close(dx.host(), dx_ref, "dx");
  }
}

TEST_F(GpuTest, Pool2dRejectsUnfinalizedParams) {
  kernels::Pool2dParams p;
  p.N = 1, p.C = 1, p.H = 4, p.W = 4, p.kh = 2, p.kw = 2, p.sh = 2, p.sw = 2;
  DeviceBuffer<float> x(16), y(4);
  EXPECT_THROW(gpu::avg_pool2d_forward<float>(p, x.get(), y.get()), ValueError);
}

// ---- batch norm --------------------------------------------------------------------------------------------

struct BatchNormCase {
  const char* name;
  std::int64_t N, C, HW;
  bool affine, running;
};

TYPED_TEST(GpuKernels, BatchNormMatchesReference) {
  using T = TypeParam;
  std::mt19937 rng(2024);
  const std::vector<BatchNormCase> cases = {
      {"batch1_7x5", 1, 3, 35, true, true},        {"batch3_7x5", 3, 5, 35, true, true},
      {"batch3_no_affine", 3, 5, 35, false, true}, {"hw1_no_running", 4, 2, 1, true, false},
      {"mnist_like", 64, 32, 576, true, true},
  };
  for (const BatchNormCase& c : cases) {
    SCOPED_TRACE(c.name);
    kernels::BatchNormParams p;
    p.N = c.N, p.C = c.C, p.HW = c.HW, p.eps = 1e-5, p.momentum = 0.1;
    const std::int64_t n = p.N * p.C * p.HW;
    // Values around 3 with spread 2: a mean far from 0 exposes cancellation in the variance.
    const auto x_host = uniform<T>(n, rng, 1.0, 5.0), dy_host = uniform<T>(n, rng);
    const auto gamma_host = uniform<T>(p.C, rng, 0.5, 1.5), beta_host = uniform<T>(p.C, rng);
    const auto rm0 = uniform<T>(p.C, rng), rv0 = uniform<T>(p.C, rng, 0.5, 2.0);

    auto y_ref = nans<T>(n), mean_ref = nans<T>(p.C), invstd_ref = nans<T>(p.C);
    auto rm_ref = rm0, rv_ref = rv0;
    const T* g_ref = c.affine ? gamma_host.data() : nullptr;
    const T* b_ref = c.affine ? beta_host.data() : nullptr;
    ref::batch_norm_forward_train(p, x_host.data(), g_ref, b_ref, y_ref.data(), mean_ref.data(), invstd_ref.data(),
                                  c.running ? rm_ref.data() : nullptr, c.running ? rv_ref.data() : nullptr);

    const DeviceBuffer<T> x(x_host), dy(dy_host), gamma(gamma_host), beta(beta_host), rm_eval(rm0), rv_eval(rv0);
    DeviceBuffer<T> rm(rm0), rv(rv0), y(n), mean(p.C), invstd(p.C);
    const T* g = c.affine ? gamma.get() : nullptr;
    const T* b = c.affine ? beta.get() : nullptr;
    gpu::batch_norm_forward_train<T>(p, x.get(), g, b, y.get(), mean.get(), invstd.get(),
                                     c.running ? rm.get() : nullptr, c.running ? rv.get() : nullptr);
    expect_all_close(y.host(), y_ref, "y");
    expect_all_close(mean.host(), mean_ref, "save_mean");
    expect_all_close(invstd.host(), invstd_ref, "save_invstd");
    expect_all_close(rm.host(), rm_ref, "running_mean");
    expect_all_close(rv.host(), rv_ref, "running_var");

    auto dx_ref = nans<T>(n), dgamma_ref = nans<T>(p.C), dbeta_ref = nans<T>(p.C);
    ref::batch_norm_backward(p, x_host.data(), dy_host.data(), g_ref, mean_ref.data(), invstd_ref.data(), dx_ref.data(),
                             dgamma_ref.data(), dbeta_ref.data());
    DeviceBuffer<T> dx(n), dgamma(p.C), dbeta(p.C);
    gpu::batch_norm_backward<T>(p, x.get(), dy.get(), g, mean.get(), invstd.get(), dx.get(),
                                c.affine ? dgamma.get() : nullptr, c.affine ? dbeta.get() : nullptr);
    expect_all_close(dx.host(), dx_ref, "dx");
    if (c.affine) {
      expect_all_close(dgamma.host(), dgamma_ref, "dgamma");
      expect_all_close(dbeta.host(), dbeta_ref, "dbeta");
    }
    // Without saved statistics cuDNN recomputes them from x.
    DeviceBuffer<T> dx_recomputed(n);
    gpu::batch_norm_backward<T>(p, x.get(), dy.get(), g, nullptr, nullptr, dx_recomputed.get(), nullptr, nullptr);
    expect_all_close(dx_recomputed.host(), dx_ref, "dx (statistics recomputed)");

    auto ye_ref = nans<T>(n);
    ref::batch_norm_forward_eval(p, x_host.data(), g_ref, b_ref, rm0.data(), rv0.data(), ye_ref.data());
    DeviceBuffer<T> ye(n);
    gpu::batch_norm_forward_eval<T>(p, x.get(), g, b, rm_eval.get(), rv_eval.get(), ye.get());
    expect_all_close(ye.host(), ye_ref, "y (eval)");

    // Evaluation without running statistics normalises with the batch statistics.
    DeviceBuffer<T> ye_batch(n);
    gpu::batch_norm_forward_eval<T>(p, x.get(), g, b, nullptr, nullptr, ye_batch.get());
    expect_all_close(ye_batch.host(), y_ref, "y (eval, batch statistics)");
  }
}

TEST_F(GpuTest, BatchNormRejectsInvalidArguments) {
  kernels::BatchNormParams p;
  p.N = 1, p.C = 2, p.HW = 1;
  DeviceBuffer<float> x(std::vector<float>{1.f, 2.f}), y(2), a(2), b(2);
  // One value per channel: no unbiased variance.
  EXPECT_THROW(
      gpu::batch_norm_forward_train<float>(p, x.get(), nullptr, nullptr, y.get(), a.get(), b.get(), nullptr, nullptr),
      ValueError);
  p.N = 2, p.HW = 1;
  DeviceBuffer<float> x4(std::vector<float>{1.f, 2.f, 3.f, 5.f}), y4(4);
  // Statistics come in pairs.
  EXPECT_THROW(
      gpu::batch_norm_forward_train<float>(p, x4.get(), nullptr, nullptr, y4.get(), a.get(), nullptr, nullptr, nullptr),
      ValueError);
  EXPECT_THROW(gpu::batch_norm_forward_eval<float>(p, x4.get(), nullptr, nullptr, a.get(), nullptr, y4.get()),
               ValueError);
}

}  // namespace
}  // namespace minidl

#endif  // MINIDL_CUDA_ENABLED
