// Elementwise math (minidl/math.h and the elementwise methods of tensor.h): PyTorch's values and gradients
// (tests/golden/math_golden.json, written by tests/golden/gen_math_golden.py) on both devices, float64
// gradcheck through contiguous and strided inputs, result dtypes, the in-place forms and their autograd, the
// methods against the free functions, CPU-vs-GPU agreement in every dtype, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "golden_file.h"
#include "minidl/minidl.h"
#include "test_util.h"

using namespace minidl;
using json = nlohmann::json;
using minidl::testing::expect_close;

namespace {

// ---- helpers -------------------------------------------------------------------------------------------------

/// PyTorch's OpInfo tolerances per dtype (rtol, atol); integral and bool results compare exactly.
std::pair<double, double> tolerance(DType t) {
  switch (t) {
    case kFloat32:
      return {1.3e-6, 1e-5};
    case kFloat64:
      return {1e-7, 1e-7};
    case kBFloat16:
      return {1.6e-2, 1e-5};
    case kFloat16:
      return {1e-3, 1e-5};
    default:
      return {0.0, 0.0};
  }
}

bool same_value(double a, double e, double rtol, double atol) {
  if (std::isnan(e)) return std::isnan(a);
  if (std::isinf(e)) return a == e;
  return std::fabs(a - e) <= atol + rtol * std::fabs(e);
}

/// Expects actual to have expected's dtype and shape and every element within the tolerances (NaN matches NaN,
/// an infinity only itself).
void expect_values(const Tensor& actual, DType dtype, const Shape& shape, const std::vector<double>& expected,
                   double rtol, double atol, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_EQ(actual.dtype(), dtype) << what;
  ASSERT_EQ(actual.sizes(), shape) << what;
  const std::vector<double> a = actual.detach().cpu().to(kFloat64).to_vector<double>();
  ASSERT_EQ(a.size(), expected.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < a.size() && failures < 5; ++i) {
    if (!same_value(a[i], expected[i], rtol, atol)) {
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << expected[i];
      ++failures;
    }
  }
}

/// Expects every element of actual to match expected (same dtype and shape) within dtype tolerances.
void expect_same(const Tensor& actual, const Tensor& expected, const std::string& what, double scale = 1.0) {
  ASSERT_TRUE(expected.defined()) << what;
  const auto [rtol, atol] = tolerance(expected.dtype());
  expect_values(actual, expected.dtype(), expected.sizes(), expected.detach().cpu().to(kFloat64).to_vector<double>(),
                rtol * scale, atol * scale, what);
}

Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}

Tensor uni(const Shape& s, double lo, double hi, DType dt = kFloat64) { return uniform(s, lo, hi, TensorOptions(dt)); }

/// |x| in [lo, hi] with a random sign.
Tensor away(const Shape& s, double lo, double hi, DType dt = kFloat64) {
  const Tensor u = uni(s, -1.0, 1.0);
  return add(mul(sign(u), hi - lo) * abs(u), mul(sign(u), lo)).to(dt);
}

/// Values at least `gap` away from every multiple of `period` (the jumps of floor, round, sign ...).
Tensor off_grid(const Shape& s, double lo, double hi, double period, double gap) {
  std::vector<double> v = uni(s, lo, hi).to_vector<double>();
  for (double& x : v) {
    const double k = std::round(x / period);
    if (std::fabs(x - k * period) < gap) x = k * period + (x >= k * period ? gap : -gap);
  }
  return from_vector(v, s);
}

// ---- golden -----------------------------------------------------------------------------------------------

const json& golden() {
  static const json g = minidl::testing::read_golden("math_golden.json");
  return g;
}

#define MINIDL_REQUIRE_GOLDEN() MINIDL_REQUIRE_GOLDEN_FILE(golden(), "math_golden.json", "gen_math_golden.py")

using minidl::testing::dtype_named;

double number(const json& v) { return minidl::testing::golden_number(v); }

std::vector<double> numbers(const json& t) {
  std::vector<double> r;
  for (const json& v : t["values"]) r.push_back(number(v));
  return r;
}

Tensor decode(const json& t, Device device) {
  const Shape shape = t["shape"].get<Shape>();
  return from_vector(numbers(t), shape).to(dtype_named(t["dtype"])).to(device);
}

Scalar scalar_of(const json& v) {
  if (v.is_boolean()) return Scalar(v.get<bool>());
  if (v.is_number_integer()) return Scalar(v.get<std::int64_t>());
  return Scalar(v.get<double>());
}
std::optional<Scalar> optional_scalar(const json& v) {
  if (v.is_null()) return std::nullopt;
  return scalar_of(v);
}

using GoldenOp = std::function<Tensor(const std::vector<Tensor>&, const json&)>;

const std::map<std::string, GoldenOp>& golden_ops() {
  using In = const std::vector<Tensor>&;
  using P = const json&;
  static const std::map<std::string, GoldenOp> ops = {
      {"sin", [](In x, P) { return sin(x[0]); }},
      {"cos", [](In x, P) { return cos(x[0]); }},
      {"tan", [](In x, P) { return tan(x[0]); }},
      {"asin", [](In x, P) { return asin(x[0]); }},
      {"acos", [](In x, P) { return acos(x[0]); }},
      {"atan", [](In x, P) { return atan(x[0]); }},
      {"sinh", [](In x, P) { return sinh(x[0]); }},
      {"cosh", [](In x, P) { return cosh(x[0]); }},
      {"erf", [](In x, P) { return erf(x[0]); }},
      {"erfc", [](In x, P) { return erfc(x[0]); }},
      {"exp2", [](In x, P) { return exp2(x[0]); }},
      {"expm1", [](In x, P) { return expm1(x[0]); }},
      {"log2", [](In x, P) { return log2(x[0]); }},
      {"log10", [](In x, P) { return log10(x[0]); }},
      {"log1p", [](In x, P) { return log1p(x[0]); }},
      {"rsqrt", [](In x, P) { return rsqrt(x[0]); }},
      {"reciprocal", [](In x, P) { return reciprocal(x[0]); }},
      {"exp", [](In x, P) { return exp(x[0]); }},
      {"log", [](In x, P) { return log(x[0]); }},
      {"sqrt", [](In x, P) { return sqrt(x[0]); }},
      {"sigmoid", [](In x, P) { return sigmoid(x[0]); }},
      {"tanh", [](In x, P) { return tanh(x[0]); }},
      {"gelu", [](In x, P) { return gelu(x[0]); }},
      {"floor", [](In x, P) { return floor(x[0]); }},
      {"ceil", [](In x, P) { return ceil(x[0]); }},
      {"round", [](In x, P) { return round(x[0]); }},
      {"trunc", [](In x, P) { return trunc(x[0]); }},
      {"sign", [](In x, P) { return sign(x[0]); }},
      {"abs", [](In x, P) { return abs(x[0]); }},
      {"neg", [](In x, P) { return neg(x[0]); }},
      {"square", [](In x, P) { return square(x[0]); }},
      {"round_decimals", [](In x, P p) { return round(x[0], p["decimals"].get<std::int64_t>()); }},
      {"isnan", [](In x, P) { return isnan(x[0]); }},
      {"isinf", [](In x, P) { return isinf(x[0]); }},
      {"isfinite", [](In x, P) { return isfinite(x[0]); }},
      {"atan2", [](In x, P) { return atan2(x[0], x[1]); }},
      {"hypot", [](In x, P) { return hypot(x[0], x[1]); }},
      {"fmod", [](In x, P) { return fmod(x[0], x[1]); }},
      {"remainder", [](In x, P) { return remainder(x[0], x[1]); }},
      {"fmod_scalar", [](In x, P p) { return fmod(x[0], scalar_of(p["other"])); }},
      {"clamp", [](In x, P p) { return clamp(x[0], optional_scalar(p["min"]), optional_scalar(p["max"])); }},
      {"clamp_min", [](In x, P p) { return clamp_min(x[0], scalar_of(p["min"])); }},
      {"clamp_max", [](In x, P p) { return clamp_max(x[0], scalar_of(p["max"])); }},
      {"clamp_tensor", [](In x, P) { return clamp(x[0], x[1], x[2]); }},
      {"clamp_min_tensor", [](In x, P) { return clamp_min(x[0], x[1]); }},
      {"clamp_max_tensor", [](In x, P) { return clamp_max(x[0], x[1]); }},
      {"lerp", [](In x, P p) { return lerp(x[0], x[1], scalar_of(p["weight"])); }},
      {"lerp_tensor", [](In x, P) { return lerp(x[0], x[1], x[2]); }},
  };
  return ops;
}

/// Runs every golden case on `device` and compares the output and, where stored, each input's gradient.
void expect_golden(Device device) {
  int cases = 0, gradients = 0;
  for (const json& c : golden()["cases"]) {
    const std::string name = c["name"];
    const auto op = golden_ops().find(c["op"].get<std::string>());
    ASSERT_NE(op, golden_ops().end()) << name << ": unknown op " << c["op"];
    const bool grads = c.contains("grads");
    std::vector<Tensor> inputs;
    for (const json& t : c["inputs"]) inputs.push_back(grads ? leaf(decode(t, device)) : decode(t, device));
    const Tensor out = op->second(inputs, c["params"]);
    const json& e = c["output"];
    const DType dt = dtype_named(e["dtype"]);
    const auto [rtol, atol] = tolerance(dt);
    EXPECT_EQ(out.device(), device) << name;
    expect_values(out, dt, e["shape"].get<Shape>(), numbers(e), rtol, atol, name + " output");
    ++cases;
    if (!grads) continue;
    out.backward(decode(c["grad_output"], device));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const json& ge = c["grads"][i];
      // A backward rule composes a few ops: some roundings more than the forward's one.
      const auto [grtol, gatol] = tolerance(dtype_named(ge["dtype"]));
      expect_values(inputs[i].grad(), dtype_named(ge["dtype"]), ge["shape"].get<Shape>(), numbers(ge), grtol * 8, gatol,
                    name + " gradient of input " + std::to_string(i));
      ++gradients;
    }
  }
  EXPECT_GT(cases, 300);
  EXPECT_GT(gradients, 150);
}

}  // namespace

// ---- PyTorch's values and gradients ---------------------------------------------------------------------

TEST(MathGolden, MatchesPyTorchOnTheCpu) {
  MINIDL_REQUIRE_GOLDEN();
  expect_golden(Device(kCPU));
}

TEST(MathGolden, MatchesPyTorchOnTheGpu) {
  MINIDL_REQUIRE_GOLDEN();
  MINIDL_REQUIRE_GPU();
  expect_golden(Device(kCUDA));
}

// ---- float64 gradcheck ----------------------------------------------------------------------------------

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using Unary = std::function<Tensor(const Tensor&)>;

void check(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs) {
  try {
    EXPECT_TRUE(gradcheck(fn, inputs)) << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

struct UnaryCase {
  std::string name;
  Unary fn;
  std::function<Tensor(const Shape&)> input;  // float64 values where the op is smooth
};

std::vector<UnaryCase> unary_cases() {
  const auto in = [](double lo, double hi) { return [lo, hi](const Shape& s) { return uni(s, lo, hi); }; };
  const auto rounding = [](const Shape& s) { return off_grid(s, -3.0, 3.0, 0.5, 0.05); };
  return {
      {"sin", [](const Tensor& x) { return sin(x); }, in(-3, 3)},
      {"cos", [](const Tensor& x) { return cos(x); }, in(-3, 3)},
      {"tan", [](const Tensor& x) { return tan(x); }, in(-1.2, 1.2)},
      {"asin", [](const Tensor& x) { return asin(x); }, in(-0.9, 0.9)},
      {"acos", [](const Tensor& x) { return acos(x); }, in(-0.9, 0.9)},
      {"atan", [](const Tensor& x) { return atan(x); }, in(-4, 4)},
      {"sinh", [](const Tensor& x) { return sinh(x); }, in(-3, 3)},
      {"cosh", [](const Tensor& x) { return cosh(x); }, in(-3, 3)},
      {"erf", [](const Tensor& x) { return erf(x); }, in(-2.5, 2.5)},
      {"erfc", [](const Tensor& x) { return erfc(x); }, in(-2.5, 2.5)},
      {"exp2", [](const Tensor& x) { return exp2(x); }, in(-3, 3)},
      {"expm1", [](const Tensor& x) { return expm1(x); }, in(-3, 3)},
      {"log2", [](const Tensor& x) { return log2(x); }, in(0.2, 5)},
      {"log10", [](const Tensor& x) { return log10(x); }, in(0.2, 5)},
      {"log1p", [](const Tensor& x) { return log1p(x); }, in(-0.8, 4)},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, in(0.2, 5)},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](const Shape& s) { return away(s, 0.3, 2); }},
      {"square", [](const Tensor& x) { return square(x); }, in(-3, 3)},
      {"abs", [](const Tensor& x) { return abs(x); }, [](const Shape& s) { return away(s, 0.2, 2); }},
      {"neg", [](const Tensor& x) { return neg(x); }, in(-3, 3)},
      {"sign", [](const Tensor& x) { return sign(x); }, [](const Shape& s) { return away(s, 0.2, 2); }},
      {"floor", [](const Tensor& x) { return floor(x); }, rounding},
      {"ceil", [](const Tensor& x) { return ceil(x); }, rounding},
      {"round", [](const Tensor& x) { return round(x); }, rounding},
      {"trunc", [](const Tensor& x) { return trunc(x); }, rounding},
      {"round(decimals=1)", [](const Tensor& x) { return round(x, 1); },
       [](const Shape& s) { return off_grid(s, -3, 3, 0.05, 0.005); }},
      {"clamp(-0.5, 0.6)", [](const Tensor& x) { return clamp(x, -0.5, 0.6); },
       [](const Shape& s) { return off_grid(s, -1, 1, 0.1, 0.02); }},
      {"clamp(min=0.3)", [](const Tensor& x) { return clamp(x, 0.3); },
       [](const Shape& s) { return off_grid(s, -1, 1, 0.1, 0.02); }},
      {"clamp(max=-0.2)", [](const Tensor& x) { return clamp(x, std::nullopt, -0.2); },
       [](const Shape& s) { return off_grid(s, -1, 1, 0.1, 0.02); }},
      {"clamp_min(0.1)", [](const Tensor& x) { return clamp_min(x, 0.1); },
       [](const Shape& s) { return off_grid(s, -1, 1, 0.1, 0.02); }},
      {"clamp_max(0.1)", [](const Tensor& x) { return clamp_max(x, 0.1); },
       [](const Shape& s) { return off_grid(s, -1, 1, 0.1, 0.02); }},
      {"clamp crossed (1, -1)", [](const Tensor& x) { return clamp(x, 1.0, -1.0); }, in(-2, 2)},
      {"fmod(scalar)", [](const Tensor& x) { return fmod(x, 0.7); },
       [](const Shape& s) { return off_grid(s, -3, 3, 0.7, 0.05); }},
      {"lerp(x, 2 - x, 0.3)", [](const Tensor& x) { return lerp(x, 2.0 - x, 0.3); }, in(-1, 1)},
      {"lerp(x, x * x, 0.8)", [](const Tensor& x) { return lerp(x, mul(x, x), 0.8); }, in(-1, 1)},
  };
}

}  // namespace

/// Each op on a fresh leaf and through a transposed, a sliced and an expanded view of one.
TEST(MathGradcheck, UnaryOpsThroughContiguousAndStridedInputs) {
  for (const UnaryCase& c : unary_cases()) {
    for (const Shape& s : {Shape{3, 5}, Shape{1}, Shape{}}) {
      check(c.name + " on " + shape_str(s), [f = c.fn](const std::vector<Tensor>& in) { return f(in[0]); },
            {leaf(c.input(s))});
    }
    check(c.name + " of a transpose", [f = c.fn](const std::vector<Tensor>& in) { return f(in[0].t()); },
          {leaf(c.input({4, 3}))});
    check(c.name + " of a strided slice",
          [f = c.fn](const std::vector<Tensor>& in) { return f(in[0].slice(1, 1, 6, 2)); }, {leaf(c.input({3, 7}))});
    check(c.name + " of an expand",
          [f = c.fn](const std::vector<Tensor>& in) {
            return f(in[0].expand({4, 3}));
          },
          {leaf(c.input({1, 3}))});
  }
}

namespace {

struct BinaryCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  std::function<Tensor(const Shape&)> lhs, rhs;
};

std::vector<BinaryCase> binary_cases() {
  const auto in = [](double lo, double hi) { return [lo, hi](const Shape& s) { return uni(s, lo, hi); }; };
  const auto off = [](double lo, double hi) { return [lo, hi](const Shape& s) { return away(s, lo, hi); }; };
  // Values 0.04 k and 0.04 k + 0.02: an even and an odd tensor are never within 0.02 of each other.
  const auto grid = [](bool odd) {
    return [odd](const Shape& s) {
      std::vector<double> v = uni(s, -25.0, 24.0).to_vector<double>();
      for (double& x : v) x = 0.04 * std::floor(x) + (odd ? 0.02 : 0.0);
      return from_vector(v, s);
    };
  };
  return {
      {"atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); }, in(-2, 2), off(0.3, 2)},
      {"hypot", [](const Tensor& a, const Tensor& b) { return hypot(a, b); }, off(0.2, 2), off(0.2, 2)},
      // a / b stays between integers: between 0.1 and 0.9 times b in magnitude
      {"fmod", [](const Tensor& a, const Tensor& b) { return fmod(mul(b, a), b); }, in(-2.9, -2.1), off(0.5, 2)},
      {"lerp(0.3)", [](const Tensor& a, const Tensor& b) { return lerp(a, b, 0.3); }, in(-2, 2), in(-2, 2)},
      {"lerp(1.6)", [](const Tensor& a, const Tensor& b) { return lerp(a, b, 1.6); }, in(-2, 2), in(-2, 2)},
      {"clamp_min(tensor)", [](const Tensor& a, const Tensor& b) { return clamp_min(a, b); }, grid(false), grid(true)},
      {"clamp_max(tensor)", [](const Tensor& a, const Tensor& b) { return clamp_max(a, b); }, grid(false), grid(true)},
  };
}

}  // namespace

TEST(MathGradcheck, BinaryOpsWithBroadcasts) {
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{2, 3}, {2, 3}}, {{2, 3, 4}, {4}}, {{3, 1}, {1, 4}}, {{}, {2, 3}}, {{2, 3}, {}}};
  for (const BinaryCase& c : binary_cases()) {
    for (const auto& [sa, sb] : shapes) {
      check(c.name + " on " + shape_str(sa) + " with " + shape_str(sb),
            [f = c.fn](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {leaf(c.lhs(sa)), leaf(c.rhs(sb))});
    }
    check(c.name + " of transposes", [f = c.fn](const std::vector<Tensor>& in) { return f(in[0].t(), in[1].t()); },
          {leaf(c.lhs({4, 3})), leaf(c.rhs({4, 3}))});
  }
}

TEST(MathGradcheck, TernaryOpsWithBroadcasts) {
  // clamp with tensor bounds: x, lower and upper on interleaved grids (no ties), lower below or above upper.
  const auto grid = [](const Shape& s, double offset) {
    std::vector<double> v = uni(s, -12.0, 12.0).to_vector<double>();
    for (double& x : v) x = 0.1 * std::floor(x) + offset;
    return leaf(from_vector(v, s));
  };
  const Fn clamp3 = [](const std::vector<Tensor>& in) { return clamp(in[0], in[1], in[2]); };
  check("clamp(x, lo, hi)", clamp3, {grid({3, 4}, 0.0), grid({3, 4}, 0.03), grid({3, 4}, 0.06)});
  check("clamp broadcast", clamp3, {grid({2, 3, 4}, 0.0), grid({4}, 0.03), grid({3, 1}, 0.06)});
  check("clamp of a transpose", [](const std::vector<Tensor>& in) { return clamp(in[0].t(), in[1], in[2]); },
        {grid({4, 3}, 0.0), grid({3, 4}, 0.03), grid({1}, 0.06)});
  check("clamp lower only", [](const std::vector<Tensor>& in) { return clamp(in[0], in[1]); },
        {grid({3, 4}, 0.0), grid({4}, 0.05)});
  check("clamp upper only", [](const std::vector<Tensor>& in) { return clamp(in[0], std::nullopt, in[1]); },
        {grid({3, 4}, 0.0), grid({3, 1}, 0.05)});
  const Fn lerp3 = [](const std::vector<Tensor>& in) { return lerp(in[0], in[1], in[2]); };
  check("lerp(a, b, w)", lerp3, {leaf(uni({3, 4}, -2, 2)), leaf(uni({3, 4}, -2, 2)), leaf(uni({3, 4}, -0.5, 1.5))});
  check("lerp broadcast", lerp3, {leaf(uni({2, 1, 4}, -2, 2)), leaf(uni({3, 1}, -2, 2)), leaf(uni({4}, -0.5, 1.5))});
  check("lerp of a transpose and an expand",
        [](const std::vector<Tensor>& in) {
          return lerp(in[0].t(), in[1].expand({4, 3}), in[2]);
        },
        {leaf(uni({3, 4}, -2, 2)), leaf(uni({1, 3}, -2, 2)), leaf(uni({}, 0.6, 0.9))});
}

// ---- dtypes ------------------------------------------------------------------------------------------------

TEST(MathDtypes, FloatingFunctionsGiveFloat32ForIntegralAndBoolInputs) {
  const Tensor i = from_vector<std::int64_t>({1, 2, 3}, {3});
  const std::vector<std::pair<std::string, Unary>> ops{{"sin", [](const Tensor& x) { return sin(x); }},
                                                       {"cos", [](const Tensor& x) { return cos(x); }},
                                                       {"tan", [](const Tensor& x) { return tan(x); }},
                                                       {"asin", [](const Tensor& x) { return asin(x); }},
                                                       {"acos", [](const Tensor& x) { return acos(x); }},
                                                       {"atan", [](const Tensor& x) { return atan(x); }},
                                                       {"sinh", [](const Tensor& x) { return sinh(x); }},
                                                       {"cosh", [](const Tensor& x) { return cosh(x); }},
                                                       {"erf", [](const Tensor& x) { return erf(x); }},
                                                       {"erfc", [](const Tensor& x) { return erfc(x); }},
                                                       {"exp2", [](const Tensor& x) { return exp2(x); }},
                                                       {"expm1", [](const Tensor& x) { return expm1(x); }},
                                                       {"log2", [](const Tensor& x) { return log2(x); }},
                                                       {"log10", [](const Tensor& x) { return log10(x); }},
                                                       {"log1p", [](const Tensor& x) { return log1p(x); }},
                                                       {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},
                                                       {"reciprocal", [](const Tensor& x) { return reciprocal(x); }}};
  for (const auto& [name, f] : ops) {
    for (DType dt : {kInt64, kInt32, kUInt8, kBool}) {
      const Tensor x = i.to(dt);
      const Tensor y = f(x);
      EXPECT_EQ(y.dtype(), kFloat32) << name << " of " << dt;
      expect_same(y, f(x.to(kFloat32)), name + " of " + dtype_name(dt));
    }
    for (DType dt : {kFloat64, kBFloat16, kHalf}) EXPECT_EQ(f(i.to(dt)).dtype(), dt) << name;
  }
  EXPECT_EQ(atan2(i, i).dtype(), kFloat32);
  EXPECT_EQ(atan2(i, i.to(kFloat64)).dtype(), kFloat64);
}

TEST(MathDtypes, RoundingSignAbsSquareAndClampKeepIntegralDtypes) {
  const Tensor v = from_vector<std::int64_t>({-7, 0, 3, 12, -1}, {5});
  for (DType dt : {kInt64, kInt32}) {
    const Tensor x = v.to(dt);
    for (const Tensor& y : {floor(x), ceil(x), round(x), trunc(x)}) {
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(y.to(kInt64).to_vector<std::int64_t>(), v.to_vector<std::int64_t>());
    }
    EXPECT_EQ(sign(x).to(kInt64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-1, 0, 1, 1, -1}));
    EXPECT_EQ(abs(x).to(kInt64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{7, 0, 3, 12, 1}));
    EXPECT_EQ(square(x).to(kInt64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{49, 0, 9, 144, 1}));
    EXPECT_EQ(clamp(x, -2, 5).dtype(), dt);
    EXPECT_EQ(clamp(x, -2, 5).to(kInt64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-2, 0, 3, 5, -1}));
    EXPECT_EQ(fmod(x, 5).to(kInt64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-2, 0, 3, 2, -1}));
    EXPECT_EQ(fmod(x, 5).dtype(), dt);
  }
  const Tensor b = from_vector<std::int64_t>({1, 0, 1}, {3}).to(kBool);
  EXPECT_EQ(square(b).dtype(), kInt64);
  EXPECT_EQ(sign(b).dtype(), kBool);
  EXPECT_EQ(sign(b).to_vector<bool>(), b.to_vector<bool>());
  EXPECT_EQ(clamp(b, 0, 1).dtype(), kInt64);
  EXPECT_EQ(clamp(v, 0.5).dtype(), kFloat32);  // a floating bound promotes
  EXPECT_EQ(clamp(v, std::nullopt, 2.5).to_vector<float>(), (std::vector<float>{-7, 0, 2.5f, 2.5f, -1}));
  EXPECT_EQ(clamp(v, uni({5}, 0, 1, kFloat32)).dtype(), kFloat32);
  EXPECT_EQ(clamp(v.to(kUInt8), 10, 200).dtype(), kUInt8);
  EXPECT_EQ(fmod(v, 2.5).dtype(), kFloat32);
  EXPECT_EQ(clamp(uni({3}, -1, 1, kHalf), -0.5, 0.5).dtype(), kHalf);
}

TEST(MathDtypes, TestsGiveBoolForEveryDtype) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor f = from_vector<double>({1.0, nan, inf, -inf, -0.0, 3.5}, {6});
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kHalf}) {
    const Tensor x = f.to(dt);
    EXPECT_EQ(isnan(x).to_vector<bool>(), (std::vector<bool>{false, true, false, false, false, false})) << dt;
    EXPECT_EQ(isinf(x).to_vector<bool>(), (std::vector<bool>{false, false, true, true, false, false})) << dt;
    EXPECT_EQ(isfinite(x).to_vector<bool>(), (std::vector<bool>{true, false, false, false, true, true})) << dt;
  }
  for (DType dt : {kInt64, kInt32, kUInt8, kBool}) {
    const Tensor x = from_vector<std::int64_t>({0, 1, 1}, {3}).to(dt);
    EXPECT_EQ(isnan(x).dtype(), kBool);
    EXPECT_EQ(isnan(x).to_vector<bool>(), (std::vector<bool>{false, false, false})) << dt;
    EXPECT_EQ(isinf(x).to_vector<bool>(), (std::vector<bool>{false, false, false})) << dt;
    EXPECT_EQ(isfinite(x).to_vector<bool>(), (std::vector<bool>{true, true, true})) << dt;
  }
}

TEST(MathValues, EdgeCasesFollowPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const auto values = [](const Tensor& t) { return t.to(kFloat64).to_vector<double>(); };
  // round: half-way cases to even; with decimals, as PyTorch (x * 10^d, nearbyint, / 10^d in float32).
  EXPECT_EQ(values(round(from_vector<double>({0.5, 1.5, 2.5, -0.5, -2.5, 3.7}, {6}))),
            (std::vector<double>{0, 2, 2, -0, -2, 4}));
  EXPECT_EQ(values(round(from_vector<float>({2.675f, 1234.5678f}, {2}), 2)),
            values(from_vector<float>({2.68f, 1234.57f}, {2})));
  EXPECT_EQ(values(round(from_vector<double>({15.0, 25.0, 1234.5}, {3}), -1)), (std::vector<double>{20, 20, 1230}));
  // sign: NaN gives 0; clamp: NaN stays NaN, min > max gives max, a NaN bound gives NaN.
  const std::vector<double> s = values(sign(from_vector<double>({nan, -3.0, 0.0, 2.0}, {4})));
  EXPECT_EQ(s, (std::vector<double>{0, -1, 0, 1}));
  const std::vector<double> c = values(clamp(from_vector<double>({nan, 5.0, -5.0, inf}, {4}), -1.0, 1.0));
  EXPECT_TRUE(std::isnan(c[0]));
  EXPECT_EQ(std::vector<double>(c.begin() + 1, c.end()), (std::vector<double>{1, -1, 1}));
  EXPECT_EQ(values(clamp(from_vector<double>({-3.0, 0.0, 3.0}, {3}), 1.0, -1.0)), (std::vector<double>{-1, -1, -1}));
  for (double v : values(clamp(from_vector<double>({2.0, 0.0}, {2}), nan, 0.5))) EXPECT_TRUE(std::isnan(v));
  // fmod takes the dividend's sign, remainder the divisor's.
  const Tensor a = from_vector<std::int64_t>({-5, 5, -4, 7}, {4}), b = from_vector<std::int64_t>({-2, -2, 3, 3}, {4});
  EXPECT_EQ(fmod(a, b).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-1, 1, -1, 1}));
  EXPECT_EQ(remainder(a, b).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-1, -1, 2, 1}));
  EXPECT_EQ(values(fmod(a.to(kFloat64), 2.5)), (std::vector<double>{-0.0, 0.0, -1.5, 2.0}));
  // lerp is exact at weight 1 and 0.
  const Tensor x = uni({7}, -3, 3), y = uni({7}, -3, 3);
  EXPECT_EQ(values(lerp(x, y, 1.0)), values(y));
  EXPECT_EQ(values(lerp(x, y, 0.0)), values(x));
  // Empty and 0-d tensors.
  EXPECT_EQ(sin(zeros({0, 3})).sizes(), (Shape{0, 3}));
  EXPECT_EQ(clamp(zeros({2, 0}), zeros({2, 0}), ones({1, 0})).sizes(), (Shape{2, 0}));
  EXPECT_EQ(lerp(zeros({}), ones({}), 0.25).item<float>(), 0.25f);
}

// ---- in place ----------------------------------------------------------------------------------------------

TEST(MathInplace, WritesTheOutOfPlaceResultAndBumpsTheVersion) {
  const Tensor base = uni({4, 5}, 0.2, 0.9, kFloat32);
  const std::vector<std::pair<std::string, std::function<void(Tensor&)>>> ops{
      {"neg_", [](Tensor& t) { t.neg_(); }},
      {"abs_", [](Tensor& t) { t.abs_(); }},
      {"exp_", [](Tensor& t) { t.exp_(); }},
      {"log_", [](Tensor& t) { t.log_(); }},
      {"sqrt_", [](Tensor& t) { t.sqrt_(); }},
      {"rsqrt_", [](Tensor& t) { t.rsqrt_(); }},
      {"sin_", [](Tensor& t) { t.sin_(); }},
      {"cos_", [](Tensor& t) { t.cos_(); }},
      {"tanh_", [](Tensor& t) { t.tanh_(); }},
      {"sigmoid_", [](Tensor& t) { t.sigmoid_(); }},
      {"reciprocal_", [](Tensor& t) { t.reciprocal_(); }},
      {"square_", [](Tensor& t) { t.square_(); }},
      {"floor_", [](Tensor& t) { t.floor_(); }},
      {"ceil_", [](Tensor& t) { t.ceil_(); }},
      {"round_", [](Tensor& t) { t.round_(); }},
      {"trunc_", [](Tensor& t) { t.trunc_(); }},
      {"relu_", [](Tensor& t) { t.relu_(); }},
      {"pow_", [](Tensor& t) { t.pow_(1.5); }},
      {"clamp_", [](Tensor& t) { t.clamp_(0.3, 0.7); }},
      {"clamp_min_", [](Tensor& t) { t.clamp_min_(0.5); }},
      {"clamp_max_", [](Tensor& t) { t.clamp_max_(0.5); }},
      {"clamp_(tensor)",
       [](Tensor& t) {
         t.clamp_(full({5}, 0.4), full({4, 1}, 0.6));
       }},
      {"clamp_(tensor min)", [](Tensor& t) { t.clamp_(full({5}, 0.4)); }},
      {"lerp_", [](Tensor& t) { t.lerp_(ones({5}), 0.25); }},
      {"lerp_(tensor)",
       [](Tensor& t) {
         t.lerp_(ones({5}), full({4, 1}, 0.75));
       }},
      {"sub_", [](Tensor& t) { t.sub_(ones({5}), 2); }},
      {"sub_(scalar)", [](Tensor& t) { t.sub_(0.5, 2); }},
      {"mul_",
       [](Tensor& t) {
         t.mul_(full({4, 1}, 3.0));
       }},
      {"div_", [](Tensor& t) { t.div_(full({5}, 4.0)); }},
      {"div_(scalar)", [](Tensor& t) { t.div_(4); }},
      {"add_(scalar, alpha)", [](Tensor& t) { t.add_(1, 3); }}};
  const std::vector<Unary> expected{[](const Tensor& t) { return neg(t); },
                                    [](const Tensor& t) { return abs(t); },
                                    [](const Tensor& t) { return exp(t); },
                                    [](const Tensor& t) { return log(t); },
                                    [](const Tensor& t) { return sqrt(t); },
                                    [](const Tensor& t) { return rsqrt(t); },
                                    [](const Tensor& t) { return sin(t); },
                                    [](const Tensor& t) { return cos(t); },
                                    [](const Tensor& t) { return tanh(t); },
                                    [](const Tensor& t) { return sigmoid(t); },
                                    [](const Tensor& t) { return reciprocal(t); },
                                    [](const Tensor& t) { return square(t); },
                                    [](const Tensor& t) { return floor(t); },
                                    [](const Tensor& t) { return ceil(t); },
                                    [](const Tensor& t) { return round(t); },
                                    [](const Tensor& t) { return trunc(t); },
                                    [](const Tensor& t) { return relu(t); },
                                    [](const Tensor& t) { return pow(t, 1.5); },
                                    [](const Tensor& t) { return clamp(t, 0.3, 0.7); },
                                    [](const Tensor& t) { return clamp_min(t, 0.5); },
                                    [](const Tensor& t) { return clamp_max(t, 0.5); },
                                    [](const Tensor& t) {
                                      return clamp(t, full({5}, 0.4), full({4, 1}, 0.6));
                                    },
                                    [](const Tensor& t) { return clamp(t, full({5}, 0.4)); },
                                    [](const Tensor& t) { return lerp(t, ones({5}), 0.25); },
                                    [](const Tensor& t) {
                                      return lerp(t, ones({4, 5}), full({4, 1}, 0.75));
                                    },
                                    [](const Tensor& t) { return sub(t, ones({5}), 2); },
                                    [](const Tensor& t) { return sub(t, 1.0); },
                                    [](const Tensor& t) { return mul(t, 3.0); },
                                    [](const Tensor& t) { return div(t, 4.0); },
                                    [](const Tensor& t) { return div(t, 4.0); },
                                    [](const Tensor& t) { return add(t, 3.0); }};
  ASSERT_EQ(ops.size(), expected.size());
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const auto& [name, op] = ops[k];
    Tensor t = base.clone();
    const std::uint64_t version = t.version();
    const void* data = t.data_ptr();
    op(t);
    EXPECT_GT(t.version(), version) << name;
    EXPECT_EQ(t.data_ptr(), data) << name;
    expect_same(t, expected[k](base), name, 4.0);
    // Through a strided view: only the view's elements change.
    Tensor wide = base.t().contiguous().clone();
    Tensor view = wide.t();
    op(view);
    expect_same(wide.t(), expected[k](base), name + " through a transposed view", 4.0);
  }
  // Integral tensors: the rounding and clamp forms keep their values exact.
  Tensor i = from_vector<std::int64_t>({-5, 2, 9}, {3});
  i.clamp_(-1, 4).floor_().abs_().square_();
  EXPECT_EQ(i.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 4, 16}));
}

TEST(MathInplace, RecordsTheGradientOfTheOverwrittenValue) {
  // y = 2x, then y.sin_(): dy/dx = 2 cos(2x); the old y is needed by sin's backward and was overwritten.
  const Tensor x = leaf(uni({3, 4}, -1, 1));
  Tensor y = x * 2.0;
  y.sin_();
  y.sum().backward();
  expect_same(x.grad(), mul(cos(x.detach() * 2.0), 2.0), "sin_ gradient");
  // Through a view of a non-leaf: the base's history gains the op for the view's region.
  const Tensor w = leaf(uni({4, 5}, -2, 2));
  Tensor z = w * 1.0;
  z.slice(1, 1, 4).clamp_(-0.5, 0.5);
  z.sum().backward();
  const Tensor inside = logical_and(ge(w.detach(), -0.5), le(w.detach(), 0.5)).to(kFloat64);
  const Tensor mask = ones({4, 5}, kFloat64);
  mask.slice(1, 1, 4).copy_(inside.slice(1, 1, 4));
  expect_same(w.grad(), mask, "clamp_ through a view");
  // The tensor other operand of an in-place op gets its gradient too.
  const Tensor a = leaf(uni({3}, -1, 1)), e = leaf(uni({3}, -1, 1));
  Tensor acc = a * 1.0;
  acc.lerp_(e, 0.25);
  acc.sum().backward();
  expect_same(a.grad(), full({3}, 0.75, kFloat64), "lerp_ gradient of self");
  expect_same(e.grad(), full({3}, 0.25, kFloat64), "lerp_ gradient of end");
}

// ---- methods ---------------------------------------------------------------------------------------------------

TEST(MathMethods, MatchTheFreeFunctions) {
  const Tensor x = uni({3, 4}, 0.2, 0.9), y = uni({3, 4}, 0.2, 0.9), w = uni({4}, 0, 1);
  const std::vector<std::pair<Tensor, Tensor>> pairs{
      {x.add(y), add(x, y)},
      {x.add(y, 2), add(x, y, 2)},
      {x.add(2, 3), add(x, 6.0)},
      {x.sub(y, 0.5), sub(x, y, 0.5)},
      {x.sub(1, 2), sub(x, 2.0)},
      {x.mul(y), mul(x, y)},
      {x.mul(3), mul(x, 3)},
      {x.div(y), div(x, y)},
      {x.div(2), div(x, 2)},
      {x.floor_divide(y), floor_divide(x, y)},
      {x.remainder(y), remainder(x, y)},
      {x.remainder(0.3), remainder(x, 0.3)},
      {x.fmod(y), fmod(x, y)},
      {x.fmod(0.3), fmod(x, 0.3)},
      {x.pow(y), pow(x, y)},
      {x.pow(2), pow(x, 2.0)},
      {x.maximum(y), maximum(x, y)},
      {x.minimum(y), minimum(x, y)},
      {x.atan2(y), atan2(x, y)},
      {x.hypot(y), hypot(x, y)},
      {x.lerp(y, 0.3), lerp(x, y, 0.3)},
      {x.lerp(y, w), lerp(x, y, w)},
      {x.neg(), neg(x)},
      {x.abs(), abs(x)},
      {x.sign(), sign(x)},
      {x.square(), square(x)},
      {x.sqrt(), sqrt(x)},
      {x.rsqrt(), rsqrt(x)},
      {x.reciprocal(), reciprocal(x)},
      {x.exp(), exp(x)},
      {x.exp2(), exp2(x)},
      {x.expm1(), expm1(x)},
      {x.log(), log(x)},
      {x.log2(), log2(x)},
      {x.log10(), log10(x)},
      {x.log1p(), log1p(x)},
      {x.sin(), sin(x)},
      {x.cos(), cos(x)},
      {x.tan(), tan(x)},
      {x.asin(), asin(x)},
      {x.acos(), acos(x)},
      {x.atan(), atan(x)},
      {x.sinh(), sinh(x)},
      {x.cosh(), cosh(x)},
      {x.tanh(), tanh(x)},
      {x.sigmoid(), sigmoid(x)},
      {x.relu(), relu(x)},
      {x.erf(), erf(x)},
      {x.erfc(), erfc(x)},
      {x.floor(), floor(x)},
      {x.ceil(), ceil(x)},
      {x.round(), round(x)},
      {x.round(1), round(x, 1)},
      {x.trunc(), trunc(x)},
      {x.clamp(0.4, 0.6), clamp(x, 0.4, 0.6)},
      {x.clamp(0.4), clamp(x, 0.4)},
      {x.clamp(std::nullopt, 0.6), clamp(x, std::nullopt, 0.6)},
      {x.clamp(y, w), clamp(x, y, w)},
      {x.clamp(y), clamp(x, y)},
      {x.clamp_min(0.5), clamp_min(x, 0.5)},
      {x.clamp_min(y), clamp_min(x, y)},
      {x.clamp_max(0.5), clamp_max(x, 0.5)},
      {x.clamp_max(y), clamp_max(x, y)},
      {x.isnan(), isnan(x)},
      {x.isinf(), isinf(x)},
      {x.isfinite(), isfinite(x)},
      {x.eq(y), eq(x, y)},
      {x.eq(0.5), eq(x, 0.5)},
      {x.ne(y), ne(x, y)},
      {x.ne(0.5), ne(x, 0.5)},
      {x.lt(y), lt(x, y)},
      {x.lt(0.5), lt(x, 0.5)},
      {x.le(y), le(x, y)},
      {x.le(0.5), le(x, 0.5)},
      {x.gt(y), gt(x, y)},
      {x.gt(0.5), gt(x, 0.5)},
      {x.ge(y), ge(x, y)},
      {x.ge(0.5), ge(x, 0.5)},
      {x.gt(0.5).logical_and(y.lt(0.5)), logical_and(gt(x, 0.5), lt(y, 0.5))},
      {x.gt(0.5).logical_or(y.lt(0.5)), logical_or(gt(x, 0.5), lt(y, 0.5))},
      {x.gt(0.5).logical_xor(y.lt(0.5)), logical_xor(gt(x, 0.5), lt(y, 0.5))},
      {x.gt(0.5).logical_not(), logical_not(gt(x, 0.5))}};
  for (std::size_t k = 0; k < pairs.size(); ++k)
    expect_same(pairs[k].first, pairs[k].second, "method " + std::to_string(k));
  // The compound assignments are the in-place ops.
  Tensor t = x.clone();
  t += y;
  t -= 0.5;
  t *= 2;
  t /= y;
  t *= w;
  t += 1;
  t /= 4;
  expect_same(t, div(add(mul(div(mul(sub(add(x, y), 0.5), 2.0), y), w), 1.0), 4.0), "compound assignments");
  // Integer scalars keep integer dtypes through the alpha forms.
  const Tensor i = from_vector<std::int64_t>({1, 2}, {2});
  EXPECT_EQ(i.add(2, 3).dtype(), kInt64);
  EXPECT_EQ(i.add(2, 3).to_vector<std::int64_t>(), (std::vector<std::int64_t>{7, 8}));
  EXPECT_EQ(i.sub(1, 2).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-1, 0}));
}

// ---- CPU vs GPU ----------------------------------------------------------------------------------------------

namespace {

struct DeviceCase {
  std::string name;
  Fn fn;
  int arity;
  double lo, hi;  // input domain (|x| >= lo with a random sign when `away`)
  bool away;
  std::vector<DType> dtypes;
  bool differentiable;
};

std::vector<DeviceCase> device_cases() {
  const std::vector<DType> floats{kFloat32, kFloat64, kBFloat16, kHalf};
  const std::vector<DType> floats_ints{kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32};
  const std::vector<DType> all{kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8, kBool};
  const auto u = [](Tensor (*f)(const Tensor&)) { return [f](const std::vector<Tensor>& in) { return f(in[0]); }; };
  return {
      {"sin", u(sin), 1, -3, 3, false, floats_ints, true},
      {"cos", u(cos), 1, -3, 3, false, floats_ints, true},
      {"tan", u(tan), 1, -1.2, 1.2, false, floats_ints, true},
      {"asin", u(asin), 1, -0.9, 0.9, false, floats, true},
      {"acos", u(acos), 1, -0.9, 0.9, false, floats, true},
      {"atan", u(atan), 1, -4, 4, false, floats_ints, true},
      {"sinh", u(sinh), 1, -3, 3, false, floats_ints, true},
      {"cosh", u(cosh), 1, -3, 3, false, floats_ints, true},
      {"erf", u(erf), 1, -2.5, 2.5, false, floats_ints, true},
      {"erfc", u(erfc), 1, -2.5, 2.5, false, floats_ints, true},
      {"exp2", u(exp2), 1, -3, 3, false, floats_ints, true},
      {"expm1", u(expm1), 1, -3, 3, false, floats_ints, true},
      {"log2", u(log2), 1, 0.2, 5, false, floats, true},
      {"log10", u(log10), 1, 0.2, 5, false, floats, true},
      {"log1p", u(log1p), 1, -0.8, 4, false, floats, true},
      {"rsqrt", u(rsqrt), 1, 0.2, 5, false, floats, true},
      {"reciprocal", u(reciprocal), 1, 0.3, 3, true, floats, true},
      {"square", u(square), 1, -3, 3, false, all, true},
      {"sign", u(sign), 1, 0.1, 3, true, all, true},
      {"abs", u(abs), 1, 0.1, 3, true, floats_ints, true},
      {"floor", u(floor), 1, -3, 3, false, floats_ints, true},
      {"ceil", u(ceil), 1, -3, 3, false, floats_ints, true},
      {"round", u(round), 1, -3, 3, false, floats_ints, true},
      {"trunc", u(trunc), 1, -3, 3, false, floats_ints, true},
      {"round(decimals=2)", [](const std::vector<Tensor>& in) { return round(in[0], 2); }, 1, -3, 3, false, floats,
       false},
      {"isnan", u(isnan), 1, -3, 3, false, all, false},
      {"isinf", u(isinf), 1, -3, 3, false, all, false},
      {"isfinite", u(isfinite), 1, -3, 3, false, all, false},
      {"clamp", [](const std::vector<Tensor>& in) { return clamp(in[0], 0, 2); }, 1, -3, 3, false, all, true},
      {"clamp_min", [](const std::vector<Tensor>& in) { return clamp_min(in[0], 1); }, 1, -3, 3, false, all, true},
      {"clamp_max", [](const std::vector<Tensor>& in) { return clamp_max(in[0], 1); }, 1, -3, 3, false, all, true},
      {"fmod(scalar)", [](const std::vector<Tensor>& in) { return fmod(in[0], 2); }, 1, -7, 7, false, floats_ints,
       true},
      {"atan2", [](const std::vector<Tensor>& in) { return atan2(in[0], in[1]); }, 2, 0.3, 2, true, floats_ints, true},
      {"hypot", [](const std::vector<Tensor>& in) { return hypot(in[0], in[1]); }, 2, 0.3, 2, true, floats, true},
      {"fmod", [](const std::vector<Tensor>& in) { return fmod(in[0], in[1]); }, 2, 1, 5, true, floats_ints, true},
      {"clamp(tensors)", [](const std::vector<Tensor>& in) { return clamp(in[0], in[1], in[2]); }, 3, -3, 3, false, all,
       true},
      {"clamp_min(tensor)", [](const std::vector<Tensor>& in) { return clamp_min(in[0], in[1]); }, 2, -3, 3, false,
       floats_ints, true},
      {"lerp(scalar)", [](const std::vector<Tensor>& in) { return lerp(in[0], in[1], 0.7); }, 2, -2, 2, false, floats,
       true},
      {"lerp(tensor)", [](const std::vector<Tensor>& in) { return lerp(in[0], in[1], in[2]); }, 3, -2, 2, false, floats,
       true},
  };
}

/// Random values of a device case's domain in dtype dt (whole numbers for integral dtypes, nonzero divisors).
Tensor device_values(const DeviceCase& c, DType dt, int k, const Shape& shape) {
  Tensor x = c.away ? away(shape, c.lo, c.hi) : uni(shape, c.lo, c.hi);
  if (!is_floating_point(dt)) {
    x = round(x);
    if (dt == kUInt8) x = abs(x);
    if (c.name.rfind("fmod", 0) == 0 && k == 1) x = add(abs(x), 1.0);
  }
  return x.to(dt);
}

/// The same view of base on either device: 0 as it is, 1 transposed, 2 every other column, 3 its first row
/// expanded over the rows.
Tensor view_of(const Tensor& base, int layout) {
  switch (layout) {
    case 1:
      return base.t();
    case 2:
      return base.slice(1, 0, base.size(1), 2);
    case 3:
      return base.slice(0, 0, 1).expand(base.sizes());
    default:
      return base;
  }
}

/// Runs case c with inputs of `shape` (views per `layout`; the last input of a binary case broadcast when
/// `broadcast`) on the CPU and the GPU, and compares the outputs and, for floating dtypes, the gradients.
void compare_devices(const DeviceCase& c, DType dt, const Shape& shape, int layout, bool broadcast) {
  const std::string what = c.name + " " + dtype_name(dt) + " " + shape_str(shape) + " layout " +
                           std::to_string(layout) + (broadcast ? " broadcast" : "");
  // The base each view is taken of: transposed layouts store the transpose, strided ones twice the columns.
  Shape base_shape = shape;
  if (layout == 1) base_shape = {shape[1], shape[0]};
  if (layout == 2) base_shape = {shape[0], 2 * shape[1]};
  std::vector<Tensor> cpu_in, gpu_in;
  const bool grads = c.differentiable && is_floating_point(dt);
  for (int k = 0; k < c.arity; ++k) {
    const bool last_broadcast = broadcast && k == c.arity - 1;
    const Tensor base = device_values(c, dt, k, last_broadcast ? Shape{shape.back()} : base_shape);
    Tensor on_cpu = grads ? leaf(base.clone().detach()) : base, on_gpu = grads ? leaf(base.cuda()) : base.cuda();
    cpu_in.push_back(on_cpu);
    gpu_in.push_back(on_gpu);
  }
  std::vector<Tensor> cpu_views, gpu_views;
  for (int k = 0; k < c.arity; ++k) {
    const bool last_broadcast = broadcast && k == c.arity - 1;
    cpu_views.push_back(last_broadcast ? cpu_in[k] : view_of(cpu_in[k], layout));
    gpu_views.push_back(last_broadcast ? gpu_in[k] : view_of(gpu_in[k], layout));
  }
  const Tensor y_cpu = c.fn(cpu_views), y_gpu = c.fn(gpu_views);
  ASSERT_TRUE(y_gpu.is_cuda()) << what;
  expect_same(y_gpu, y_cpu, what + " forward", 4.0);
  if (!grads || y_cpu.numel() == 0) return;
  const Tensor upstream = uni(y_cpu.sizes(), -1, 1, y_cpu.dtype());
  y_cpu.backward(upstream);
  y_gpu.backward(upstream.cuda());
  for (int k = 0; k < c.arity; ++k) {
    // A backward rule composes a few ops, each rounding on both devices.
    expect_same(gpu_in[k].grad(), cpu_in[k].grad(), what + " gradient of input " + std::to_string(k), 8.0);
  }
}

}  // namespace

TEST(MathGpu, MatchesTheCpuInEveryDtypeShapeAndLayout) {
  MINIDL_REQUIRE_GPU();
  for (const DeviceCase& c : device_cases()) {
    for (DType dt : c.dtypes) {
      for (const Shape& s : {Shape{37, 13}, Shape{0, 5}, Shape{1, 1}}) {
        for (int layout = 0; layout < 4; ++layout) compare_devices(c, dt, s, layout, false);
        if (c.arity > 1) compare_devices(c, dt, s, 0, true);
      }
      compare_devices(c, dt, Shape{}, 0, false);
      compare_devices(c, dt, Shape{1000, 33}, 0, false);  // enough packs for the wide accesses
    }
  }
}

TEST(MathGpu, InPlaceFormsMatchTheCpu) {
  MINIDL_REQUIRE_GPU();
  const Tensor base = uni({33, 17}, -2, 2, kFloat32);
  const std::vector<std::function<void(Tensor&)>> ops{
      [](Tensor& t) { t.clamp_(-0.5, 0.5); }, [](Tensor& t) { t.sin_(); }, [](Tensor& t) { t.floor_(); },
      [](Tensor& t) { t.lerp_(full({17}, 0.5, TensorOptions().device(t.device())), 0.3); },
      [](Tensor& t) {
        t.clamp_(full({17}, -0.5, TensorOptions().device(t.device())),
                 full({33, 1}, 0.5, TensorOptions().device(t.device())));
      }};
  for (std::size_t k = 0; k < ops.size(); ++k) {
    Tensor c = base.clone(), g = base.cuda();
    ops[k](c);
    ops[k](g);
    expect_same(g, c, "in-place op " + std::to_string(k), 4.0);
  }
}

// ---- bad input -----------------------------------------------------------------------------------------------

TEST(MathBadInput, TypedErrorsNameTheOpAndTheArgument) {
  const Tensor f = uni({3}, -1, 1, kFloat32), d = uni({3}, -1, 1, kFloat64);
  const Tensor i = from_vector<std::int64_t>({1, 2, 3}, {3}), b = i.to(kBool);
  EXPECT_ERROR(TypeError, floor(b), "floor", "bool");
  EXPECT_ERROR(TypeError, round(b), "round", "bool");
  EXPECT_ERROR(TypeError, abs(b), "abs", "bool");
  EXPECT_ERROR(TypeError, neg(b), "neg", "bool");
  EXPECT_ERROR(TypeError, round(i, 2), "round", "decimals", "int64");
  EXPECT_ERROR(TypeError, hypot(i, i), "hypot", "int64");
  EXPECT_ERROR(TypeError, fmod(b, b), "fmod", "bool");
  EXPECT_ERROR(TypeError, remainder(b, b), "remainder", "bool");
  EXPECT_ERROR(ValueError, fmod(i, 0), "fmod", "division by zero");
  EXPECT_ERROR(ValueError, fmod(i, from_vector<std::int64_t>({1, 0, 1}, {3})), "fmod", "division by zero");
  EXPECT_ERROR(TypeError, lerp(i, i, 0.5), "lerp", "self", "int64");
  EXPECT_ERROR(TypeError, lerp(f, d, 0.5), "lerp", "end", "float32", "float64");
  EXPECT_ERROR(TypeError, lerp(f, f, d), "lerp", "weight", "float64");
  EXPECT_ERROR(ValueError, lerp(f, uni({4}, 0, 1, kFloat32), 0.5), "lerp", "[3]", "[4]");
  EXPECT_ERROR(ValueError, lerp(f, f, uni({2, 4}, 0, 1, kFloat32)), "lerp", "[2, 4]");
  EXPECT_ERROR(ValueError, clamp(f), "clamp", "min", "max");
  EXPECT_ERROR(ValueError, clamp(f, std::optional<Scalar>(), std::nullopt), "clamp", "min", "max");
  EXPECT_ERROR(ValueError, clamp(f, Tensor(), Tensor()), "clamp", "min", "max");
  EXPECT_ERROR(ValueError, clamp(f, uni({4}, 0, 1), uni({3}, 0, 1)), "clamp", "[3]", "[4]");
  EXPECT_ERROR(ValueError, clamp(i.to(kUInt8), -1, 300), "clamp", "min", "uint8");
  EXPECT_ERROR(ValueError, clamp(i.to(kUInt8), 0, 300), "clamp", "max", "uint8");
  EXPECT_ERROR(ValueError, clamp(f.to(kHalf), 0, 70000), "clamp", "max", "float16");
  EXPECT_ERROR(ValueError, clamp_min(f, Tensor()), "clamp_min", "min");
  EXPECT_ERROR(ValueError, sin(Tensor()), "sin", "self");
  EXPECT_ERROR(ValueError, atan2(f, Tensor()), "atan2", "other");
  EXPECT_ERROR(ValueError, atan2(f, uni({2}, 0, 1)), "atan2", "[3]", "[2]");
  // In place: results that don't fit self's dtype, leaves that require grad, shapes that don't broadcast to self.
  Tensor ic = i.clone();
  EXPECT_ERROR(TypeError, ic.sin_(), "sin_", "float32", "int64");
  EXPECT_ERROR(TypeError, ic.clamp_(0.5), "clamp_", "float32", "int64");
  EXPECT_ERROR(TypeError, ic.div_(i), "div_", "float32", "int64");
  EXPECT_ERROR(TypeError, ic.div_(2), "div_", "int64");
  Tensor bc = b.clone();
  EXPECT_ERROR(TypeError, bc.square_(), "square_", "bool");
  EXPECT_ERROR(TypeError, bc.neg_(), "neg_", "bool");
  EXPECT_ERROR(TypeError, bc.sub_(b), "sub_", "bool");
  Tensor l = leaf(uni({3}, -1, 1));
  EXPECT_ERROR(AutogradError, l.exp_(), "exp_", "leaf");
  EXPECT_ERROR(AutogradError, l.clamp_(0, 1), "clamp_", "leaf");
  EXPECT_ERROR(AutogradError, l.lerp_(d, 0.5), "lerp_", "leaf");
  Tensor fc = f.clone();
  EXPECT_ERROR(ValueError, fc.clamp_(uni({2, 3}, 0, 1, kFloat32)), "clamp_", "[2, 3]", "[3]");
  EXPECT_ERROR(ValueError, fc.lerp_(uni({2, 3}, 0, 1, kFloat32), 0.5), "lerp_", "[2, 3]", "[3]");
  EXPECT_ERROR(TypeError, fc.lerp_(d, 0.5), "lerp_", "end", "float64");
}

TEST(MathBadInput, MixedDevicesAreTypeErrorsNamingTheOp) {
  MINIDL_REQUIRE_GPU();
  const Tensor c = uni({3}, -1, 1, kFloat32), g = c.cuda();
  EXPECT_ERROR(TypeError, atan2(c, g), "atan2", "device");
  EXPECT_ERROR(TypeError, clamp(c, g, g), "clamp", "device");
  EXPECT_ERROR(TypeError, lerp(c, g, 0.5), "lerp", "end");
  EXPECT_ERROR(TypeError, lerp(g, g, c), "lerp", "weight");
}
