// The GPU float32 matrix product (cuBLASLt with an algorithm chosen per shape, src/cuda/matmul.cu) against a
// float64 CPU reference: every transpose combination, batch 1 and 3, the example CNN's fully connected products
// (fc1: 64x9216 times 9216x128, and its two backward products; fc2's), odd sizes, TF32 off and on, unaligned
// buffers, the deterministic setting (bitwise repeatable), long-k products (split-K algorithms), the benchmark
// setting off, and a shape first seen while a CUDA graph is captured. Outputs start as NaN, so an element the
// product fails to write is caught.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "minidl/config.h"
#include "test_util.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/matmul.h"
#endif

namespace minidl {
namespace {

using testing::storage_view;

using i64 = std::int64_t;

// A product's error grows with the sum of its terms' magnitudes, not with the (cancelling) result, so each
// element may differ from the reference by sum_rtol times sum_p |a_ip| |b_pj|. Full FP32: about 34 units of
// roundoff of that sum (a wrong or missing term is an error of the order of one term, far above it). TF32 keeps
// 10 mantissa bits, so each product may be off by 2^-10 of itself; the bound is the convolution tests' kTf32.
constexpr double kFp32SumRtol = 4e-6, kTf32SumRtol = 2.5e-3;

struct Case {
  i64 batch, m, n, k;
  bool ta, tb;
};

std::string describe(const Case& c) {
  return detail::str("batch ", c.batch, ", m ", c.m, ", n ", c.n, ", k ", c.k, c.ta ? ", a transposed" : "",
                     c.tb ? ", b transposed" : "");
}

/// Random float32 operands as gpu::matmul takes them (a: batch x m x k, or batch x k x m when ta; b: batch x k x n,
/// or batch x n x k when tb) and the product computed in float64 on the CPU, with each element's magnitude sum.
struct Product {
  Case c;
  Tensor a, b;  // CPU
  std::vector<double> ref, mag;
};

Shape a_shape(const Case& c) { return c.ta ? Shape{c.batch, c.k, c.m} : Shape{c.batch, c.m, c.k}; }
Shape b_shape(const Case& c) { return c.tb ? Shape{c.batch, c.n, c.k} : Shape{c.batch, c.k, c.n}; }

void compute_reference(Product& p) {
  const Case& c = p.c;
  const std::vector<float> av = p.a.to_vector<float>(), bv = p.b.to_vector<float>();
  p.ref.assign(static_cast<std::size_t>(c.batch * c.m * c.n), 0.0);
  p.mag.assign(p.ref.size(), 0.0);
  std::vector<double> opa(static_cast<std::size_t>(c.m * c.k)), opb(static_cast<std::size_t>(c.k * c.n));
  for (i64 s = 0; s < c.batch; ++s) {
    // op(a) as m x k and op(b) as k x n, row-major, so the inner loop below runs over contiguous rows.
    for (i64 i = 0; i < c.m; ++i)
      for (i64 q = 0; q < c.k; ++q)
        opa[i * c.k + q] = av[s * c.m * c.k + (c.ta ? q * c.m + i : i * c.k + q)];
    for (i64 q = 0; q < c.k; ++q)
      for (i64 j = 0; j < c.n; ++j)
        opb[q * c.n + j] = bv[s * c.k * c.n + (c.tb ? j * c.k + q : q * c.n + j)];
    double* ref = p.ref.data() + s * c.m * c.n;
    double* mag = p.mag.data() + s * c.m * c.n;
    for (i64 i = 0; i < c.m; ++i) {
      for (i64 q = 0; q < c.k; ++q) {
        const double x = opa[i * c.k + q];
        const double* row = opb.data() + q * c.n;
        for (i64 j = 0; j < c.n; ++j) {
          ref[i * c.n + j] += x * row[j];
          mag[i * c.n + j] += std::fabs(x * row[j]);
        }
      }
    }
  }
}

Product make_product(const Case& c) {
  Product p{c, testing::random_tensor(a_shape(c), kFloat32), testing::random_tensor(b_shape(c), kFloat32), {}, {}};
  compute_reference(p);
  return p;
}

Tensor nan_output(const Case& c) {
  return full({c.batch, c.m, c.n}, std::numeric_limits<double>::quiet_NaN(),
              TensorOptions(kFloat32).device(Device(kCUDA)));
}

/// gpu::matmul of device operands into a fresh NaN-filled output; returns the output.
Tensor run_gpu(const Case& c, const Tensor& a, const Tensor& b) {
  Tensor out = nan_output(c);
  MINIDL_ON_BACKEND(out.device(), matmul(a, b, out, c.batch, c.m, c.n, c.k, c.ta, c.tb));
  return out;
}

void expect_matches(const Tensor& out, const Product& p, double sum_rtol, const std::string& what) {
  const std::vector<float> got = out.cpu().to_vector<float>();
  ASSERT_EQ(got.size(), p.ref.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = sum_rtol * p.mag[i];
    if (!(std::fabs(got[i] - p.ref[i]) <= tol)) {  // NaN fails too
      if (bad < 5) {
        ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << p.ref[i] << " (tolerance "
                      << tol << ")";
      }
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ";
}

/// Restores the numeric settings a test changes.
struct SettingsGuard {
  bool tf32_conv = cuda::allow_tf32_conv(), tf32_matmul = cuda::allow_tf32_matmul();
  bool det = deterministic(), benchmark = cuda::cudnn_benchmark();
  ~SettingsGuard() {
    cuda::set_allow_tf32(tf32_conv, tf32_matmul);
    set_deterministic(det);
    cuda::set_cudnn_benchmark(benchmark);
  }
};

void set_tf32_matmul(bool on) { cuda::set_allow_tf32(cuda::allow_tf32_conv(), on); }

/// Every transpose combination of (m, n, k) at batch 1 and 3.
void add_all_layouts(std::vector<Case>& cases, i64 m, i64 n, i64 k) {
  for (const i64 batch : {1, 3}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) cases.push_back({batch, m, n, k, ta, tb});
    }
  }
}

// The example CNN's fully connected layers at batch 64: fc1 (9216 -> 128) forward x·W^T, input gradient g·W,
// weight gradient g^T·x; fc2 (128 -> 10) likewise.
const Case kFc1Forward{1, 64, 128, 9216, false, true}, kFc1Input{1, 64, 9216, 128, false, false},
    kFc1Weight{1, 128, 9216, 64, true, false};

void check_cases(const std::vector<Case>& cases) {
  SettingsGuard settings;
  for (const Case& c : cases) {
    const Product p = make_product(c);
    const Tensor a = p.a.cuda(), b = p.b.cuda();
    for (const bool tf32 : {false, true}) {
      set_tf32_matmul(tf32);
      const std::string what = describe(c) + (tf32 ? ", TF32" : ", full FP32");
      expect_matches(run_gpu(c, a, b), p, tf32 ? kTf32SumRtol : kFp32SumRtol, what);
      // The second call runs on the cached plan.
      expect_matches(run_gpu(c, a, b), p, tf32 ? kTf32SumRtol : kFp32SumRtol, what + ", cached plan");
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(MatmulGpu, FullyConnectedShapesMatchReference) {
  MINIDL_REQUIRE_GPU();
  std::vector<Case> cases;
  for (const Case& c : {kFc1Forward, kFc1Input, kFc1Weight}) add_all_layouts(cases, c.m, c.n, c.k);
  add_all_layouts(cases, 64, 10, 128);  // fc2 forward
  add_all_layouts(cases, 64, 128, 10);  // fc2 input gradient
  add_all_layouts(cases, 10, 128, 64);  // fc2 weight gradient
  check_cases(cases);
#if MINIDL_CUDA_ENABLED
  // What the search chose for fc1's products, for the record (timed unless MINIDL_CUDNN_BENCHMARK=0).
  for (const std::string& line : gpu::matmul_algorithm_choices()) {
    if (line.find("9216") != std::string::npos && line.find("matmul batch 1,") == 0) std::cout << line << "\n";
  }
#endif
}

TEST(MatmulGpu, OddSizesMatchReference) {
  MINIDL_REQUIRE_GPU();
  std::vector<Case> cases;
  for (const i64 m : {1, 7, 33, 129}) {
    for (const i64 n : {1, 7, 33, 129}) {
      for (const i64 k : {1, 7, 33, 129}) add_all_layouts(cases, m, n, k);
    }
  }
  add_all_layouts(cases, 3, 5, 0);  // an empty sum: zeros
  check_cases(cases);
}

/// A float32 tensor on the GPU whose data starts `offset_bytes` into its storage, as a data loader's batch view
/// or a gradient bucket's slice may.
Tensor offset_view(const Shape& shape, std::size_t offset_bytes) {
  const Tensor base = empty({shape_numel(shape) + 4}, TensorOptions(kFloat32).device(Device(kCUDA)));
  return storage_view(base, static_cast<std::int64_t>(offset_bytes / sizeof(float)), shape);
}

TEST(MatmulGpu, UnalignedBuffersMatchReference) {
  MINIDL_REQUIRE_GPU();
  SettingsGuard settings;
  set_tf32_matmul(false);
  for (const Case& c : {Case{1, 64, 128, 256, false, true}, Case{3, 33, 64, 96, true, false}}) {
    const Product p = make_product(c);
    for (const std::size_t offset : {4, 8, 12}) {
      const std::string what = describe(c) + detail::str(", buffers offset by ", offset, " bytes");
      Tensor a = offset_view(a_shape(c), offset), b = offset_view(b_shape(c), 16 - offset % 16);
      a.copy_(p.a);
      b.copy_(p.b);
      Tensor out = offset_view({c.batch, c.m, c.n}, offset);
      out.fill_(std::numeric_limits<double>::quiet_NaN());
      MINIDL_ON_BACKEND(out.device(), matmul(a, b, out, c.batch, c.m, c.n, c.k, c.ta, c.tb));
      expect_matches(out, p, kFp32SumRtol, what);
    }
  }
}

/// Product c with TF32 off and on (other settings as the caller set them): every element against the float64
/// reference, and a second run on the cached plan bitwise the same as the first.
void expect_correct_and_repeatable(const Case& c) {
  const Product p = make_product(c);
  const Tensor a = p.a.cuda(), b = p.b.cuda();
  for (const bool tf32 : {false, true}) {
    set_tf32_matmul(tf32);
    const std::string what = describe(c) + (tf32 ? ", TF32" : ", full FP32");
    const Tensor first = run_gpu(c, a, b), second = run_gpu(c, a, b);
    expect_matches(first, p, tf32 ? kTf32SumRtol : kFp32SumRtol, what);
    const std::vector<float> x = first.cpu().to_vector<float>(), y = second.cpu().to_vector<float>();
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << what << ": the runs differ";
  }
}

TEST(MatmulGpu, DeterministicRunsAreBitwiseIdentical) {
  MINIDL_REQUIRE_GPU();
  SettingsGuard settings;
  set_deterministic(true);
  // Fresh shapes (so the plans are chosen with the setting on) and fc1's (k = 9216 invites split-K algorithms).
  for (const Case& c : {kFc1Forward, kFc1Input, kFc1Weight, Case{3, 50, 70, 4000, false, true}}) {
    expect_correct_and_repeatable(c);
  }
}

#if MINIDL_CUDA_ENABLED
/// The choice line of a shape, or "" (shapes are written as describe() in matmul.cu writes them).
std::string choice_line(const std::string& shape_prefix) {
  for (const std::string& line : gpu::matmul_algorithm_choices()) {
    if (line.rfind(shape_prefix, 0) == 0) return line;
  }
  return "";
}
#endif

// Long-k products with small outputs, where cuBLASLt's algorithms split k in up to 64 parts (fc1 at batch 256:
// forward 256x9216 times 9216x128 and its backward products; a batched one of odd sizes), chosen by timing (the
// benchmark setting on): whichever candidate wins must give every element, and the same bits on the cached
// plan's second run (cuBLAS reproduces its results run to run, so the deterministic setting only stops the timing).
TEST(MatmulGpu, LongKProductsMatchReferenceAndRepeat) {
  MINIDL_REQUIRE_GPU();
  SettingsGuard settings;
  cuda::set_cudnn_benchmark(true);
  set_deterministic(false);
  for (const Case& c : {Case{1, 256, 128, 9216, false, true}, Case{1, 256, 9216, 128, false, false},
                        Case{1, 128, 9216, 256, true, false}, Case{2, 19, 45, 6001, true, false}}) {
    expect_correct_and_repeatable(c);
#if MINIDL_CUDA_ENABLED
    // The search ran (timed, so not "chosen untimed"); its choices are printed for the record.
    const std::string shape = detail::str("matmul batch ", c.batch, ", ", c.m, "x", c.k, c.ta ? " (a transposed)" : "",
                                          " times ", c.k, "x", c.n, c.tb ? " (b transposed)" : "", ", float32");
    for (const std::string& line : gpu::matmul_algorithm_choices()) {
      const bool untimed_plan = line.find("untimed (benchmark off or deterministic)") != std::string::npos;
      if (line.rfind(shape, 0) != 0 || untimed_plan) continue;
      std::cout << line << "\n";
      EXPECT_EQ(line.find("chosen untimed"), std::string::npos) << line;
    }
#endif
  }
}

/// Runs the product `c` (a shape no other test uses), checks every element, and expects its plan (the choice line
/// starting with `shape_prefix`) to have been chosen untimed.
void expect_untimed_choice(const Case& c, const std::string& shape_prefix) {
  const Product p = make_product(c);
  expect_matches(run_gpu(c, p.a.cuda(), p.b.cuda()), p, kFp32SumRtol, describe(c));
#if MINIDL_CUDA_ENABLED
  const std::string line = choice_line(shape_prefix);
  EXPECT_NE(line.find("chosen untimed"), std::string::npos) << line;
  EXPECT_NE(line.find("untimed (benchmark off or deterministic)"), std::string::npos) << line;
#else
  (void)shape_prefix;
#endif
}

// The deterministic setting chooses untimed even with the benchmark setting on: a timed choice follows the GPU's
// speed of the moment, and two runs that chose differently would sum differently.
TEST(MatmulGpu, DeterministicChoosesUntimed) {
  MINIDL_REQUIRE_GPU();
  SettingsGuard settings;
  cuda::set_cudnn_benchmark(true);
  set_deterministic(true);
  set_tf32_matmul(false);
  expect_untimed_choice({3, 37, 29, 611, false, true}, "matmul batch 3, 37x611 times 611x29 (b transposed)");
}

TEST(MatmulGpu, BenchmarkOffTakesTheHeuristicsFirstChoice) {
  MINIDL_REQUIRE_GPU();
  SettingsGuard settings;
  cuda::set_cudnn_benchmark(false);
  set_tf32_matmul(false);
  expect_untimed_choice({2, 41, 23, 517, true, true},
                        "matmul batch 2, 41x517 (a transposed) times 517x23 (b transposed)");
}

// A shape first seen while the stream is captured cannot be timed (timing synchronises); it must take the
// heuristic's first algorithm, record a product that replays correctly, and keep that plan for eager calls.
TEST(MatmulGpu, ShapeFirstSeenDuringGraphCapture) {
  MINIDL_REQUIRE_GPU();
  SettingsGuard settings;
  for (const bool tf32 : {false, true}) {
    SCOPED_TRACE(tf32 ? "TF32" : "full FP32");
    set_tf32_matmul(tf32);
    // Shapes no other test uses, so no plan for them is cached yet.
    const Case c{2, 45, tf32 ? 78 : 77, 301, tf32, !tf32};
    Product p = make_product(c);
    Tensor a = p.a.cuda();
    const Tensor b = p.b.cuda();
    // An eager product first, as the eager step before a capture would run, creates the cuBLASLt handle.
    (void)run_gpu({1, 2, 3, 4, false, false}, testing::random_tensor({1, 2, 4}, kFloat32).cuda(),
                  testing::random_tensor({1, 4, 3}, kFloat32).cuda());
    Tensor out = nan_output(c);
    cuda::CUDAGraph graph;
    graph.capture_begin();
    try {
      MINIDL_ON_BACKEND(out.device(), matmul(a, b, out, c.batch, c.m, c.n, c.k, c.ta, c.tb));
    } catch (const std::exception& e) {
      try {
        graph.capture_end();
      } catch (const std::exception&) {
        // the capture is abandoned either way
      }
      FAIL() << "matmul during capture threw: " << e.what();
    }
    graph.capture_end();
    graph.replay();
    const double tol = tf32 ? kTf32SumRtol : kFp32SumRtol;
    expect_matches(out, p, tol, describe(c) + ", first replay");
    // The replay reads the operands' memory: new values give the new product.
    p.a = testing::random_tensor(a_shape(c), kFloat32);
    compute_reference(p);
    a.copy_(p.a);
    out.fill_(std::numeric_limits<double>::quiet_NaN());
    graph.replay();
    expect_matches(out, p, tol, describe(c) + ", replay with new inputs");
    // Eager calls reuse the plan chosen during capture.
    expect_matches(run_gpu(c, a, b), p, tol, describe(c) + ", eager");
#if MINIDL_CUDA_ENABLED
    const std::string line =
        choice_line(detail::str("matmul batch 2, 45x301", tf32 ? " (a transposed)" : "", " times 301x", c.n,
                                tf32 ? "" : " (b transposed)", ", float32", tf32 ? ", TF32 allowed" : ""));
    EXPECT_NE(line.find("chosen untimed"), std::string::npos) << line;
#endif
  }
}

}  // namespace
}  // namespace minidl
