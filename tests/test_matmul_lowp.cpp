// The matmul family in bfloat16 and float16 (float32 accumulation, the result rounded once): matmul, mm, bmm, mv,
// dot, outer, addmm, baddbmm, addmv, linear and linear_relu, forward and backward, on the CPU (the own GEMM on
// widened operands) and the GPU (cuBLASLt, with linear's bias and bias gradient in the GEMM's epilogues),
// against a float64 reference computed from the same rounded inputs; transposed, sliced and broadcast operands;
// empty products; a small chain's gradients; CPU against GPU; mixed dtypes; scaled_dot_product_attention's composed
// path; and PyTorch's values (tests/golden/linalg_golden.json, key "lowp_products").
//
// Tolerance, per element: atol + rtol |expected| + (rounds u + 4 k 2^-24) M, where rtol and atol are PyTorch's
// OpInfo values for the dtype (bfloat16 1.6e-2, float16 1e-3; atol 1e-5); u is the dtype's unit roundoff (2^-8,
// 2^-11); k the longest reduction of the case; M the same computation on the inputs' magnitudes (|a|, |b|, |alpha|,
// |beta|, and |g| for the gradients), which bounds every intermediate value. The k term is float32's accumulation
// error over k terms (twice the textbook k 2^-24, for the tensor cores' order); `rounds` counts intermediate
// results rounded to the 16-bit dtype before the last (0 for a plain product, which rounds once; 2 for addmm and
// friends, whose product and scaled product are rounded before the sum, and for gradients summed over a broadcast
// batch). A wrong or missing term is off by about M / k, well above the bound at the sizes used.
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "linalg_golden.h"
#include "minidl/config.h"
#include "test_util.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/matmul.h"
#endif

namespace minidl {
namespace {

namespace F = nn::functional;
using i64 = std::int64_t;

const DType kLowp[] = {kBFloat16, kFloat16};
constexpr double kAtol = 1e-5;

double rtol_of(DType dt) { return dt == kBFloat16 ? 1.6e-2 : 1e-3; }
double unit_of(DType dt) { return dt == kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11); }

/// Disables TF32 for the scope (the float32 products compared against float64).
class NoTf32 {
 public:
  NoTf32() : conv_(cuda::allow_tf32_conv()), matmul_(cuda::allow_tf32_matmul()) { cuda::set_allow_tf32(false, false); }
  ~NoTf32() { cuda::set_allow_tf32(conv_, matmul_); }

 private:
  bool conv_, matmul_;
};

/// An op of the family on its leaves (views taken inside); `magnitude` replaces alpha and beta by their absolute
/// values, so that the op on the inputs' magnitudes bounds every intermediate value.
using Op = std::function<Tensor(const std::vector<Tensor>&, bool magnitude)>;

/// Expects every element of `actual` (a 16-bit result) within the tolerance above of `expected`.
void expect_lowp_close(const Tensor& actual, const Tensor& expected, const Tensor& magnitude, DType dt, i64 k,
                       int rounds, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const std::vector<double> a = actual.detach().cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> e = expected.detach().to(kFloat64).to_vector<double>();
  const std::vector<double> m = magnitude.detach().to(kFloat64).to_vector<double>();
  const double sum_rtol = rounds * unit_of(dt) + 4.0 * static_cast<double>(k) * std::ldexp(1.0, -24);
  int failures = 0;
  for (std::size_t i = 0; i < a.size() && failures < 10; ++i) {
    const double tol = kAtol + rtol_of(dt) * std::fabs(e[i]) + sum_rtol * m[i];
    if (!(std::fabs(a[i] - e[i]) <= tol)) {
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i] << " (tolerance " << tol
                    << ")";
      ++failures;
    }
  }
}

/// After a GPU test's first failure, the cuBLASLt algorithms chosen so far (the failing product's among them): a
/// wrong result of one algorithm shows as its tile, split-K and reduction scheme in the log.
void report_algorithms_on_failure() {
#if MINIDL_CUDA_ENABLED
  static bool reported = false;
  if (reported || !::testing::Test::HasFailure()) return;
  reported = true;
  for (const std::string& line : gpu::matmul_algorithm_choices()) std::cout << "  " << line << "\n";
#endif
}

/// Random values of dtype dt on the CPU (rounded to it: the reference takes these very values).
Tensor rnd(const Shape& s, DType dt) { return testing::random_tensor(s, kFloat32).to(dt); }

/// Runs `op` on `inputs` (16-bit, CPU) moved to `device`, and its backward from a random gradient; compares the
/// output and every input's gradient (dtype, device, values) with float64 on the CPU from the same values.
/// Returns the 16-bit output and gradients (on the CPU) for device comparisons. `normwise`: M is the largest
/// |reference| of each tensor instead (for ops that are not multilinear, whose magnitude run bounds nothing).
std::vector<Tensor> check_op(const std::string& what, const Op& op, const std::vector<Tensor>& inputs, Device device,
                             i64 k, int rounds, int grad_rounds = 2, const Tensor& grad_in = Tensor(),
                             bool normwise = false) {
  const DType dt = inputs.at(0).dtype();
  const std::string name = what + " " + dtype_name(dt) + " on " + detail::str(device);
  std::vector<Tensor> leaves, ref_leaves, mag_leaves;
  for (const Tensor& t : inputs) {
    leaves.push_back(t.to(device).detach().requires_grad_(true));
    ref_leaves.push_back(t.to(kFloat64).detach().requires_grad_(true));
    mag_leaves.push_back(t.to(kFloat64).abs().detach().requires_grad_(true));
  }
  const Tensor out = op(leaves, false);
  EXPECT_EQ(out.dtype(), dt) << name;
  EXPECT_EQ(out.device(), device) << name;
  const Tensor ref = op(ref_leaves, false), mag = op(mag_leaves, true);
  const auto bound = [&](const Tensor& reference, const Tensor& magnitude) {
    return normwise ? full_like(reference, reference.numel() ? reference.abs().max().item<double>() : 0.0) : magnitude;
  };
  expect_lowp_close(out, ref, bound(ref, mag), dt, k, rounds, name + " output");
  const Tensor g = grad_in.defined() ? grad_in : rnd(out.sizes(), dt);
  out.backward(g.to(device));
  ref.backward(g.to(kFloat64));
  mag.backward(g.to(kFloat64).abs());
  std::vector<Tensor> results{out.detach().cpu()};
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const Tensor grad = leaves[i].grad().defined() ? leaves[i].grad() : zeros_like(leaves[i]);
    EXPECT_EQ(grad.dtype(), dt) << name << " grad " << i;
    expect_lowp_close(grad, ref_leaves[i].grad(), bound(ref_leaves[i].grad(), mag_leaves[i].grad()), dt, k,
                      grad_rounds,
                      name + " grad " + std::to_string(i));
    results.push_back(grad.detach().cpu());
  }
  if (device.is_cuda()) report_algorithms_on_failure();
  return results;
}

/// Scalars of the add* ops, and the form the magnitude run takes.
double sc(double v, bool magnitude) { return magnitude ? std::fabs(v) : v; }

/// One case of the family: its op, the inputs' shapes, its longest reduction and its intermediate roundings.
struct Case {
  std::string name;
  std::vector<Shape> shapes;
  Op op;
  i64 k;
  int rounds;
};

std::vector<Case> family_cases() {
  const auto t = [](const Tensor& x) { return x.transpose(-2, -1); };
  return {
      {"matmul 2-d", {{5, 7}, {7, 6}}, [](auto& x, bool) { return matmul(x[0], x[1]); }, 7, 0},
      {"matmul 1-d @ 1-d", {{9}, {9}}, [](auto& x, bool) { return matmul(x[0], x[1]); }, 9, 0},
      {"matmul 1-d @ 3-d", {{4}, {2, 4, 3}}, [](auto& x, bool) { return matmul(x[0], x[1]); }, 4, 0},
      {"matmul 3-d @ 1-d", {{2, 3, 4}, {4}}, [](auto& x, bool) { return matmul(x[0], x[1]); }, 4, 0},
      {"matmul batch @ 2-d", {{3, 5, 8}, {8, 4}}, [](auto& x, bool) { return matmul(x[0], x[1]); }, 15, 0},
      {"matmul broadcast batch", {{2, 1, 3, 4}, {5, 4, 2}}, [](auto& x, bool) { return matmul(x[0], x[1]); }, 10, 0},
      {"mm", {{6, 33}, {33, 17}}, [](auto& x, bool) { return mm(x[0], x[1]); }, 33, 0},
      {"mm transposed", {{33, 6}, {17, 33}}, [t](auto& x, bool) { return mm(t(x[0]), t(x[1])); }, 33, 0},
      {"bmm", {{3, 4, 9}, {3, 9, 5}}, [](auto& x, bool) { return bmm(x[0], x[1]); }, 9, 0},
      {"mv", {{7, 12}, {12}}, [](auto& x, bool) { return mv(x[0], x[1]); }, 12, 0},
      {"dot", {{40}, {40}}, [](auto& x, bool) { return dot(x[0], x[1]); }, 40, 0},
      {"outer", {{5}, {6}}, [](auto& x, bool) { return outer(x[0], x[1]); }, 1, 0},
      {"addmm", {{3}, {2, 9}, {9, 3}},
       [](auto& x, bool m) { return addmm(x[0], x[1], x[2], sc(0.5, m), sc(-2.0, m)); }, 9, 2},
      {"addmm beta 1 alpha 1", {{2, 3}, {2, 9}, {9, 3}}, [](auto& x, bool) { return addmm(x[0], x[1], x[2]); }, 9, 2},
      {"baddbmm", {{1, 3, 1}, {2, 3, 8}, {2, 8, 2}},
       [](auto& x, bool m) { return baddbmm(x[0], x[1], x[2], sc(-1.5, m), sc(0.25, m)); }, 8, 2},
      {"addmv", {{1}, {3, 10}, {10}}, [](auto& x, bool m) { return addmv(x[0], x[1], x[2], sc(2.0, m), sc(-1.0, m)); },
       10, 2},
      {"linear", {{4, 3, 10}, {6, 10}, {6}}, [](auto& x, bool) { return F::linear(x[0], x[1], x[2]); }, 12, 2},
      {"linear without bias", {{5, 10}, {6, 10}}, [](auto& x, bool) { return F::linear(x[0], x[1]); }, 10, 0},
      {"linear_relu", {{12, 10}, {6, 10}, {6}}, [](auto& x, bool) { return F::linear_relu(x[0], x[1], x[2]); }, 12, 2},
  };
}

std::vector<Tensor> inputs_of(const Case& c, DType dt) {
  std::vector<Tensor> in;
  for (const Shape& s : c.shapes) in.push_back(rnd(s, dt));
  return in;
}

// ---- CPU --------------------------------------------------------------------------------------------------------

TEST(MatmulLowp, EveryOpAndItsGradientsMatchFloat64) {
  for (DType dt : kLowp) {
    for (const Case& c : family_cases()) check_op(c.name, c.op, inputs_of(c, dt), Device(kCPU), c.k, c.rounds);
  }
}

TEST(MatmulLowp, LongReductionsAccumulateInFloat32) {
  // k = 4096 over a 32 x 32 result takes the CPU GEMM's split-k path, k = 700 its k blocks; a 16-bit accumulator
  // would be off by far more than the bound (its roundoff grows with the partial sums).
  for (DType dt : kLowp) {
    for (const auto& [m, n, k] : {std::array<i64, 3>{32, 32, 4096}, std::array<i64, 3>{40, 70, 700}}) {
      const Op op = [](auto& x, bool) { return mm(x[0], x[1]); };
      check_op(detail::str("mm ", m, "x", k, " @ ", k, "x", n), op, {rnd({m, k}, dt), rnd({k, n}, dt)}, Device(kCPU),
               k, 0);
    }
  }
}

TEST(MatmulLowp, NonContiguousOperands) {
  for (DType dt : kLowp) {
    const Device cpu(kCPU);
    // Transposed views, both sides.
    check_op("transposed", [](auto& x, bool) { return matmul(x[0].t(), x[1].t()); }, {rnd({9, 5}, dt), rnd({4, 9}, dt)},
             cpu, 9, 0);
    // Sliced: a narrow of the last dim (rows farther apart than their length) and a step along the first.
    check_op(
        "sliced", [](auto& x, bool) { return matmul(x[0].narrow(1, 2, 7), x[1].slice(0, 0, 14, 2)); },
        {rnd({5, 12}, dt), rnd({14, 6}, dt)}, cpu, 7, 0);
    // A broadcast (expanded) batch and a batch transposed with the rows.
    check_op(
        "expanded batch", [](auto& x, bool) { return matmul(x[0].expand({3, 4, 6}), x[1]); },
        {rnd({1, 4, 6}, dt), rnd({3, 6, 5}, dt)}, cpu, 12, 0);
    check_op(
        "permuted batch", [](auto& x, bool) { return bmm(x[0].transpose(0, 1), x[1].permute({2, 0, 1})); },
        {rnd({4, 3, 8}, dt), rnd({8, 5, 3}, dt)}, cpu, 8, 0);
    // A bias that is a strided view, and an input whose rows are transposed.
    check_op(
        "linear of views", [](auto& x, bool) { return F::linear(x[0].t(), x[1], x[2].slice(0, 0, 12, 2)); },
        {rnd({10, 5}, dt), rnd({6, 10}, dt), rnd({12}, dt)}, cpu, 10, 2);
  }
}

TEST(MatmulLowp, EmptyProducts) {
  for (DType dt : kLowp) {
    for (const Device device : {Device(kCPU), Device(kCUDA)}) {
      if (device.is_cuda() && !testing::gpu_available()) continue;
      const TensorOptions o = TensorOptions(dt).device(device);
      // k = 0: an empty sum is zero; the gradients are empty.
      const Tensor a = empty({3, 0}, o).requires_grad_(true), b = empty({0, 4}, o).requires_grad_(true);
      const Tensor z = mm(a, b);
      EXPECT_EQ(z.sizes(), (Shape{3, 4}));
      EXPECT_EQ(z.dtype(), dt);
      EXPECT_TRUE(equal(z.cpu(), zeros({3, 4}, TensorOptions(dt))));
      z.backward(ones({3, 4}, o));
      EXPECT_EQ(a.grad().sizes(), (Shape{3, 0}));
      EXPECT_EQ(b.grad().dtype(), dt);
      EXPECT_TRUE(equal(addmm(ones({3, 4}, o), a, b, 2.0).cpu(), full({3, 4}, 2.0, TensorOptions(dt))));
      EXPECT_TRUE(equal(F::linear(empty({5, 0}, o), empty({2, 0}, o), ones({2}, o)).cpu(),
                        ones({5, 2}, TensorOptions(dt))));
      EXPECT_TRUE(equal(dot(empty({0}, o), empty({0}, o)).cpu(), zeros({}, TensorOptions(dt))));
      // m = 0 and an empty batch: empty results of the right shape.
      EXPECT_EQ(mm(empty({0, 5}, o), rnd({5, 3}, dt).to(device)).sizes(), (Shape{0, 3}));
      EXPECT_EQ(bmm(empty({0, 2, 5}, o), empty({0, 5, 3}, o)).sizes(), (Shape{0, 2, 3}));
      const Tensor x = empty({0, 4}, o).requires_grad_(true), w = rnd({3, 4}, dt).to(device).requires_grad_(true);
      const Tensor bias = rnd({3}, dt).to(device).requires_grad_(true);
      const Tensor y = F::linear(x, w, bias);
      EXPECT_EQ(y.sizes(), (Shape{0, 3}));
      y.sum().backward();
      EXPECT_TRUE(equal(w.grad().cpu(), zeros({3, 4}, TensorOptions(dt))));
      EXPECT_TRUE(equal(bias.grad().cpu(), zeros({3}, TensorOptions(dt))));
    }
  }
}

/// linear -> linear_relu -> matmul -> sum with a weighting: the gradients of every parameter and the input.
const Op kChain = [](const std::vector<Tensor>& x, bool) {
  const Tensor h = F::linear_relu(F::linear(x[0], x[1], x[2]), x[3], x[4]);
  return matmul(h, x[5]);
};

std::vector<Tensor> chain_inputs(DType dt) {
  return {rnd({4, 6, 16}, dt), rnd({24, 16}, dt), rnd({24}, dt), rnd({12, 24}, dt), rnd({12}, dt), rnd({12, 5}, dt)};
}

TEST(MatmulLowp, ChainGradientsMatchFloat64) {
  // Three products deep, each rounding its result and its gradients: the bound allows a rounding per level.
  for (DType dt : kLowp) check_op("chain", kChain, chain_inputs(dt), Device(kCPU), 24, 6, 8);
}

TEST(MatmulLowp, LinearModulesConvertedTo16Bit) {
  for (DType dt : kLowp) {
    nn::Linear lin(10, 6);
    nn::LinearReLU lin_relu(nn::LinearOptions(10, 6));
    lin->to(dt);
    lin_relu->to(dt);
    const Tensor x = rnd({4, 10}, dt);
    for (const Tensor& y : {lin->forward(x), lin_relu->forward(x)}) {
      EXPECT_EQ(y.dtype(), dt);
      y.sum().backward();
    }
    for (const Tensor& p : lin->parameters()) EXPECT_EQ(p.grad().dtype(), dt);
    // LinearReLU is Linear then ReLU, bitwise.
    const Tensor a = F::linear_relu(x, lin->weight, lin->bias), b = relu(F::linear(x, lin->weight, lin->bias));
    EXPECT_TRUE(equal(a, b));
  }
}

TEST(MatmulLowp, MixedDtypesAreTypeErrors) {
  const Tensor a16 = rnd({2, 3}, kBFloat16), b32 = rnd({3, 4}, kFloat32), v32 = rnd({3}, kFloat32);
  EXPECT_ERROR(TypeError, matmul(a16, b32), "matmul", "bfloat16", "float32");
  EXPECT_ERROR(TypeError, mm(a16, b32), "mm", "bfloat16", "float32");
  EXPECT_ERROR(TypeError, bmm(a16.unsqueeze(0), b32.unsqueeze(0)), "bmm", "bfloat16", "float32");
  EXPECT_ERROR(TypeError, mv(a16, v32), "mv", "bfloat16", "float32");
  EXPECT_ERROR(TypeError, dot(v32, rnd({3}, kFloat16)), "dot", "float32", "float16");
  EXPECT_ERROR(TypeError, addmm(rnd({4}, kFloat32), a16, rnd({3, 4}, kBFloat16)), "addmm", "float32", "bfloat16");
  EXPECT_ERROR(TypeError, F::linear(a16, b32.t()), "linear", "bfloat16", "float32");
  EXPECT_ERROR(TypeError, F::linear(a16, rnd({4, 3}, kBFloat16), rnd({4}, kFloat32)), "linear", "bfloat16",
               "float32");
  EXPECT_ERROR(TypeError, matmul(rnd({2, 3}, kFloat16), rnd({3, 2}, kBFloat16)), "matmul", "float16", "bfloat16");
}

// ---- scaled_dot_product_attention (the composed path: the flash kernels take float32 only) ------------------------

/// Whether softmax takes this dtype in this build (its 16-bit kernels are another branch's work).
bool softmax_takes(DType dt) {
  try {
    (void)softmax(zeros({1, 2}, TensorOptions(dt)), -1);
    return true;
  } catch (const TypeError&) {
    return false;
  }
}

void check_attention(DType dt, Device device) {
  const Op op = [](auto& x, bool) { return F::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true); };
  // softmax is not multilinear: the bound is norm-wise, with a rounding per stage (scores, weights, product).
  check_op("scaled_dot_product_attention", op, {rnd({2, 3, 10, 8}, dt), rnd({2, 3, 12, 8}, dt), rnd({2, 3, 12, 8}, dt)},
           device, 12, 4, 8, Tensor(), true);
}

TEST(MatmulLowp, AttentionComposedPath) {
  for (DType dt : kLowp) {
    if (!softmax_takes(dt)) GTEST_SKIP() << "softmax does not take " << dtype_name(dt) << " in this build yet";
    check_attention(dt, Device(kCPU));
  }
}

// ---- GPU --------------------------------------------------------------------------------------------------------

/// Expects a and b (16-bit results of two devices, each within the bound of the float64 value) to agree within
/// twice the dtype's rtol: each rounds its float32 sum once, and the sums may differ in order.
void expect_devices_agree(const std::vector<Tensor>& cpu, const std::vector<Tensor>& gpu, DType dt,
                          const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    testing::expect_close(gpu[i], cpu[i], 2 * rtol_of(dt), 4 * kAtol + 4 * unit_of(dt),
                          what + (i == 0 ? " output" : " grad " + std::to_string(i - 1)));
  }
}

TEST(MatmulLowpGpu, EveryOpMatchesFloat64AndTheCpu) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  for (DType dt : kLowp) {
    for (const Case& c : family_cases()) {
      const std::vector<Tensor> in = inputs_of(c, dt);
      const std::vector<Tensor> on_cpu = check_op(c.name, c.op, in, Device(kCPU), c.k, c.rounds);
      const std::vector<Tensor> on_gpu = check_op(c.name, c.op, in, Device(kCUDA), c.k, c.rounds);
      expect_devices_agree(on_cpu, on_gpu, dt, c.name + " " + dtype_name(dt));
    }
  }
}

TEST(MatmulLowpGpu, NonContiguousLongAndChained) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  const Device gpu(kCUDA);
  for (DType dt : kLowp) {
    check_op("transposed", [](auto& x, bool) { return matmul(x[0].t(), x[1].t()); }, {rnd({9, 5}, dt), rnd({4, 9}, dt)},
             gpu, 9, 0);
    check_op(
        "sliced", [](auto& x, bool) { return matmul(x[0].narrow(1, 2, 7), x[1].slice(0, 0, 14, 2)); },
        {rnd({5, 12}, dt), rnd({14, 6}, dt)}, gpu, 7, 0);
    check_op(
        "expanded batch", [](auto& x, bool) { return matmul(x[0].expand({3, 4, 6}), x[1]); },
        {rnd({1, 4, 6}, dt), rnd({3, 6, 5}, dt)}, gpu, 12, 0);
    check_op(
        "permuted batch", [](auto& x, bool) { return bmm(x[0].transpose(0, 1), x[1].permute({2, 0, 1})); },
        {rnd({4, 3, 8}, dt), rnd({8, 5, 3}, dt)}, gpu, 8, 0);
    // Split-K candidates: their parts must be added in float32 (OUTPUT_TYPE reduction excluded).
    check_op("mm long k", [](auto& x, bool) { return mm(x[0], x[1]); }, {rnd({32, 4096}, dt), rnd({4096, 32}, dt)},
             gpu, 4096, 0);
    const std::vector<Tensor> in = chain_inputs(dt);
    expect_devices_agree(check_op("chain", kChain, in, Device(kCPU), 24, 6, 8),
                         check_op("chain", kChain, in, gpu, 24, 6, 8), dt, "chain");
  }
}

TEST(MatmulLowpGpu, LinearEpiloguesInEveryDtype) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  const NoTf32 no_tf32;
  const Device gpu(kCUDA);
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    for (const bool relu : {false, true}) {
      const Op op = [relu](auto& x, bool) {
        return relu ? F::linear_relu(x[0], x[1], x[2]) : F::linear(x[0], x[1], x[2]);
      };
      // Bias in the forward GEMM, bias gradient in the weight-gradient GEMM; sizes that are not multiples of 8.
      const std::vector<Tensor> in = {rnd({37, 50}, dt), rnd({21, 50}, dt), rnd({21}, dt)};
      if (dt == kFloat32) {
        // float32 (TF32 off) against float64: the linalg tests' full-FP32 bound.
        std::vector<Tensor> leaves;
        for (const Tensor& t : in) leaves.push_back(t.to(gpu).requires_grad_(true));
        const Tensor y = op(leaves, false);
        std::vector<Tensor> ref;
        for (const Tensor& t : in) ref.push_back(t.to(kFloat64).requires_grad_(true));
        const Tensor yr = op(ref, false);
        testing::expect_close(y, yr, 1e-5, 1e-5, "float32 linear forward");
        const Tensor g = rnd(y.sizes(), kFloat32);
        y.backward(g.to(gpu));
        yr.backward(g.to(kFloat64));
        for (std::size_t i = 0; i < 3; ++i) {
          testing::expect_close(leaves[i].grad(), ref[i].grad(), 1e-5, 1e-5, "float32 linear grad " + std::to_string(i));
        }
        continue;
      }
      expect_devices_agree(check_op("linear epilogue", op, in, Device(kCPU), 50, 2),
                           check_op("linear epilogue", op, in, gpu, 50, 2), dt, "linear epilogue");
      // A bias that starts mid-allocation (not 16-byte aligned): the composed path, the same values.
      const Tensor base = rnd({22}, dt);
      const std::vector<Tensor> shifted = {in[0], in[1], testing::storage_view(base, 1, {21})};
      check_op("linear, unaligned bias", op, shifted, gpu, 50, 2);
    }
  }
#if MINIDL_CUDA_ENABLED
  // The 16-bit bias epilogues are ones cuBLASLt fuses: their plans hold an algorithm.
  int fused = 0;
  for (const std::string& line : gpu::matmul_algorithm_choices()) {
    if (line.find("epilogue") == std::string::npos) continue;
    std::cout << line << "\n";
    if (line.find("bfloat16, bias epilogue") != std::string::npos) {
      EXPECT_EQ(line.find("no cuBLASLt algorithm"), std::string::npos) << line;
      ++fused;
    }
  }
  EXPECT_GT(fused, 0);
#endif
}

TEST(MatmulLowpGpu, AttentionComposedPath) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  for (DType dt : kLowp) {
    if (!softmax_takes(dt)) GTEST_SKIP() << "softmax does not take " << dtype_name(dt) << " in this build yet";
    check_attention(dt, Device(kCUDA));
  }
}

// ---- golden: PyTorch's values and gradients ---------------------------------------------------------------------

TEST(MatmulLowpGolden, ValuesAndGradientsMatchPytorch) {
  MINIDL_REQUIRE_LINALG_GOLDEN();
  if (!testing::linalg_golden().contains("lowp_products")) {
    GTEST_SKIP() << "linalg_golden.json has no \"lowp_products\" yet: run tests/golden/gen_linalg_golden.py where "
                    "PyTorch is installed";
  }
  std::vector<Device> devices{Device(kCPU)};
  if (testing::gpu_available()) devices.push_back(Device(kCUDA));
  for (const auto& c : testing::linalg_golden().at("lowp_products")) {
    const std::string op_name = c.at("op");
    const DType dt = testing::dtype_named(c.at("dtype"));
    const double beta = c.value("beta", 1.0), alpha = c.value("alpha", 1.0);
    const std::vector<std::string> layouts = c.at("layouts");
    const Op op = [&](const std::vector<Tensor>& leaves, bool magnitude) {
      std::vector<Tensor> x;
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        x.push_back(layouts[i] == "t" ? leaves[i].transpose(-1, -2) : leaves[i]);
      }
      if (op_name == "matmul") return matmul(x[0], x[1]);
      if (op_name == "mm") return mm(x[0], x[1]);
      if (op_name == "bmm") return bmm(x[0], x[1]);
      if (op_name == "mv") return mv(x[0], x[1]);
      if (op_name == "dot") return dot(x[0], x[1]);
      if (op_name == "outer") return outer(x[0], x[1]);
      if (op_name == "addmm") return addmm(x[0], x[1], x[2], sc(beta, magnitude), sc(alpha, magnitude));
      if (op_name == "baddbmm") return baddbmm(x[0], x[1], x[2], sc(beta, magnitude), sc(alpha, magnitude));
      if (op_name == "addmv") return addmv(x[0], x[1], x[2], sc(beta, magnitude), sc(alpha, magnitude));
      if (op_name == "linear") return x.size() == 3 ? F::linear(x[0], x[1], x[2]) : F::linear(x[0], x[1]);
      ADD_FAILURE() << "unknown op " << op_name;
      return Tensor();
    };
    std::vector<Tensor> in;
    for (const auto& j : c.at("inputs")) in.push_back(testing::golden_tensor(j, dt));
    const Tensor g = testing::golden_tensor(c.at("grad_output"), dt);
    const i64 k = c.at("k");
    for (const Device device : devices) {
      // PyTorch's values: within the same bound of the float64 value as minidl's, so within twice it of minidl's.
      const std::vector<Tensor> ours = check_op("golden " + op_name, op, in, device, k, 2, 2, g);
      const std::string what = "golden " + op_name + " " + c.at("dtype").get<std::string>() + " on " +
                               detail::str(device);
      std::vector<Tensor> torch{testing::golden_tensor(c.at("output"), dt)};
      for (const auto& j : c.at("grads")) torch.push_back(testing::golden_tensor(j, dt));
      expect_devices_agree(ours, torch, dt, what);
    }
  }
}

}  // namespace
}  // namespace minidl
