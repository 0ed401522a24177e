// Every differentiable op in ops.h against finite differences (gradcheck: float64, CPU, central differences,
// every Jacobian element), including broadcast shapes, plus forward values of a few ops against plain loops.
// Inputs are fresh random values, kept where each op is smooth: away from the kinks of relu/abs/leaky_relu,
// from the poles of div/log, and without ties for max/maximum, so a step of eps never straddles a corner.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_close;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
using Make = std::function<Tensor(const Shape&)>;

Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}

std::vector<double> host_uniform(const Shape& s, double lo, double hi) {
  return uniform(s, lo, hi, kFloat64).to_vector<double>();
}

/// Uniform in [lo, hi), requiring grad.
Make uni(double lo = -1.0, double hi = 1.0) {
  return [lo, hi](const Shape& s) { return leaf(uniform(s, lo, hi, kFloat64)); };
}

/// |x| in [0.2, 1] with a random sign: the kink of relu/abs or the pole of 1/x is at least 0.2 away.
Tensor away_from_zero(const Shape& s) {
  std::vector<double> v = host_uniform(s, -1.0, 1.0);
  for (double& x : v) x = x >= 0 ? 0.2 + 0.8 * x : -0.2 + 0.8 * x;
  return leaf(from_vector(v, s));
}

/// A random permutation of evenly spaced values in [-1, 1]: no two elements within 2/numel of each other.
Tensor distinct(const Shape& s) {
  const std::vector<double> u = host_uniform(s, 0.0, 1.0);
  std::vector<std::size_t> order(u.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return u[a] < u[b]; });
  std::vector<double> v(u.size());
  for (std::size_t r = 0; r < order.size(); ++r) v[order[r]] = -1.0 + 2.0 * (r + 0.5) / static_cast<double>(u.size());
  return leaf(from_vector(v, s));
}

/// Random values on the grid 0.04*k (even) or 0.04*k + 0.02 (odd) in [-1, 1]: an even and an odd tensor never
/// come closer than 0.02, so maximum(even, odd) has no ties under any broadcasting.
Make grid(bool odd) {
  return [odd](const Shape& s) {
    std::vector<double> v = host_uniform(s, -25.0, 24.0);
    for (double& x : v) x = 0.04 * std::floor(x) + (odd ? 0.02 : 0.0);
    return leaf(from_vector(v, s));
  };
}

/// Runs gradcheck and reports its error message (which names input, element and both values) on failure.
void check(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs) {
  try {
    EXPECT_TRUE(gradcheck(fn, inputs)) << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

void check_unary(const std::string& what, const Unary& f, const Tensor& x) {
  check(what + " on " + shape_str(x.sizes()), [f](const std::vector<Tensor>& in) { return f(in[0]); }, {x});
}

std::string pair_str(const Shape& a, const Shape& b) { return shape_str(a) + " with " + shape_str(b); }

/// Operand shapes of the binary-op cases: equal, every kind of broadcast of either side, 0-d and [1].
const std::vector<std::pair<Shape, Shape>>& binary_shapes() {
  static const std::vector<std::pair<Shape, Shape>> shapes{
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {1, 3, 1}},
      {{2, 3, 4}, {1}},       {{2, 3, 4}, {}},     {{3, 1}, {2, 3, 4}}, {{}, {2, 3, 4}},
      {{3, 1}, {1, 4}},       {{1}, {}},           {{}, {}},            {{1, 3, 1}, {2, 1, 4}},
      // a block of at least 16 repeated along the leading dims: the CPU runs it block by block
      {{2, 3, 16}, {16}},     {{1, 3, 16}, {2, 3, 16}}};
  return shapes;
}

struct BinaryCase {
  std::string name;
  Binary fn;
  Make lhs, rhs;
};

std::vector<BinaryCase> binary_cases() {
  const Make positive = uni(0.5, 2.0);
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, uni(), uni()},
      {"add(alpha=-2.5)", [](const Tensor& a, const Tensor& b) { return add(a, b, -2.5); }, uni(), uni()},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, uni(), uni()},
      {"sub(alpha=0.5)", [](const Tensor& a, const Tensor& b) { return sub(a, b, 0.5); }, uni(), uni()},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, uni(), uni()},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, uni(), away_from_zero},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, positive, uni(-2.0, 2.0)},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, grid(false), grid(true)},
      {"maximum(reversed)", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, grid(true), grid(false)},
  };
}

}  // namespace

// ---- elementwise -------------------------------------------------------------------------------------------

TEST(OpsGradcheck, BinaryOpsWithEveryBroadcast) {
  for (const BinaryCase& c : binary_cases()) {
    for (const auto& [sa, sb] : binary_shapes()) {
      check(c.name + " " + pair_str(sa, sb), [f = c.fn](const std::vector<Tensor>& in) { return f(in[0], in[1]); },
            {c.lhs(sa), c.rhs(sb)});
    }
  }
}

TEST(OpsGradcheck, BinaryOpsWithOnlyOneOperandRequiringGrad) {
  for (const BinaryCase& c : binary_cases()) {
    for (const auto& [sa, sb] : {std::pair<Shape, Shape>{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{1, 3}, {2, 1}}}) {
      const Fn f = [f = c.fn](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
      check(c.name + " (lhs only) " + pair_str(sa, sb), f, {c.lhs(sa), c.rhs(sb).detach()});
      check(c.name + " (rhs only) " + pair_str(sa, sb), f, {c.lhs(sa).detach(), c.rhs(sb)});
    }
  }
}

TEST(OpsGradcheck, BinaryOpsWithTheSameTensorOnBothSides) {
  const Tensor x = uni(0.5, 2.0)({2, 3});
  check("x + x", [](const std::vector<Tensor>& in) { return add(in[0], in[0], 3.0); }, {x});
  check("x - x*0.5", [](const std::vector<Tensor>& in) { return sub(in[0], in[0], 0.5); }, {x});
  check("x * x", [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {x});
  check("x / (x + 1)", [](const std::vector<Tensor>& in) { return div(in[0], in[0] + 1.0); }, {x});
  check("x ^ x", [](const std::vector<Tensor>& in) { return pow(in[0], in[0]); }, {x});
}

TEST(OpsGradcheck, UnaryOps) {
  const Make positive = uni(0.5, 2.0);
  struct Case {
    std::string name;
    Unary fn;
    Make input;
  };
  const std::vector<Case> cases{
      {"neg", [](const Tensor& a) { return neg(a); }, uni()},
      {"exp", [](const Tensor& a) { return exp(a); }, uni(-2.0, 2.0)},
      {"log", [](const Tensor& a) { return log(a); }, positive},
      {"sqrt", [](const Tensor& a) { return sqrt(a); }, positive},
      {"abs", [](const Tensor& a) { return abs(a); }, away_from_zero},
      {"relu", [](const Tensor& a) { return relu(a); }, away_from_zero},
      {"leaky_relu", [](const Tensor& a) { return leaky_relu(a); }, away_from_zero},
      {"leaky_relu(0.2)", [](const Tensor& a) { return leaky_relu(a, 0.2); }, away_from_zero},
      {"gelu", [](const Tensor& a) { return gelu(a); }, uni(-3.0, 3.0)},
      {"sigmoid", [](const Tensor& a) { return sigmoid(a); }, uni(-4.0, 4.0)},
      {"tanh", [](const Tensor& a) { return tanh(a); }, uni(-2.0, 2.0)},
      {"add(scalar)", [](const Tensor& a) { return add(a, 1.5); }, uni()},
      {"mul(scalar)", [](const Tensor& a) { return mul(a, -0.75); }, uni()},
      {"pow(2)", [](const Tensor& a) { return pow(a, 2.0); }, uni()},
      {"pow(3)", [](const Tensor& a) { return pow(a, 3.0); }, uni()},
      {"pow(0.5)", [](const Tensor& a) { return pow(a, 0.5); }, positive},
      {"pow(-1.5)", [](const Tensor& a) { return pow(a, -1.5); }, positive},
      {"2 / x", [](const Tensor& a) { return 2.0 / a; }, positive},
      {"1 - x", [](const Tensor& a) { return 1.0 - a; }, uni()},
      {"x / 4", [](const Tensor& a) { return a / 4.0; }, uni()},
      {"method exp", [](const Tensor& a) { return a.exp(); }, uni()},
      {"method log", [](const Tensor& a) { return a.log(); }, positive},
      {"method sqrt", [](const Tensor& a) { return a.sqrt(); }, positive},
      {"method pow", [](const Tensor& a) { return a.pow(1.7); }, positive},
      {"method relu", [](const Tensor& a) { return a.relu(); }, away_from_zero},
      {"method sigmoid", [](const Tensor& a) { return a.sigmoid(); }, uni()},
      {"method tanh", [](const Tensor& a) { return a.tanh(); }, uni()},
  };
  for (const Case& c : cases) {
    for (const Shape& s : {Shape{3, 5}, Shape{1}, Shape{}}) check_unary(c.name, c.fn, c.input(s));
  }
}

TEST(OpsGradcheck, SaturatedSigmoidAndTanhStayFinite) {
  // Far in the tails the derivative underflows towards 0; both sides must agree there too.
  const Tensor x = leaf(from_vector(std::vector<double>{-30.0, -12.0, 12.0, 30.0}, {4}));
  check_unary("sigmoid tails", [](const Tensor& a) { return sigmoid(a); }, x);
  check_unary("tanh tails", [](const Tensor& a) { return tanh(a); }, x);
}

// ---- matmul ------------------------------------------------------------------------------------------------

TEST(OpsGradcheck, Matmul) {
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{3, 4}, {4, 5}},          {{1, 4}, {4, 1}},       {{4, 1}, {1, 3}},          // 2-D, incl. outer product
      {{2, 3, 4}, {2, 4, 5}},    {{1, 3, 4}, {1, 4, 2}},                            // batched, batch 1
      {{2, 2, 3, 4}, {2, 2, 4, 3}},                                                 // two batch dims
      {{2, 3, 4}, {4, 5}},       {{1, 1, 4}, {4, 3}},    {{2, 2, 3, 4}, {4, 2}}};   // batched · 2-D
  for (const auto& [sa, sb] : shapes) {
    const Fn f = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    check("matmul " + pair_str(sa, sb), f, {uni()(sa), uni()(sb)});
    check("matmul (lhs only) " + pair_str(sa, sb), f, {uni()(sa), uni()(sb).detach()});
    check("matmul (rhs only) " + pair_str(sa, sb), f, {uni()(sa).detach(), uni()(sb)});
  }
  check("method matmul", [](const std::vector<Tensor>& in) { return in[0].matmul(in[1]); }, {uni()({3, 2}), uni()({2, 4})});
  check("x · x", [](const std::vector<Tensor>& in) { return matmul(in[0], in[0]); }, {uni()({3, 3})});
}

// ---- shape ops ---------------------------------------------------------------------------------------------

TEST(OpsGradcheck, Transpose) {
  const Tensor x3 = uni()({2, 3, 4}), x4 = uni()({2, 3, 1, 5});
  for (const auto& [d0, d1] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {0, 1}, {1, 0}, {0, 2}, {1, 2}, {-1, -3}, {-2, 2}, {1, 1}}) {
    check_unary("transpose(" + std::to_string(d0) + ", " + std::to_string(d1) + ")",
                [d0 = d0, d1 = d1](const Tensor& a) { return transpose(a, d0, d1); }, x3);
  }
  for (const auto& [d0, d1] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 3}, {0, -1}, {2, 3}}) {
    check_unary("transpose(" + std::to_string(d0) + ", " + std::to_string(d1) + ")",
                [d0 = d0, d1 = d1](const Tensor& a) { return a.transpose(d0, d1); }, x4);
  }
  check_unary("t()", [](const Tensor& a) { return a.t(); }, uni()({3, 5}));
}

TEST(OpsGradcheck, ReshapeFlattenUnsqueezeSqueeze) {
  const Tensor x = uni()({2, 3, 4});
  const std::vector<std::pair<std::string, Unary>> views{
      {"reshape {-1}", [](const Tensor& a) { return reshape(a, {-1}); }},
      {"reshape {4, -1}", [](const Tensor& a) { return reshape(a, {4, -1}); }},
      {"reshape {3, 2, 1, 4}", [](const Tensor& a) { return a.reshape({3, 2, 1, 4}); }},
      {"view {6, 4}", [](const Tensor& a) { return a.view({6, 4}); }},
      {"flatten", [](const Tensor& a) { return flatten(a); }},
      {"flatten(1)", [](const Tensor& a) { return flatten(a, 1); }},
      {"flatten(0, 1)", [](const Tensor& a) { return a.flatten(0, 1); }},
      {"flatten(-2, -1)", [](const Tensor& a) { return a.flatten(-2, -1); }},
      {"unsqueeze(0)", [](const Tensor& a) { return a.unsqueeze(0); }},
      {"unsqueeze(-1)", [](const Tensor& a) { return a.unsqueeze(-1); }},
      {"unsqueeze(2)", [](const Tensor& a) { return a.unsqueeze(2); }},
      {"unsqueeze(1).squeeze(1)", [](const Tensor& a) { return a.unsqueeze(1).squeeze(1); }},
      {"squeeze of a non-1 dim", [](const Tensor& a) { return a.squeeze(0); }},
      // A view followed by an op that reads it: the gradient must reach the original storage's shape.
      {"reshape then exp", [](const Tensor& a) { return a.reshape({4, 6}).exp(); }},
      {"clone then square", [](const Tensor& a) { return a.clone() * a; }},
  };
  for (const auto& [name, f] : views) check_unary(name, f, x);
  check_unary("squeeze(-1) of [3, 1]", [](const Tensor& a) { return a.squeeze(-1); }, uni()({3, 1}));
  check_unary("flatten of 0-d", [](const Tensor& a) { return a.flatten(); }, uni()({}));
  check_unary("reshape 0-d to {1, 1}", [](const Tensor& a) { return a.reshape({1, 1}); }, uni()({}));
}

// ---- reductions --------------------------------------------------------------------------------------------

TEST(OpsGradcheck, SumAndMeanOverVariousDims) {
  const Tensor x = uni()({2, 3, 4});
  const std::vector<std::vector<std::int64_t>> dim_lists{{}, {0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {-3, -2}, {0, 1, 2}};
  for (const auto& dims : dim_lists) {
    for (bool keepdim : {false, true}) {
      std::string tag = "dims {";
      for (auto d : dims) tag += std::to_string(d) + ",";
      tag += keepdim ? "} keepdim" : "}";
      check_unary("sum " + tag, [dims = dims, keepdim](const Tensor& a) { return sum(a, dims, keepdim); }, x);
      check_unary("mean " + tag, [dims = dims, keepdim](const Tensor& a) { return mean(a, dims, keepdim); }, x);
    }
  }
  check_unary("sum()", [](const Tensor& a) { return a.sum(); }, x);
  check_unary("mean()", [](const Tensor& a) { return a.mean(); }, x);
  check_unary("sum({1}, true) method", [](const Tensor& a) { return a.sum({1}, true); }, x);
  check_unary("mean({0, 2}) method", [](const Tensor& a) { return a.mean({0, 2}); }, x);
  check_unary("sum over size-1 dims", [](const Tensor& a) { return sum(a, {0, 2}); }, uni()({1, 3, 1}));
  check_unary("sum of 0-d", [](const Tensor& a) { return a.sum(); }, uni()({}));
  check_unary("mean of [1]", [](const Tensor& a) { return a.mean(); }, uni()({1}));
}

TEST(OpsGradcheck, MaxOverADim) {
  const Tensor x = distinct({2, 3, 4});
  for (std::int64_t d : {0, 1, 2, -1, -3}) {
    for (bool keepdim : {false, true}) {
      check_unary("max(" + std::to_string(d) + (keepdim ? ", keepdim)" : ")"),
                  [d, keepdim](const Tensor& a) { return std::get<0>(max(a, d, keepdim)); }, x);
    }
  }
  check_unary("max() of all", [](const Tensor& a) { return a.max(); }, x);
  check_unary("method max(1)", [](const Tensor& a) { return std::get<0>(a.max(1)); }, x);
  check_unary("max over a size-1 dim", [](const Tensor& a) { return std::get<0>(max(a, 1)); }, distinct({3, 1, 2}));
  check_unary("max of 0-d", [](const Tensor& a) { return std::get<0>(max(a, 0)); }, uni()({}));
}

TEST(OpsGradcheck, SumTo) {
  const Tensor x = uni()({2, 3, 4});
  for (const Shape& target : {Shape{3, 1}, Shape{4}, Shape{1, 3, 1}, Shape{1}, Shape{}, Shape{2, 3, 4},
                              Shape{2, 1, 4}, Shape{3, 4}, Shape{1, 1, 1}}) {
    check_unary("sum_to " + shape_str(target), [target](const Tensor& a) { return sum_to(a, target); }, x);
  }
}

// ---- softmax -----------------------------------------------------------------------------------------------

TEST(OpsGradcheck, SoftmaxAndLogSoftmaxOverEveryDim) {
  const Tensor x = uni(-3.0, 3.0)({2, 3, 4});
  for (std::int64_t d : {0, 1, 2, -1, -2, -3}) {
    check_unary("softmax(" + std::to_string(d) + ")", [d](const Tensor& a) { return softmax(a, d); }, x);
    check_unary("log_softmax(" + std::to_string(d) + ")", [d](const Tensor& a) { return log_softmax(a, d); }, x);
  }
  check_unary("softmax over a size-1 dim", [](const Tensor& a) { return softmax(a, 1); }, uni()({3, 1}));
  check_unary("log_softmax of [1, 5]", [](const Tensor& a) { return log_softmax(a, -1); }, uni()({1, 5}));
}

// ---- compositions ------------------------------------------------------------------------------------------

TEST(OpsGradcheck, SmallNetworkEndToEnd) {
  // Two linear layers with broadcast biases, gelu, log_softmax and a mean: every input gets gradients through
  // several ops, with fan-out (h is used twice).
  const Tensor x = uni()({1, 3, 4}), w1 = uni()({4, 5}), b1 = uni()({5}), w2 = uni()({5, 3}), b2 = uni()({1, 3});
  check("mlp", [](const std::vector<Tensor>& in) {
    const Tensor h = gelu(matmul(in[0], in[1]) + in[2]);
    const Tensor logits = matmul(h * sigmoid(h), in[3]) + in[4];
    return mean(log_softmax(logits, -1), {0, 1});
  }, {x, w1, b1, w2, b2});
}

// ---- forward values against plain loops --------------------------------------------------------------------

TEST(OpsForward, MatmulMatchesLoops) {
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{
           {{3, 4}, {4, 5}}, {{2, 3, 4}, {2, 4, 5}}, {{2, 3, 4}, {4, 5}}, {{1, 1, 7}, {7, 2}}}) {
    SCOPED_TRACE(pair_str(sa, sb));
    const Tensor a = uniform(sa, -1, 1, kFloat64), b = uniform(sb, -1, 1, kFloat64);
    const std::int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
    const std::int64_t batch = shape_numel(sa) / (m * k);
    const bool shared_b = sb.size() == 2;
    const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
    std::vector<double> want(static_cast<std::size_t>(batch * m * n));
    for (std::int64_t p = 0; p < batch; ++p)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::int64_t q = 0; q < k; ++q) s += av[(p * m + i) * k + q] * bv[((shared_b ? 0 : p) * k + q) * n + j];
          want[(p * m + i) * n + j] = s;
        }
    Shape out_shape(sa.begin(), sa.end() - 1);
    out_shape.push_back(n);
    expect_close(matmul(a, b), from_vector(want, out_shape), 1e-12, 1e-12, "matmul");
  }
}

TEST(OpsForward, SoftmaxMatchesLoopsOverEveryDim) {
  const Shape s{2, 3, 4};
  const Tensor x = uniform(s, -5, 5, kFloat64);
  const auto xv = x.to_vector<double>();
  for (std::int64_t d = 0; d < 3; ++d) {
    const std::int64_t outer = d == 0 ? 1 : (d == 1 ? 2 : 6), n = s[static_cast<std::size_t>(d)];
    const std::int64_t inner = 24 / (outer * n);
    std::vector<double> want(24), want_log(24);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        double total = 0;
        for (std::int64_t r = 0; r < n; ++r) total += std::exp(xv[(o * n + r) * inner + i]);
        for (std::int64_t r = 0; r < n; ++r) {
          const auto q = static_cast<std::size_t>((o * n + r) * inner + i);
          want[q] = std::exp(xv[q]) / total;
          want_log[q] = xv[q] - std::log(total);
        }
      }
    expect_close(softmax(x, d), from_vector(want, s), 1e-12, 1e-14, "softmax dim " + std::to_string(d));
    expect_close(log_softmax(x, d), from_vector(want_log, s), 1e-12, 1e-12, "log_softmax dim " + std::to_string(d));
  }
}

TEST(OpsForward, SoftmaxIsStableForHugeLogits) {
  // Rows over the last dim (contiguous) and the same values over dim 0 (strided), in both dtypes.
  const std::vector<double> logits{1000.0, -1000.0, 1000.0, 0.0};
  const std::vector<double> want{0.5, 0.0, 0.5, 0.0};
  const double l2 = std::log(2.0);
  const std::vector<double> want_log{-l2, -2000.0 - l2, -l2, -1000.0 - l2};
  for (DType dt : {kFloat64, kFloat32}) {
    for (std::int64_t dim : {1, 0}) {
      const Shape s = dim == 1 ? Shape{1, 4} : Shape{4, 1};
      const Tensor x = from_vector(logits, s, TensorOptions(dt));
      const std::string what = std::string(dtype_name(dt)) + " dim " + std::to_string(dim);
      const auto y = softmax(x, dim).to(kFloat64).to_vector<double>();
      const auto ly = log_softmax(x, dim).to(kFloat64).to_vector<double>();
      for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(y[i], want[i]) << what << " softmax element " << i;  // exact: exp(0)/2 and underflow to 0
        EXPECT_TRUE(std::isfinite(ly[i])) << what << " log_softmax element " << i;
        const double rel = dt == kFloat64 ? 1e-14 : 1e-6;  // a few units of roundoff of the dtype
        EXPECT_NEAR(ly[i], want_log[i], rel * (std::fabs(want_log[i]) + 1.0)) << what << " log_softmax element " << i;
      }
    }
  }
  // The gradient is finite as well.
  Tensor x = leaf(from_vector(logits, {4}));
  log_softmax(x, 0).backward(from_vector(std::vector<double>{1.0, -1.0, 0.5, 2.0}, {4}));
  for (double g : x.grad().to_vector<double>()) EXPECT_TRUE(std::isfinite(g));
}

TEST(OpsForward, ElementwiseMatchesStdMath) {
  const Tensor x = uniform({3, 7}, -3, 3, kFloat64);
  const auto xv = x.to_vector<double>();
  const std::vector<std::pair<Unary, std::function<double(double)>>> cases{
      {[](const Tensor& a) { return gelu(a); }, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {[](const Tensor& a) { return sigmoid(a); }, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {[](const Tensor& a) { return tanh(a); }, [](double v) { return std::tanh(v); }},
      {[](const Tensor& a) { return leaky_relu(a, 0.1); }, [](double v) { return v > 0 ? v : 0.1 * v; }},
      {[](const Tensor& a) { return relu(a); }, [](double v) { return v > 0 ? v : 0.0; }},
      {[](const Tensor& a) { return abs(a); }, [](double v) { return std::fabs(v); }},
      {[](const Tensor& a) { return pow(abs(a), 1.5); }, [](double v) { return std::pow(std::fabs(v), 1.5); }},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    std::vector<double> want(xv.size());
    std::transform(xv.begin(), xv.end(), want.begin(), cases[c].second);
    expect_close(cases[c].first(x), from_vector(want, {3, 7}), 1e-14, 1e-15, "case " + std::to_string(c));
  }
}

TEST(OpsForward, BroadcastBinaryMatchesLoops) {
  const Tensor a = uniform({2, 3, 4}, -1, 1, kFloat64), b = uniform({3, 1}, 0.5, 2, kFloat64);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> sub_want(24), div_want(24), pow_want(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        const int q = (i * 3 + j) * 4 + k;
        sub_want[q] = bv[j] - 0.5 * av[q];
        div_want[q] = av[q] / bv[j];
        pow_want[q] = std::pow(bv[j], av[q]);
      }
  expect_close(sub(b, a, 0.5), from_vector(sub_want, {2, 3, 4}), 1e-15, 1e-15, "sub");
  expect_close(div(a, b), from_vector(div_want, {2, 3, 4}), 1e-15, 1e-15, "div");
  expect_close(pow(b, a), from_vector(pow_want, {2, 3, 4}), 1e-15, 1e-15, "pow");
  // A row of 16 repeated along the leading dims, on either side (the CPU's per-row path).
  const Tensor x = uniform({3, 2, 16}, -1, 1, kFloat64), row = uniform({1, 16}, 0.5, 2, kFloat64);
  const auto xv = x.to_vector<double>(), rv = row.to_vector<double>();
  std::vector<double> x_minus_row(96), row_over_x(96);
  for (int q = 0; q < 96; ++q) {
    x_minus_row[q] = xv[q] - 0.5 * rv[q % 16];
    row_over_x[q] = rv[q % 16] / xv[q];
  }
  expect_close(sub(x, row, 0.5), from_vector(x_minus_row, {3, 2, 16}), 1e-15, 1e-15, "sub, row on the right");
  expect_close(div(row, x), from_vector(row_over_x, {3, 2, 16}), 1e-15, 1e-15, "div, row on the left");
}

TEST(OpsForward, SumAndMaxOverAMiddleDimMatchLoops) {
  const Tensor x = uniform({3, 5, 2}, -1, 1, kFloat64);
  const auto xv = x.to_vector<double>();
  std::vector<double> sums(6), maxes(6);
  std::vector<std::int64_t> args(6);
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 2; ++i) {
      double s = 0, m = -std::numeric_limits<double>::infinity();
      std::int64_t arg = 0;
      for (int r = 0; r < 5; ++r) {
        const double v = xv[(o * 5 + r) * 2 + i];
        s += v;
        if (v > m) {
          m = v;
          arg = r;
        }
      }
      sums[o * 2 + i] = s;
      maxes[o * 2 + i] = m;
      args[o * 2 + i] = arg;
    }
  expect_close(sum(x, {1}), from_vector(sums, {3, 2}), 1e-14, 1e-15, "sum");
  expect_close(mean(x, {1}, true), from_vector(sums, {3, 1, 2}) * 0.2, 1e-14, 1e-15, "mean");
  expect_close(std::get<0>(max(x, 1)), from_vector(maxes, {3, 2}), 0, 0, "max");
  EXPECT_EQ(argmax(x, 1).to_vector<std::int64_t>(), args);
}

TEST(OpsForward, ArgmaxPicksTheFirstMaximumOnTies) {
  const Tensor x = from_vector(std::vector<double>{4, 3, 3, 2,  //
                                                   4, 5, 5, 5,  //
                                                   -1, 5, -1, -3},
                               {3, 4});
  const Tensor a1 = argmax(x, 1);
  EXPECT_EQ(a1.dtype(), kInt64);
  EXPECT_EQ(a1.sizes(), (Shape{3}));
  EXPECT_EQ(a1.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 1}));
  EXPECT_EQ(argmax(x, 0).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(argmax(x, -1, true).sizes(), (Shape{3, 1}));
  EXPECT_EQ(x.to(kFloat32).argmax(0, true).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 1, 1}));
  EXPECT_FALSE(argmax(leaf(x.clone()), 1).requires_grad());
  // max's gradient goes to that same first maximum.
  Tensor xg = leaf(x.clone());
  std::get<0>(max(xg, 1)).backward(from_vector(std::vector<double>{1, 2, 3}, {3}));
  EXPECT_EQ(xg.grad().to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0}));
}

TEST(OpsForward, EqComparesElementwiseWithBroadcast) {
  const Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 3, 3}, {2, 3});
  const Tensor b = from_vector(std::vector<double>{1, 0, 3, 5, 3, 2}, {2, 3});
  const Tensor e = eq(a, b);
  EXPECT_EQ(e.dtype(), kBool);
  EXPECT_EQ(e.to_vector<bool>(), (std::vector<bool>{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(eq(a, from_vector(std::vector<double>{3}, {1})).to_vector<bool>(), (std::vector<bool>{0, 0, 1, 0, 1, 1}));
  EXPECT_EQ(eq(a.to(kFloat32), b.to(kFloat32)).to_vector<bool>(), (std::vector<bool>{1, 0, 1, 0, 1, 0}));
  EXPECT_FALSE(eq(leaf(a.clone()), b).requires_grad());
  // Mixed dtypes compare in the promoted dtype.
  EXPECT_EQ(eq(a, b.to(kFloat32)).to_vector<bool>(), (std::vector<bool>{1, 0, 1, 0, 1, 0}));
}

TEST(OpsForward, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({2, 3, 4}, {3, 1}, "t"), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 1}, "t"), (Shape{2, 1}));
  EXPECT_EQ(broadcast_shapes({3, 1}, {1, 4}, "t"), (Shape{3, 4}));
  try {
    broadcast_shapes({2, 3}, {4}, "myop");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("myop"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
}

TEST(OpsForward, LargeInputsTakeTheThreadedPathsAndMatchLoops) {
  // Big enough that parallel_for and Eigen split the work over the pool (forced to 4 threads here).
  const int prev_threads = get_num_threads();
  set_num_threads(4);
  const std::int64_t A = 37, N = 129, C = 31;
  const Tensor x = uniform({A, N, C}, -2, 2, kFloat64), b = uniform({N, 1}, -1, 1, kFloat64);
  const auto xv = x.to_vector<double>(), bv = b.to_vector<double>();
  auto at = [&](std::int64_t a, std::int64_t n, std::int64_t c) { return xv[static_cast<std::size_t>((a * N + n) * C + c)]; };

  std::vector<double> mul_want(xv.size()), tr_want(xv.size());
  for (std::int64_t a = 0; a < A; ++a)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < C; ++c) {
        mul_want[static_cast<std::size_t>((a * N + n) * C + c)] = at(a, n, c) * bv[static_cast<std::size_t>(n)];
        tr_want[static_cast<std::size_t>((c * N + n) * A + a)] = at(a, n, c);
      }
  expect_close(mul(x, b), from_vector(mul_want, {A, N, C}), 0, 0, "broadcast mul");
  expect_close(transpose(x, 0, 2), from_vector(tr_want, {C, N, A}), 0, 0, "transpose");

  // Reductions and softmax over the middle dim (strided), and its backward from a random upstream gradient.
  const Tensor dy = uniform({A, N, C}, -1, 1, kFloat64);
  const auto dyv = dy.to_vector<double>();
  std::vector<double> sum_want(A * C), max_want(A * C), sm_want(xv.size()), dx_want(xv.size());
  std::vector<std::int64_t> arg_want(A * C);
  for (std::int64_t a = 0; a < A; ++a)
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0, m = at(a, 0, c), z = 0, dot = 0;
      std::int64_t arg = 0;
      for (std::int64_t n = 0; n < N; ++n) {
        s += at(a, n, c);
        if (at(a, n, c) > m) {
          m = at(a, n, c);
          arg = n;
        }
      }
      for (std::int64_t n = 0; n < N; ++n) z += std::exp(at(a, n, c) - m);
      for (std::int64_t n = 0; n < N; ++n) {
        const auto q = static_cast<std::size_t>((a * N + n) * C + c);
        sm_want[q] = std::exp(at(a, n, c) - m) / z;
        dot += sm_want[q] * dyv[q];
      }
      for (std::int64_t n = 0; n < N; ++n) {
        const auto q = static_cast<std::size_t>((a * N + n) * C + c);
        dx_want[q] = sm_want[q] * (dyv[q] - dot);
      }
      sum_want[static_cast<std::size_t>(a * C + c)] = s;
      max_want[static_cast<std::size_t>(a * C + c)] = m;
      arg_want[static_cast<std::size_t>(a * C + c)] = arg;
    }
  expect_close(sum(x, {1}), from_vector(sum_want, {A, C}), 1e-12, 1e-12, "sum");
  expect_close(std::get<0>(max(x, 1)), from_vector(max_want, {A, C}), 0, 0, "max");
  EXPECT_EQ(argmax(x, 1).to_vector<std::int64_t>(), arg_want);
  Tensor xg = leaf(x.clone());
  const Tensor y = softmax(xg, 1);
  expect_close(y, from_vector(sm_want, {A, N, C}), 1e-12, 1e-15, "softmax");
  y.backward(dy);
  expect_close(xg.grad(), from_vector(dx_want, {A, N, C}), 1e-10, 1e-14, "softmax backward");

  // A matmul large enough for Eigen's blocked, threaded contraction.
  const Tensor p = uniform({67, 129}, -1, 1, kFloat64), q = uniform({129, 45}, -1, 1, kFloat64);
  const auto pv = p.to_vector<double>(), qv = q.to_vector<double>();
  std::vector<double> mm_want(67 * 45);
  for (int i = 0; i < 67; ++i)
    for (int j = 0; j < 45; ++j) {
      double s = 0;
      for (int k = 0; k < 129; ++k) s += pv[i * 129 + k] * qv[k * 45 + j];
      mm_want[i * 45 + j] = s;
    }
  expect_close(matmul(p, q), from_vector(mm_want, {67, 45}), 1e-12, 1e-12, "matmul");
  set_num_threads(prev_threads);
}

TEST(OpsForward, Float32UniformStaysBelowItsUpperBound) {
  // With this seed the CPU generator's draw 7222 is 1 - 2.5e-8, which rounds to 1.0f: the float result must
  // still lie in [0, 1).
  manual_seed(686);
  const auto v = rand({7223}, kFloat32).to_vector<float>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    ASSERT_GE(v[i], 0.f) << "element " << i;
    ASSERT_LT(v[i], 1.f) << "element " << i;
  }
  manual_seed(686);
  for (float x : uniform({7223}, -3.0, 5.0, kFloat32).to_vector<float>()) ASSERT_LT(x, 5.f);
}
