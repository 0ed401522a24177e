// CUDA backend against the CPU backend: every primitive op run on the same random inputs (made on the CPU,
// copied to the GPU), forward outputs and every input gradient (from the same random upstream gradient)
// compared element by element. float32 with TF32 off at rtol 1e-4, atol 1e-5; float64 at 1e-10. Sizes are
// odd, include batch 1, 0-d and sizes large enough to need many blocks and block-wide reductions. Also:
// GPU random numbers, device round trips, the caching allocator's statistics and steady state, and recovery
// from an out-of-memory error. Every test skips visibly without a usable GPU.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_close;

namespace {

const Device kGpu("cuda");

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
/// Makes one input, on the CPU, in the given dtype.
using Gen = std::function<Tensor(DType)>;

Gen uni(const Shape& s, double lo = -1.0, double hi = 1.0) {
  return [=](DType dt) { return uniform(s, lo, hi, TensorOptions(dt)); };
}

/// Random values in [-1, 1) passed through `map` on the host.
Gen mapped(const Shape& s, const std::function<double(double)>& map) {
  return [=](DType dt) {
    std::vector<double> v = uniform(s, -1.0, 1.0, kFloat64).to_vector<double>();
    std::transform(v.begin(), v.end(), v.begin(), map);
    return from_vector(v, s, TensorOptions(dt));
  };
}

/// |x| in [0.5, 1] with a random sign (divisors, and inputs of relu/abs away from their kink).
Gen away_from_zero(const Shape& s) {
  return mapped(s, [](double x) { return x >= 0 ? 0.5 + 0.5 * x : -0.5 + 0.5 * x; });
}

/// Values on a grid of step 0.04, shifted by 0.02 when `odd`: maximum(even, odd) never ties.
Gen grid(const Shape& s, bool odd) {
  return mapped(s, [odd](double x) { return 0.04 * std::floor(25.0 * x) + (odd ? 0.02 : 0.0); });
}

/// Integers 0, 1, 2: many ties, for eq, argmax and max's choice of the first maximum.
Gen small_ints(const Shape& s) {
  return mapped(s, [](double x) { return std::min(2.0, std::floor(1.5 * (x + 1.0))); });
}

/// Logits near -1000, 0 or +1000: softmax must stay finite and agree.
Gen huge_logits(const Shape& s) {
  return mapped(s, [](double x) { return 1000.0 * std::floor(1.5 * (x + 1.0) - 1.0) + 10.0 * x; });
}

/// A random permutation of evenly spaced values: no ties anywhere.
Gen distinct(const Shape& s) {
  return [=](DType dt) {
    const std::vector<double> u = uniform(s, 0.0, 1.0, kFloat64).to_vector<double>();
    std::vector<std::size_t> order(u.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return u[a] < u[b]; });
    std::vector<double> v(u.size());
    for (std::size_t r = 0; r < order.size(); ++r) v[order[r]] = -1.0 + 2.0 * (r + 0.5) / static_cast<double>(u.size());
    return from_vector(v, s, TensorOptions(dt));
  };
}

struct OpCase {
  std::string name;  // a valid test name: letters, digits, underscores
  std::vector<Gen> inputs;
  Fn fn;
  bool differentiable = true;
};

std::string tag(const Shape& s) {
  if (s.empty()) return "0d";
  std::string r;
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

std::string dim_tag(std::int64_t d) { return d < 0 ? "m" + std::to_string(-d) : std::to_string(d); }

std::string dims_tag(const std::vector<std::int64_t>& dims) {
  if (dims.empty()) return "all";
  std::string r;
  for (std::int64_t d : dims) r += (r.empty() ? "" : "_") + dim_tag(d);
  return r;
}

Fn unary_fn(const std::function<Tensor(const Tensor&)>& f) {
  return [f](const std::vector<Tensor>& in) { return f(in[0]); };
}

std::vector<OpCase> make_cases() {
  std::vector<OpCase> cases;
  auto add_case = [&](std::string name, std::vector<Gen> inputs, Fn fn, bool differentiable = true) {
    cases.push_back({std::move(name), std::move(inputs), std::move(fn), differentiable});
  };

  // Binary ops under every kind of broadcast; the last pair needs many blocks.
  const std::vector<std::pair<Shape, Shape>> binary_shapes{
      {{7, 5}, {7, 5}}, {{1, 7, 5}, {1, 7, 5}}, {{3, 7, 5}, {7, 1}}, {{3, 7, 5}, {5}},
      {{3, 7, 5}, {1, 7, 1}}, {{3, 7, 5}, {1}}, {{3, 7, 5}, {}}, {{7, 1}, {3, 7, 5}},
      {{}, {3, 7, 5}}, {{7, 1}, {1, 5}}, {{}, {}}, {{9, 257, 5}, {257, 1}}};
  struct Binary {
    std::string name;
    std::function<Tensor(const Tensor&, const Tensor&)> fn;
    std::function<Gen(const Shape&)> lhs, rhs;
  };
  const auto u = [](const Shape& s) { return uni(s); };
  const std::vector<Binary> binaries{
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, u, u},
      {"add_alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, -2.5); }, u, u},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, u, u},
      {"sub_alpha", [](const Tensor& a, const Tensor& b) { return sub(a, b, 0.5); }, u, u},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, u, u},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, u, away_from_zero},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](const Shape& s) { return uni(s, 0.6, 1.6); }, [](const Shape& s) { return uni(s, -1.5, 1.5); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](const Shape& s) { return grid(s, false); }, [](const Shape& s) { return grid(s, true); }},
  };
  for (const Binary& b : binaries) {
    for (const auto& [sa, sb] : binary_shapes) {
      add_case(b.name + "_" + tag(sa) + "_" + tag(sb), {b.lhs(sa), b.rhs(sb)},
               [f = b.fn](const std::vector<Tensor>& in) { return f(in[0], in[1]); });
    }
  }
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{3, 7, 5}, {7, 1}}, {{1, 7, 5}, {1, 7, 5}}}) {
    add_case("eq_" + tag(sa) + "_" + tag(sb), {small_ints(sa), small_ints(sb)},
             [](const std::vector<Tensor>& in) { return eq(in[0], in[1]); }, false);
  }

  // Unary ops, including scalar forms; the last shape needs many blocks.
  struct Unary {
    std::string name;
    std::function<Tensor(const Tensor&)> fn;
    std::function<Gen(const Shape&)> input;
  };
  const auto pos = [](const Shape& s) { return uni(s, 0.5, 2.0); };
  const std::vector<Unary> unaries{
      {"neg", [](const Tensor& a) { return neg(a); }, u},
      {"exp", [](const Tensor& a) { return exp(a); }, [](const Shape& s) { return uni(s, -2.0, 2.0); }},
      {"log", [](const Tensor& a) { return log(a); }, pos},
      {"sqrt", [](const Tensor& a) { return sqrt(a); }, pos},
      {"abs", [](const Tensor& a) { return abs(a); }, away_from_zero},
      {"relu", [](const Tensor& a) { return relu(a); }, away_from_zero},
      {"leaky_relu", [](const Tensor& a) { return leaky_relu(a); }, away_from_zero},
      {"leaky_relu_0_2", [](const Tensor& a) { return leaky_relu(a, 0.2); }, away_from_zero},
      {"gelu", [](const Tensor& a) { return gelu(a); }, [](const Shape& s) { return uni(s, -3.0, 3.0); }},
      {"sigmoid", [](const Tensor& a) { return sigmoid(a); }, [](const Shape& s) { return uni(s, -6.0, 6.0); }},
      {"sigmoid_tails", [](const Tensor& a) { return sigmoid(a); }, [](const Shape& s) { return uni(s, -40.0, 40.0); }},
      {"tanh", [](const Tensor& a) { return tanh(a); }, [](const Shape& s) { return uni(s, -3.0, 3.0); }},
      {"add_scalar", [](const Tensor& a) { return add(a, 1.5); }, u},
      {"mul_scalar", [](const Tensor& a) { return mul(a, -0.75); }, u},
      {"pow_2", [](const Tensor& a) { return pow(a, 2.0); }, u},
      {"pow_3", [](const Tensor& a) { return pow(a, 3.0); }, u},
      {"pow_0_5", [](const Tensor& a) { return pow(a, 0.5); }, pos},
      {"pow_m1_5", [](const Tensor& a) { return pow(a, -1.5); }, pos},
  };
  for (const Unary& op : unaries) {
    for (const Shape& s : {Shape{7, 5}, Shape{1, 7, 5}, Shape{}, Shape{1001, 33}}) {
      add_case(op.name + "_" + tag(s), {op.input(s)}, unary_fn(op.fn));
    }
  }

  // Matrix products: 2-D, batched (incl. batch 1 and two batch dims), batched · 2-D, and larger ones.
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{
           {{7, 5}, {5, 3}}, {{1, 5}, {5, 1}}, {{7, 1}, {1, 3}}, {{3, 7, 5}, {3, 5, 2}}, {{1, 7, 5}, {1, 5, 3}},
           {{2, 3, 7, 5}, {2, 3, 5, 4}}, {{3, 7, 5}, {5, 3}}, {{1, 1, 5}, {5, 3}}, {{67, 129}, {129, 33}},
           {{3, 33, 65}, {3, 65, 17}}, {{5, 31, 65}, {65, 17}}}) {
    add_case("matmul_" + tag(sa) + "_" + tag(sb), {uni(sa), uni(sb)},
             [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); });
  }

  // Shape ops (transpose materialises; the views must carry gradients back).
  for (const auto& [s, d0, d1] : std::vector<std::tuple<Shape, std::int64_t, std::int64_t>>{
           {{3, 7, 5}, 0, 1}, {{3, 7, 5}, 0, 2}, {{3, 7, 5}, 1, 2}, {{3, 7, 5}, -1, -3}, {{3, 7, 5}, 1, 1},
           {{1, 7, 1, 5}, 1, 3}, {{1, 7, 1, 5}, 0, 2}, {{65, 33, 17}, 0, 2}, {{7, 5}, 1, 0}}) {
    add_case("transpose_" + tag(s) + "_" + dim_tag(d0) + "_" + dim_tag(d1), {uni(s)},
             unary_fn([d0 = d0, d1 = d1](const Tensor& a) { return transpose(a, d0, d1); }));
  }
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> views{
      {"reshape_flat", [](const Tensor& a) { return reshape(a, {-1}).exp(); }},
      {"reshape_5xm1", [](const Tensor& a) { return reshape(a, {5, -1}) * 2.0; }},
      {"flatten_1", [](const Tensor& a) { return flatten(a, 1).tanh(); }},
      {"unsqueeze_0", [](const Tensor& a) { return a.unsqueeze(0).sigmoid(); }},
      {"squeeze_0", [](const Tensor& a) { return a.squeeze(0).relu(); }},
  };
  for (const auto& [name, f] : views) add_case(name + "_1x7x5", {uni({1, 7, 5})}, unary_fn(f));

  // Reductions over every kind of dim set; the large ones use non-negative inputs so the float32 sums of
  // a thousand terms are well conditioned (the comparison then measures the kernels, not cancellation).
  for (const std::vector<std::int64_t>& dims : std::vector<std::vector<std::int64_t>>{
           {}, {0}, {1}, {2}, {-1}, {0, 2}, {0, 1, 2}}) {
    for (bool keepdim : {false, true}) {
      const std::string k = keepdim ? "_keepdim" : "";
      add_case("sum_3x7x5_" + dims_tag(dims) + k, {uni({3, 7, 5})},
               unary_fn([dims, keepdim](const Tensor& a) { return sum(a, dims, keepdim); }));
      add_case("mean_3x7x5_" + dims_tag(dims) + k, {uni({3, 7, 5})},
               unary_fn([dims, keepdim](const Tensor& a) { return mean(a, dims, keepdim); }));
    }
  }
  for (const auto& [s, dims] : std::vector<std::pair<Shape, std::vector<std::int64_t>>>{
           {{37, 1001}, {1}}, {{1001, 37}, {0}}, {{37, 1001}, {}}, {{1001}, {}}, {{1, 1001}, {0}}}) {
    add_case("sum_" + tag(s) + "_" + dims_tag(dims), {uni(s, 0.0, 1.0)},
             unary_fn([dims = dims](const Tensor& a) { return sum(a, dims); }));
    add_case("mean_" + tag(s) + "_" + dims_tag(dims), {uni(s, 0.0, 1.0)},
             unary_fn([dims = dims](const Tensor& a) { return mean(a, dims, true); }));
  }
  for (const Shape& target : {Shape{7, 1}, Shape{5}, Shape{1, 7, 1}, Shape{1}, Shape{}, Shape{3, 1, 5}}) {
    add_case("sum_to_3x7x5_" + tag(target), {uni({3, 7, 5})},
             unary_fn([target](const Tensor& a) { return sum_to(a, target); }));
  }

  // max / argmax over one dim: distinct values, and small integers where the first maximum must win.
  for (const auto& [s, d] : std::vector<std::pair<Shape, std::int64_t>>{
           {{3, 7, 5}, 0}, {{3, 7, 5}, 1}, {{3, 7, 5}, 2}, {{3, 7, 5}, -1}, {{37, 1001}, 1}, {{1001, 37}, 0},
           {{1, 7}, 1}}) {
    for (bool keepdim : {false, true}) {
      const std::string name = tag(s) + "_" + dim_tag(d) + (keepdim ? "_keepdim" : "");
      add_case("max_" + name, {distinct(s)}, unary_fn([d = d, keepdim](const Tensor& a) { return std::get<0>(max(a, d, keepdim)); }));
      add_case("argmax_" + name, {distinct(s)},
               unary_fn([d = d, keepdim](const Tensor& a) { return argmax(a, d, keepdim); }), false);
    }
    add_case("max_ties_" + tag(s) + "_" + dim_tag(d), {small_ints(s)},
             unary_fn([d = d](const Tensor& a) { return std::get<0>(max(a, d)); }));
    add_case("argmax_ties_" + tag(s) + "_" + dim_tag(d), {small_ints(s)},
             unary_fn([d = d](const Tensor& a) { return argmax(a, d); }), false);
  }

  // softmax / log_softmax over every dim, rows longer than a block, and huge logits.
  for (const auto& [s, d] : std::vector<std::pair<Shape, std::int64_t>>{
           {{3, 7, 5}, 0}, {{3, 7, 5}, 1}, {{3, 7, 5}, 2}, {{3, 7, 5}, -2}, {{1, 7}, 1}, {{5, 1001}, 1},
           {{1001, 5}, 0}, {{7, 1}, 1}}) {
    const std::string name = tag(s) + "_" + dim_tag(d);
    add_case("softmax_" + name, {uni(s, -3.0, 3.0)}, unary_fn([d = d](const Tensor& a) { return softmax(a, d); }));
    add_case("log_softmax_" + name, {uni(s, -3.0, 3.0)},
             unary_fn([d = d](const Tensor& a) { return log_softmax(a, d); }));
  }
  for (std::int64_t d : {0, 1}) {
    add_case("softmax_huge_4x9_" + dim_tag(d), {huge_logits({4, 9})},
             unary_fn([d](const Tensor& a) { return softmax(a, d); }));
    add_case("log_softmax_huge_4x9_" + dim_tag(d), {huge_logits({4, 9})},
             unary_fn([d](const Tensor& a) { return log_softmax(a, d); }));
  }

  // A small network: several ops, broadcast biases, fan-out.
  add_case("mlp_1x7x5", {uni({1, 7, 5}), uni({5, 9}), uni({9}), uni({9, 3}), uni({1, 3})},
           [](const std::vector<Tensor>& in) {
             const Tensor h = gelu(matmul(in[0], in[1]) + in[2]);
             return log_softmax(matmul(h * sigmoid(h), in[3]) + in[4], -1);
           });
  return cases;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = make_cases();
  return cases;
}

/// Runs one case on both devices and compares the output and every input's gradient.
void compare_devices(const OpCase& c, DType dt, double rtol, double atol) {
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Gen& gen : c.inputs) {
    Tensor t = gen(dt);
    ASSERT_EQ(t.dtype(), dt);
    Tensor g = t.to(kGpu);  // a leaf: t does not require grad yet
    if (c.differentiable) {
      t.requires_grad_(true);
      g.requires_grad_(true);
    }
    cpu_in.push_back(t);
    gpu_in.push_back(g);
  }
  const Tensor y_cpu = c.fn(cpu_in), y_gpu = c.fn(gpu_in);
  ASSERT_TRUE(y_gpu.is_cuda());
  ASSERT_EQ(y_gpu.dtype(), y_cpu.dtype());
  ASSERT_EQ(y_gpu.sizes(), y_cpu.sizes());
  if (y_cpu.dtype() == kInt64) {
    EXPECT_EQ(y_gpu.to_vector<std::int64_t>(), y_cpu.to_vector<std::int64_t>()) << "forward";
    return;
  }
  const auto yv = y_cpu.detach().to(kFloat64).to_vector<double>();
  for (std::size_t i = 0; i < yv.size(); ++i) ASSERT_TRUE(std::isfinite(yv[i])) << "CPU output element " << i;
  expect_close(y_gpu, y_cpu, rtol, atol, "forward");
  if (!c.differentiable) return;

  const Tensor upstream = uniform(y_cpu.sizes(), -1.0, 1.0, TensorOptions(dt));
  y_cpu.backward(upstream);
  y_gpu.backward(upstream.to(kGpu));
  for (std::size_t i = 0; i < cpu_in.size(); ++i) {
    const std::string what = "gradient of input " + std::to_string(i);
    ASSERT_TRUE(cpu_in[i].grad().defined()) << what << " on the CPU";
    ASSERT_TRUE(gpu_in[i].grad().defined()) << what << " on the GPU";
    EXPECT_TRUE(gpu_in[i].grad().is_cuda()) << what;
    expect_close(gpu_in[i].grad(), cpu_in[i].grad(), rtol, atol, what);
  }
}

class OpsGpuMatchesCpu : public ::testing::TestWithParam<std::tuple<std::size_t, DType>> {};

TEST_P(OpsGpuMatchesCpu, ForwardAndGradients) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  const auto [index, dt] = GetParam();
  const bool single = dt == kFloat32;
  compare_devices(op_cases()[index], dt, single ? 1e-4 : 1e-10, single ? 1e-5 : 1e-10);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpsGpuMatchesCpu,
                         ::testing::Combine(::testing::Range<std::size_t>(0, op_cases().size()),
                                            ::testing::Values(kFloat32, kFloat64)),
                         [](const ::testing::TestParamInfo<std::tuple<std::size_t, DType>>& info) {
                           return op_cases()[std::get<0>(info.param)].name +
                                  (std::get<1>(info.param) == kFloat32 ? "_f32" : "_f64");
                         });

// ---- random numbers ----------------------------------------------------------------------------------------

struct Moments {
  double min, max, mean, stddev;
};
Moments moments(const std::vector<double>& v) {
  const auto non_finite = std::count_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); });
  EXPECT_EQ(non_finite, 0) << "elements not written or not finite";
  Moments m{v[0], v[0], 0.0, 0.0};
  for (double x : v) {
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
    m.mean += x;
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.stddev += (x - m.mean) * (x - m.mean);
  m.stddev = std::sqrt(m.stddev / static_cast<double>(v.size()));
  return m;
}

/// Draws `n` values with `draw` into memory that held NaNs just before, so an element the kernel skips shows.
std::vector<double> draw_over_nans(std::int64_t n, DType dt, const std::function<Tensor()>& draw) {
  cuda::empty_cache();
  { const Tensor junk = full({n}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(dt).device(kGpu)); }
  const Tensor t = draw();
  EXPECT_TRUE(t.is_cuda());
  EXPECT_EQ(t.dtype(), dt);
  return t.to(kFloat64).to_vector<double>();
}

TEST(OpsGpu, RandomNumbersAreSeededInRangeAndDistributed) {
  MINIDL_REQUIRE_GPU();
  const std::int64_t n = 200003;  // not a multiple of the 4 (float) or 2 (double) values per Philox draw
  for (DType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const TensorOptions o = TensorOptions(dt).device(kGpu);
    manual_seed(1234);
    const auto a = draw_over_nans(n, dt, [&] { return rand({n}, o); });
    const auto a_next = rand({n}, o).to(kFloat64).to_vector<double>();
    manual_seed(1234);
    EXPECT_TRUE(rand({n}, o).to(kFloat64).to_vector<double>() == a) << "same seed, same values";
    EXPECT_TRUE(a_next != a) << "the next draw continues the stream";
    manual_seed(4321);
    EXPECT_TRUE(rand({n}, o).to(kFloat64).to_vector<double>() != a) << "another seed, other values";

    const Moments u = moments(a);
    EXPECT_GE(u.min, 0.0);
    EXPECT_LT(u.max, 1.0);
    EXPECT_NEAR(u.mean, 0.5, 0.005);
    EXPECT_NEAR(u.stddev, std::sqrt(1.0 / 12.0), 0.003);

    const Moments r = moments(draw_over_nans(n, dt, [&] { return uniform({n}, -3.0, 5.0, o); }));
    EXPECT_GE(r.min, -3.0);
    EXPECT_LT(r.max, 5.0);
    EXPECT_NEAR(r.mean, 1.0, 0.04);

    const Moments g = moments(draw_over_nans(n, dt, [&] { return randn({n}, o); }));
    EXPECT_NEAR(g.mean, 0.0, 0.015);
    EXPECT_NEAR(g.stddev, 1.0, 0.015);
    EXPECT_TRUE(std::isfinite(g.min) && std::isfinite(g.max));
    manual_seed(99);
    const auto n1 = randn({n}, o).to(kFloat64).to_vector<double>();
    manual_seed(99);
    EXPECT_TRUE(randn({n}, o).to(kFloat64).to_vector<double>() == n1) << "same seed, same normals";
  }
}

// ---- device transfers --------------------------------------------------------------------------------------

TEST(OpsGpu, ToDeviceRoundTripsEveryDtypeAndShape) {
  MINIDL_REQUIRE_GPU();
  for (const Shape& s : {Shape{}, Shape{0, 3}, Shape{1, 7, 5}, Shape{1001, 33}}) {
    SCOPED_TRACE(shape_str(s));
    const Tensor f = uniform(s, -1.0, 1.0, kFloat64);
    const Tensor g = f.to(kGpu);
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.device(), Device("cuda:0"));
    EXPECT_EQ(g.sizes(), s);
    EXPECT_TRUE(g.to(kGpu).is_same(g)) << "moving to the device it is on is a no-op";
    EXPECT_EQ(g.cpu().to_vector<double>(), f.to_vector<double>());
    EXPECT_EQ(g.to(kFloat32).cpu().to_vector<float>(), f.to(kFloat32).to_vector<float>());
    EXPECT_EQ(f.to(kFloat32).cuda().to(kFloat64).cpu().to_vector<double>(), f.to(kFloat32).to(kFloat64).to_vector<double>());
    std::vector<std::int64_t> ints(static_cast<std::size_t>(shape_numel(s)));
    for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<std::int64_t>(i * 7919) - (1LL << 40);
    const Tensor i64 = from_vector(ints, s);
    EXPECT_EQ(i64.to(kGpu).cpu().to_vector<std::int64_t>(), ints);
    EXPECT_EQ(from_vector(ints, s, TensorOptions(kInt64).device(kGpu)).to_vector<std::int64_t>(), ints);
    const Tensor copy = g.clone();
    EXPECT_NE(copy.data_ptr(), g.data_ptr());
    EXPECT_EQ(copy.cpu().to_vector<double>(), f.to_vector<double>());
  }
}

TEST(OpsGpu, GradientsFlowBackAcrossDevices) {
  MINIDL_REQUIRE_GPU();
  Tensor x = uniform({7, 5}, -1.0, 1.0, TensorOptions(kFloat64).requires_grad());
  (x.to(kGpu) * 3.0).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_FALSE(x.grad().is_cuda());
  expect_close(x.grad(), full({7, 5}, 3.0, kFloat64), 0, 0, "d(3x)/dx through .to(cuda)");
}

TEST(OpsGpu, MixingDevicesIsATypeErrorNamingTheOp) {
  MINIDL_REQUIRE_GPU();
  const Tensor a = uniform({3}, -1.0, 1.0), b = a.to(kGpu);
  try {
    (void)mul(a, b);
    FAIL() << "expected TypeError";
  } catch (const TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("mul"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
  EXPECT_THROW(matmul(a.reshape({1, 3}), b.reshape({3, 1})), TypeError);
}

// ---- caching allocator -------------------------------------------------------------------------------------

TEST(OpsGpu, MemoryStatsTrackAllocationsAndFrees) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_CACHING_ALLOCATOR();
  cuda::synchronize();
  const cuda::MemoryStats base = cuda::memory_stats();
  cuda::reset_peak_memory_stats();
  EXPECT_EQ(cuda::memory_stats().peak_allocated, base.allocated);
  const std::int64_t n = (3 << 20) / 4 + 37;  // 3 MiB + 148 bytes of float32: not a round size
  const std::size_t bytes = static_cast<std::size_t>(n) * 4;
  std::size_t held = 0;
  {
    const Tensor t = empty({n}, TensorOptions(kFloat32).device(kGpu));
    const cuda::MemoryStats s = cuda::memory_stats();
    held = s.allocated - base.allocated;
    EXPECT_GE(held, bytes);
    EXPECT_LE(held, bytes + (2u << 20)) << "at most one allocation granule of rounding";
    EXPECT_EQ(s.peak_allocated, s.allocated);
    EXPECT_GE(s.reserved, s.allocated);
    {
      const Tensor small = empty({1000}, TensorOptions(kFloat32).device(kGpu));
      EXPECT_GT(cuda::memory_stats().peak_allocated, s.allocated);
    }
    EXPECT_EQ(cuda::memory_stats().allocated, s.allocated);
  }
  const cuda::MemoryStats after = cuda::memory_stats();
  EXPECT_EQ(after.allocated, base.allocated) << "freed tensors are no longer counted";
  EXPECT_GE(after.peak_allocated, base.allocated + held) << "the peak remembers";
  // The freed block stays cached: the same request again is served without cudaMalloc.
  { const Tensor again = empty({n}, TensorOptions(kFloat32).device(kGpu)); }
  EXPECT_EQ(cuda::memory_stats().num_device_allocs, after.num_device_allocs);
  // empty_cache gives the cached blocks back to the driver.
  cuda::empty_cache();
  const cuda::MemoryStats emptied = cuda::memory_stats();
  EXPECT_LT(emptied.reserved, after.reserved);
  EXPECT_GT(emptied.num_device_frees, after.num_device_frees);
  EXPECT_EQ(emptied.allocated, base.allocated);
}

TEST(OpsGpu, SteadyStateTrainingLoopMakesNoCudaMalloc) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_CACHING_ALLOCATOR();
  const TensorOptions o = TensorOptions(kFloat32).device(kGpu);
  const Tensor x = uniform({17, 33}, -1.0, 1.0, o);
  Tensor w1 = uniform({33, 65}, -0.2, 0.2, o).requires_grad_(), b1 = zeros({65}, o).requires_grad_();
  Tensor w2 = uniform({65, 9}, -0.2, 0.2, o).requires_grad_(), b2 = zeros({1, 9}, o).requires_grad_();
  auto step = [&] {
    const Tensor h = relu(matmul(x, w1) + b1);
    const Tensor loss = neg(mean(std::get<0>(max(log_softmax(matmul(h, w2) + b2, 1), 1))));
    loss.backward();
    NoGradGuard no_grad;  // an SGD update, in place
    for (Tensor* p : {&w1, &b1, &w2, &b2}) {
      p->add_(p->grad(), -0.01);
      p->mutable_grad().zero_();
    }
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up: handles, workspaces, gradient buffers, cached blocks
  cuda::synchronize();
  const cuda::MemoryStats before = cuda::memory_stats();
  for (int i = 0; i < 100; ++i) {
    step();
    const cuda::MemoryStats s = cuda::memory_stats();
    ASSERT_EQ(s.allocated, before.allocated) << "iteration " << i << " leaked or kept memory";
    ASSERT_EQ(s.num_device_allocs, before.num_device_allocs) << "iteration " << i << " called cudaMalloc";
  }
  cuda::synchronize();
  const cuda::MemoryStats after = cuda::memory_stats();
  EXPECT_EQ(after.num_device_allocs, before.num_device_allocs);
  EXPECT_EQ(after.num_device_frees, before.num_device_frees);
  EXPECT_EQ(after.reserved, before.reserved);
  EXPECT_EQ(after.peak_allocated, before.peak_allocated) << "every iteration needs the same memory";
  for (float v : w2.cpu().to_vector<float>()) ASSERT_TRUE(std::isfinite(v));
}

TEST(OpsGpu, OutOfMemoryIsAnExceptionAndTheDeviceStaysUsable) {
  MINIDL_REQUIRE_GPU();
  const Tensor kept = uniform({5}, -1.0, 1.0, TensorOptions(kFloat64).device(kGpu));
  cuda::synchronize();
  const std::size_t allocated = cuda::memory_stats().allocated;
  const std::size_t request = std::size_t{4} << 45;  // 2^45 float32 elements: 128 TiB
  try {
    const Tensor huge = empty({1LL << 45}, TensorOptions(kFloat32).device(kGpu));
    FAIL() << "expected OutOfMemoryError, got a tensor of " << huge.nbytes() << " bytes";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(request)), std::string::npos) << "message should name the bytes: " << msg;
    EXPECT_EQ(e.requested_bytes(), request);
    EXPECT_GT(e.total_bytes(), 0u);
  }
  EXPECT_EQ(cuda::memory_stats().allocated, allocated) << "a failed allocation holds nothing";
  // The next ops work, on the surviving tensor and on new ones.
  const auto before = kept.cpu().to_vector<double>();
  const auto twice = (kept * 2.0 + 1.0).cpu().to_vector<double>();
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(twice[i], before[i] * 2.0 + 1.0);
  const Tensor fresh = ones({7, 5}, TensorOptions(kFloat32).device(kGpu)).sum();
  EXPECT_EQ(fresh.item<float>(), 35.f);
  cuda::synchronize();
}

}  // namespace
