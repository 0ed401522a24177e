// Reductions, scans, sorting and whole-tensor comparisons (include/minidl/reduction.h):
// - LibTorch's overloads compile and mean what they mean there (x.sum(1), auto [v, i] = x.max(1), x.var(1), ...);
// - float64 gradcheck on the CPU of every differentiable op, through contiguous, transposed, sliced and expanded
//   inputs, and the gradients PyTorch defines at ties and zeros;
// - every element against PyTorch (tests/golden/reduction_golden.json, from gen_reduction_golden.py), on the CPU
//   and on the GPU;
// - result dtypes, empty and 0-d tensors, NaN, long and strided inputs against plain loops;
// - the GPU against the CPU for every op and dtype, on shapes that take each kernel path (short and long rows,
//   narrow and wide strided slices, split slices, 50k-wide topk rows);
// - bad arguments: the typed error naming the op and the argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <tuple>
#include <typeinfo>
#include <vector>

#include "golden_file.h"
#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_close;
using json = nlohmann::json;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}

Tensor uni(const Shape& s, double lo = -1.0, double hi = 1.0, DType dt = kFloat64) {
  return uniform(s, lo, hi, TensorOptions(dt));
}

/// A random permutation of evenly spaced values in [-1, 1]: no ties, so maxima, orders and gradients are unique.
Tensor distinct(const Shape& s, DType dt = kFloat64) {
  const std::vector<double> u = uniform(s, 0.0, 1.0, kFloat64).to_vector<double>();
  std::vector<std::size_t> order(u.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return u[a] < u[b]; });
  std::vector<double> v(u.size());
  for (std::size_t r = 0; r < order.size(); ++r) v[order[r]] = -1.0 + 2.0 * (r + 0.5) / static_cast<double>(u.size());
  return from_vector(v, s, TensorOptions(dt));
}

/// Small integers 0..hi-1 (many ties), in dtype dt.
Tensor small_ints(const Shape& s, int hi, DType dt) {
  std::vector<double> v = uniform(s, 0.0, static_cast<double>(hi), kFloat64).to_vector<double>();
  for (double& x : v) x = std::floor(x);
  return from_vector(v, s, TensorOptions(dt));
}

template <class T>
std::vector<T> values_of(const Tensor& t) {
  return t.detach().cpu().contiguous().to_vector<T>();
}

/// expect_close that also matches equal infinities (as NaN with NaN): a logsumexp of -inf rows is -inf.
void expect_values(const Tensor& actual, const Tensor& expected, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const std::vector<double> a = values_of<double>(actual.to(kFloat64)), e = values_of<double>(expected.to(kFloat64));
  int failures = 0;
  for (std::size_t i = 0; i < a.size() && failures < 10; ++i) {
    const bool ok = a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i])) ||
                    std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]);
    if (!ok) {
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i];
      ++failures;
    }
  }
}

/// Runs gradcheck and reports its message on failure.
void check_grad(const std::string& what, const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  try {
    EXPECT_TRUE(gradcheck([f](const std::vector<Tensor>& in) { return f(in[0]); }, {leaf(x.detach().clone())})) << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

/// gradcheck of f at x, and through a transposed, a sliced and an expanded view (f sees the view).
void check_grad_views(const std::string& what, const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  check_grad(what, f, x);
  if (x.dim() < 2) return;
  const Shape& s = x.sizes();
  Shape ts = s;
  std::swap(ts[0], ts[1]);
  check_grad(
      what + " (transposed)", [f](const Tensor& a) { return f(a.transpose(0, 1)); },
      x.transpose(0, 1).contiguous().reshape(ts));
  Shape wide = s;
  wide.back() += 2;
  Tensor padded = uni(wide);
  {
    NoGradGuard ng;
    padded.narrow(-1, 1, s.back()).copy_(x);
  }
  const std::int64_t len = s.back();
  check_grad(
      what + " (sliced)", [f, len](const Tensor& a) { return f(a.narrow(-1, 1, len)); }, padded);
  Shape one = s;
  one[0] = 1;
  const Tensor row = x.narrow(0, 0, 1).contiguous().reshape(one);
  check_grad(
      what + " (expanded)", [f, s](const Tensor& a) { return f(a.expand(s)); }, row);
}

}  // namespace

// ---- LibTorch's overloads ---------------------------------------------------------------------------------

TEST(ReductionsApi, LibTorchCallsCompileAndMeanWhatTheyMeanThere) {
  const Tensor x = from_vector(std::vector<double>{1, 5, 3, 4, 2, 6}, {2, 3});
  EXPECT_EQ(values_of<double>(x.sum(1)), (std::vector<double>{9, 12}));
  EXPECT_EQ(x.sum({0, 1}, true).sizes(), (Shape{1, 1}));
  EXPECT_EQ(x.sum(kFloat32).dtype(), kFloat32);
  EXPECT_EQ(sum(x, 0, false, kFloat32).dtype(), kFloat32);
  EXPECT_EQ(x.mean(-1).sizes(), (Shape{2}));
  auto [values, indices] = x.max(1);
  EXPECT_EQ(values_of<double>(values), (std::vector<double>{5, 6}));
  EXPECT_EQ(values_of<std::int64_t>(indices), (std::vector<std::int64_t>{1, 2}));
  auto [mn, mi] = min(x, 0, true);
  EXPECT_EQ(mn.sizes(), (Shape{1, 3}));
  EXPECT_EQ(values_of<std::int64_t>(mi), (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ(x.max().item<double>(), 6);
  EXPECT_EQ(values_of<double>(x.max(from_vector(std::vector<double>{3}, {1}))),
            (std::vector<double>{3, 5, 3, 4, 3, 6}));
  EXPECT_EQ(x.argmax().item<std::int64_t>(), 5);
  EXPECT_EQ(x.argmin(1, true).sizes(), (Shape{2, 1}));
  // x.var(1) is over dim 1 (not unbiased = true), as LibTorch's C++-only int overload makes it.
  EXPECT_EQ(x.var(1).sizes(), (Shape{2}));
  EXPECT_EQ(var(x, 1).sizes(), (Shape{2}));
  EXPECT_EQ(x.var(std::int64_t{0}).sizes(), (Shape{3}));
  EXPECT_EQ(x.var(true).dim(), 0);
  EXPECT_DOUBLE_EQ(x.var(false).item<double>(), 35.0 / 12.0);
  EXPECT_DOUBLE_EQ(x.var().item<double>(), 3.5);
  EXPECT_DOUBLE_EQ(x.std({0, 1}, std::optional<Scalar>(0), false).item<double>(), std::sqrt(35.0 / 12.0));
  EXPECT_EQ(x.std(1, true, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(x.amax({0, 1}).dim(), 0);
  EXPECT_EQ(x.logsumexp(1).sizes(), (Shape{2}));
  EXPECT_DOUBLE_EQ(x.norm().item<double>(), std::sqrt(91.0));
  EXPECT_EQ(x.norm(1, {1}).sizes(), (Shape{2}));
  EXPECT_EQ(norm(x, INFINITY, {0}, true).sizes(), (Shape{1, 3}));
  EXPECT_EQ(x.prod(1).sizes(), (Shape{2}));
  EXPECT_EQ(x.cumsum(1).sizes(), (Shape{2, 3}));
  auto [tv, ti] = x.topk(2);
  EXPECT_EQ(values_of<double>(tv), (std::vector<double>{5, 3, 6, 4}));
  EXPECT_EQ(values_of<std::int64_t>(ti), (std::vector<std::int64_t>{1, 2, 2, 0}));
  auto [sv, si] = x.sort(/*stable=*/true, 1, true);
  EXPECT_EQ(values_of<double>(sv), (std::vector<double>{5, 3, 1, 6, 4, 2}));
  EXPECT_EQ(std::get<0>(x.sort(1)).sizes(), (Shape{2, 3}));
  EXPECT_EQ(values_of<std::int64_t>(x.argsort(1)), (std::vector<std::int64_t>{0, 2, 1, 1, 0, 2}));
  EXPECT_EQ(values_of<std::int64_t>(argsort(x, /*stable=*/true, 0, true)),
            (std::vector<std::int64_t>{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(values_of<std::int64_t>(std::get<1>(sort(x, std::nullopt, 0))),
            (std::vector<std::int64_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_TRUE(gt(x, 0).all().item<bool>());
  EXPECT_EQ(values_of<bool>(gt(x, 4).any(1)), (std::vector<bool>{true, true}));
  EXPECT_EQ(gt(x, 4).any({0, 1}, true).sizes(), (Shape{1, 1}));
  EXPECT_TRUE(x.allclose(x + 1e-9));
  EXPECT_TRUE(x.equal(x.clone()));
}

// ---- gradients (float64, finite differences) ----------------------------------------------------------------

TEST(ReductionsGrad, SumMeanOverDimListsAndViews) {
  const Tensor x = uni({3, 4, 5});
  for (const std::vector<std::int64_t>& dims :
       std::vector<std::vector<std::int64_t>>{{1}, {0, 2}, {-1}, {0, 1, 2}, {2, 0}}) {
    for (bool keep : {false, true}) {
      const std::string tag = std::to_string(dims.size()) + " dims" + (keep ? " keepdim" : "");
      check_grad_views(
          "sum " + tag, [dims, keep](const Tensor& a) { return sum(a, dims, keep); }, x);
      check_grad_views(
          "mean " + tag, [dims, keep](const Tensor& a) { return mean(a, dims, keep); }, x);
    }
  }
  check_grad(
      "sum()", [](const Tensor& a) { return a.sum(); }, x);
  check_grad(
      "mean of 0-d", [](const Tensor& a) { return a.mean(); }, uni({}));
}

TEST(ReductionsGrad, ProdAndCumprodAreExactWithZeros) {
  const Tensor x = uni({3, 4, 5}, 0.5, 1.5);
  for (std::int64_t d : {0, 1, 2}) {
    check_grad_views(
        "prod " + std::to_string(d), [d](const Tensor& a) { return prod(a, d); }, x);
    check_grad_views(
        "cumprod " + std::to_string(d), [d](const Tensor& a) { return cumprod(a, d); }, x);
  }
  check_grad(
      "prod()", [](const Tensor& a) { return a.prod(); }, x);
  // One zero, two zeros and none in the rows of a [4, 5] tensor.
  std::vector<double> v = uni({4, 5}, 0.5, 1.5).to_vector<double>();
  v[1] = v[7] = v[8] = v[15] = 0.0;
  const Tensor z = from_vector(v, {4, 5});
  check_grad(
      "prod with zeros", [](const Tensor& a) { return prod(a, 1, true); }, z);
  check_grad(
      "cumprod with zeros", [](const Tensor& a) { return cumprod(a, 1); }, z);
  check_grad(
      "cumprod with zeros over dim 0", [](const Tensor& a) { return cumprod(a, 0); }, z);
  Tensor zg = leaf(z.clone());
  prod(zg, 1).backward(ones({4}, kFloat64));
  const auto g = values_of<double>(zg.grad());
  // Row 0 has one zero at column 1: its gradient is the product of the others; the rest get 0.
  EXPECT_DOUBLE_EQ(g[1], v[0] * v[2] * v[3] * v[4]);
  EXPECT_EQ(g[0], 0.0);
  for (int c = 5; c < 10; ++c) EXPECT_EQ(g[c], 0.0) << c;  // two zeros: no gradient anywhere
}

TEST(ReductionsGrad, VarStdLogsumexpNorm) {
  const Tensor x = uni({3, 4, 5});
  for (double c : {0.0, 1.0, 2.0}) {
    const std::optional<Scalar> corr(c);
    check_grad_views(
        "var c" + std::to_string(c), [corr](const Tensor& a) { return var(a, {1}, corr); }, x);
    check_grad_views(
        "std c" + std::to_string(c),
        [corr](const Tensor& a) {
          return minidl::std(a, {0, 2}, corr, true);
        },
        x);
  }
  check_grad(
      "var()", [](const Tensor& a) { return a.var(); }, x);
  check_grad(
      "std unbiased false", [](const Tensor& a) { return a.std(false); }, x);
  check_grad_views(
      "logsumexp", [](const Tensor& a) { return logsumexp(a, {1}); }, uni({3, 4, 5}, -5, 5));
  check_grad(
      "logsumexp dims",
      [](const Tensor& a) {
        return logsumexp(a, {0, 2}, true);
      },
      x);
  // Away from zero (|x| >= 0.2) where sgn and |x|^p are smooth; distinct magnitudes with random signs, so the
  // inf norms have one winner.
  std::vector<double> v = distinct({4, 6}).to_vector<double>();
  const std::vector<double> sign = uni({4, 6}).to_vector<double>();
  for (std::size_t j = 0; j < v.size(); ++j) v[j] = (sign[j] >= 0 ? 1 : -1) * (0.2 + 0.4 * (v[j] + 1));
  const Tensor a = from_vector(v, {4, 6});
  for (double p : {2.0, 1.0, 3.0, 0.5, 1.5, kInf, -kInf}) {
    check_grad_views(
        "norm p=" + std::to_string(p), [p](const Tensor& t) { return norm(t, p, {1}); }, a);
  }
  check_grad(
      "norm()", [](const Tensor& t) { return t.norm(); }, a);
  check_grad(
      "norm over dims",
      [](const Tensor& t) {
        return norm(t, 3, {0, 1}, true);
      },
      a);
  Tensor ag = leaf(a.clone());
  norm(ag, 0, {1}).sum().backward();
  EXPECT_EQ(values_of<double>(ag.grad()), std::vector<double>(24, 0.0));
}

TEST(ReductionsGrad, SelectingReductionsSortAndTopk) {
  const Tensor x = distinct({3, 4, 5});
  for (std::int64_t d : {0, 1, 2, -1}) {
    for (bool keep : {false, true}) {
      check_grad_views(
          "max dim", [d, keep](const Tensor& a) { return std::get<0>(max(a, d, keep)); }, x);
      check_grad_views(
          "min dim", [d, keep](const Tensor& a) { return std::get<0>(min(a, d, keep)); }, x);
    }
    check_grad_views(
        "sort", [d](const Tensor& a) { return std::get<0>(sort(a, d)); }, x);
    check_grad_views(
        "sort descending", [d](const Tensor& a) { return std::get<0>(sort(a, d, true)); }, x);
    check_grad_views(
        "topk", [d](const Tensor& a) { return std::get<0>(topk(a, 2, d)); }, x);
    check_grad_views(
        "topk smallest", [d](const Tensor& a) { return std::get<0>(topk(a, 3, d, false, false)); }, x);
  }
  check_grad(
      "max()", [](const Tensor& a) { return a.max(); }, x);
  check_grad(
      "min()", [](const Tensor& a) { return a.min(); }, x);
  check_grad_views(
      "amax",
      [](const Tensor& a) {
        return amax(a, {0, 2});
      },
      x);
  check_grad_views(
      "amin", [](const Tensor& a) { return amin(a, {1}, true); }, x);
  check_grad(
      "max of 0-d", [](const Tensor& a) { return std::get<0>(max(a, 0)); }, uni({}));
  check_grad(
      "topk of 0-d", [](const Tensor& a) { return std::get<0>(topk(a, 1)); }, uni({}));
}

TEST(ReductionsGrad, CumsumAndViews) {
  const Tensor x = uni({3, 4, 5});
  for (std::int64_t d : {0, 1, 2, -1}) {
    check_grad_views(
        "cumsum " + std::to_string(d), [d](const Tensor& a) { return cumsum(a, d); }, x);
  }
  check_grad(
      "cumsum of 0-d", [](const Tensor& a) { return cumsum(a, 0); }, uni({}));
}

TEST(ReductionsGrad, TiesShareTheGradientEvenly) {
  // amax / amin and the all-element max / min split the gradient among tied elements (PyTorch); max over a dim
  // gives it to the first.
  const Tensor x = from_vector(std::vector<double>{2, 1, 2, 2, 0, 0, 1, 0}, {2, 4});
  Tensor a = leaf(x.clone());
  amax(a, {1}).backward(from_vector(std::vector<double>{3, 4}, {2}));
  EXPECT_EQ(values_of<double>(a.grad()), (std::vector<double>{1, 0, 1, 1, 0, 0, 4, 0}));
  Tensor b = leaf(x.clone());
  b.max().backward();
  EXPECT_EQ(values_of<double>(b.grad()), (std::vector<double>{1.0 / 3, 0, 1.0 / 3, 1.0 / 3, 0, 0, 0, 0}));
  Tensor c = leaf(x.clone());
  amin(c, {0, 1}).backward();
  EXPECT_EQ(values_of<double>(c.grad()), (std::vector<double>{0, 0, 0, 0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3}));
  Tensor d = leaf(x.clone());
  std::get<0>(max(d, 1)).backward(from_vector(std::vector<double>{3, 4}, {2}));
  EXPECT_EQ(values_of<double>(d.grad()), (std::vector<double>{3, 0, 0, 0, 0, 0, 4, 0}));
}

// ---- forward values ---------------------------------------------------------------------------------------

TEST(ReductionsForward, ResultDtypesFollowPyTorch) {
  for (DType dt : {kInt64, kInt32, kUInt8, kBool}) {
    const Tensor x = small_ints({3, 4}, 2, dt);
    EXPECT_EQ(x.sum().dtype(), kInt64) << dt;
    EXPECT_EQ(x.sum(1).dtype(), kInt64) << dt;
    EXPECT_EQ(x.prod(0).dtype(), kInt64) << dt;
    EXPECT_EQ(x.cumsum(1).dtype(), kInt64) << dt;
    EXPECT_EQ(x.cumprod(0).dtype(), kInt64) << dt;
    EXPECT_EQ(x.sum(1, false, dt).dtype(), dt) << dt;
    EXPECT_EQ(std::get<0>(x.max(1)).dtype(), dt) << dt;
    EXPECT_EQ(x.amin(0).dtype(), dt) << dt;
    EXPECT_EQ(std::get<0>(x.sort(1)).dtype(), dt) << dt;
    EXPECT_EQ(std::get<0>(x.topk(2)).dtype(), dt) << dt;
    EXPECT_EQ(x.argmax().dtype(), kInt64) << dt;
    EXPECT_EQ(x.any().dtype(), dt == kUInt8 ? kUInt8 : kBool) << dt;
    EXPECT_EQ(x.all(0).dtype(), dt == kUInt8 ? kUInt8 : kBool) << dt;
  }
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const Tensor x = uni({3, 4}, -1, 1, dt);
    for (const Tensor& r : {x.sum(1), x.mean(0), x.var(1), x.std(), x.logsumexp(1), x.norm(), x.prod(1), x.cumsum(0),
                            x.amax(1), std::get<0>(x.max(0))}) {
      EXPECT_EQ(r.dtype(), dt) << dt;
    }
    EXPECT_EQ(x.sum(kFloat64).dtype(), kFloat64) << dt;
  }
  EXPECT_EQ(small_ints({3}, 2, kInt32).mean(kFloat32).dtype(), kFloat32);
  // sum(dtype): the input converted first, the gradient back in the input's dtype.
  Tensor f = leaf(uni({3, 4}, -1, 1, kFloat32));
  const Tensor s = f.sum(1, false, kFloat64);
  EXPECT_EQ(s.dtype(), kFloat64);
  s.sum().backward();
  EXPECT_EQ(f.grad().dtype(), kFloat32);
  EXPECT_EQ(values_of<float>(f.grad()), std::vector<float>(12, 1.0f));
}

TEST(ReductionsForward, SixteenBitFloatsAccumulateInFloat32) {
  // 4096 values of 0.01 sum to 40.96; a bfloat16 accumulator would stall at 2 + a few ulps (its spacing at 2
  // is 1/64, so adding 0.01 rounds back).
  const Tensor x = full({4096}, 0.01, kBFloat16);
  EXPECT_NEAR(x.sum().item<float>(), 40.96, 0.3);
  EXPECT_NEAR(x.cumsum(0).to(kFloat32).to_vector<float>().back(), 40.96, 0.3);
  EXPECT_NEAR(full({4096}, 0.01, kHalf).sum().item<float>(), 40.96, 0.05);
  EXPECT_NEAR(full({4096, 2}, 0.01, kBFloat16).sum({0, 1}).item<float>(), 81.92, 0.6);
  EXPECT_NEAR(full({8, 512}, 3.0, kBFloat16).var().item<float>(), 0.0, 1e-6);
}

TEST(ReductionsForward, LongAndStridedInputsMatchLoops) {
  const std::int64_t A = 5, N = 1037, C = 7;
  const Tensor x = uni({A, N, C}, -2, 2);
  const auto xv = x.to_vector<double>();
  auto at = [&](std::int64_t a, std::int64_t n, std::int64_t c) {
    return xv[static_cast<std::size_t>((a * N + n) * C + c)];
  };
  std::vector<double> s(A * C), m(A * C), v(A * C), l(A * C), n2(A * C), mx(A * C), cs(xv.size()), cp(xv.size());
  std::vector<std::int64_t> am(A * C);
  for (std::int64_t a = 0; a < A; ++a)
    for (std::int64_t c = 0; c < C; ++c) {
      double sum = 0, sq = 0, best = -kInf, run = 0, prod = 1;
      std::int64_t arg = 0;
      for (std::int64_t k = 0; k < N; ++k) {
        sum += at(a, k, c);
        sq += at(a, k, c) * at(a, k, c);
        if (at(a, k, c) > best) {
          best = at(a, k, c);
          arg = k;
        }
        run += at(a, k, c);
        prod *= 1.0 + at(a, k, c) / 1000.0;
        cs[static_cast<std::size_t>((a * N + k) * C + c)] = run;
        cp[static_cast<std::size_t>((a * N + k) * C + c)] = prod;
      }
      const double mean = sum / N;
      double dev = 0, z = 0;
      for (std::int64_t k = 0; k < N; ++k) {
        dev += (at(a, k, c) - mean) * (at(a, k, c) - mean);
        z += std::exp(at(a, k, c) - best);
      }
      const auto j = static_cast<std::size_t>(a * C + c);
      s[j] = sum;
      m[j] = mean;
      v[j] = dev / (N - 1);
      l[j] = best + std::log(z);
      n2[j] = std::sqrt(sq);
      mx[j] = best;
      am[j] = arg;
    }
  expect_close(sum(x, {1}), from_vector(s, {A, C}), 1e-12, 1e-12, "sum");
  expect_close(mean(x, {1}), from_vector(m, {A, C}), 1e-12, 1e-12, "mean");
  expect_close(var(x, {1}), from_vector(v, {A, C}), 1e-10, 1e-12, "var");
  expect_close(logsumexp(x, {1}), from_vector(l, {A, C}), 1e-12, 1e-12, "logsumexp");
  expect_close(norm(x, 2, {1}), from_vector(n2, {A, C}), 1e-12, 1e-12, "norm");
  expect_close(amax(x, {1}), from_vector(mx, {A, C}), 0, 0, "amax");
  EXPECT_EQ(values_of<std::int64_t>(argmax(x, 1)), am);
  expect_close(cumsum(x, 1), from_vector(cs, {A, N, C}), 1e-11, 1e-11, "cumsum");
  expect_close(cumprod(add(mul(x, 1.0 / 1000.0), 1.0), 1), from_vector(cp, {A, N, C}), 1e-11, 1e-12, "cumprod");
  // The same through views: dim 1 of a permuted copy, and of a tensor sliced out of a wider one.
  const Tensor perm = x.permute({1, 0, 2}).contiguous().permute({1, 0, 2});
  expect_close(sum(perm, {1}), from_vector(s, {A, C}), 1e-12, 1e-12, "sum of a permuted view");
  expect_close(var(perm, {1}), from_vector(v, {A, C}), 1e-10, 1e-12, "var of a permuted view");
  Tensor wide = zeros({A, N, C + 3}, kFloat64);
  wide.narrow(2, 2, C).copy_(x);
  expect_close(logsumexp(wide.narrow(2, 2, C), {1}), from_vector(l, {A, C}), 1e-12, 1e-12, "logsumexp of a slice");
  expect_close(cumsum(wide.narrow(2, 2, C), 1), from_vector(cs, {A, N, C}), 1e-11, 1e-11, "cumsum of a slice");
  // Several separate runs of dims: {0, 2} (one pass per run for sum and max, a moved copy for var).
  double total = 0;
  for (double e : xv) total += e;
  std::vector<double> over02(N, 0.0), max02(N, -kInf);
  for (std::int64_t a = 0; a < A; ++a)
    for (std::int64_t k = 0; k < N; ++k)
      for (std::int64_t c = 0; c < C; ++c) {
        over02[static_cast<std::size_t>(k)] += at(a, k, c);
        max02[static_cast<std::size_t>(k)] = std::max(max02[static_cast<std::size_t>(k)], at(a, k, c));
      }
  expect_close(sum(x, {0, 2}), from_vector(over02, {N}), 1e-12, 1e-12, "sum over {0, 2}");
  expect_close(amax(x, {0, 2}, true), from_vector(max02, {1, N, 1}), 0, 0, "amax over {0, 2}");
  EXPECT_NEAR(x.sum().item<double>(), total, 1e-9);
}

TEST(ReductionsForward, EmptyAndZeroDimTensors) {
  const Tensor e = zeros({2, 0, 3}, kFloat64);
  EXPECT_EQ(e.sum(1).sizes(), (Shape{2, 3}));
  EXPECT_EQ(values_of<double>(e.sum(1)), std::vector<double>(6, 0.0));
  EXPECT_EQ(values_of<double>(e.prod(1)), std::vector<double>(6, 1.0));
  EXPECT_TRUE(std::isnan(e.mean().item<double>()));
  EXPECT_TRUE(std::isnan(e.var(1).to_vector<double>()[0]));
  EXPECT_EQ(values_of<double>(e.norm(2, {1})), std::vector<double>(6, 0.0));
  EXPECT_EQ(values_of<double>(e.logsumexp(1)), std::vector<double>(6, -kInf));
  EXPECT_EQ(e.sum(0).sizes(), (Shape{0, 3}));
  EXPECT_EQ(std::get<0>(e.max(0)).sizes(), (Shape{0, 3}));
  EXPECT_FALSE(e.any().item<bool>());
  EXPECT_TRUE(e.all().item<bool>());
  EXPECT_EQ(e.cumsum(1).sizes(), (Shape{2, 0, 3}));
  EXPECT_EQ(e.cumprod(0).sizes(), (Shape{2, 0, 3}));
  EXPECT_EQ(std::get<0>(e.sort(1)).sizes(), (Shape{2, 0, 3}));
  EXPECT_EQ(std::get<1>(e.topk(0, 1)).sizes(), (Shape{2, 0, 3}));
  EXPECT_EQ(std::get<0>(e.topk(2, 2)).sizes(), (Shape{2, 0, 2}));
  EXPECT_TRUE(equal(e, e.clone()));
  EXPECT_TRUE(allclose(e, e));
  const Tensor s = full({}, 2.5, kFloat64);
  EXPECT_EQ(s.sum().dim(), 0);
  EXPECT_EQ(s.sum(0).item<double>(), 2.5);
  EXPECT_EQ(s.sum(-1, true).dim(), 0);
  EXPECT_EQ(s.prod(0).item<double>(), 2.5);
  EXPECT_EQ(std::get<1>(s.max(0)).item<std::int64_t>(), 0);
  EXPECT_EQ(s.argmax().item<std::int64_t>(), 0);
  EXPECT_EQ(s.cumsum(0).dim(), 0);
  EXPECT_EQ(std::get<0>(s.sort()).item<double>(), 2.5);
  EXPECT_EQ(std::get<0>(s.topk(1)).item<double>(), 2.5);
  EXPECT_TRUE(std::isnan(s.var().item<double>()));
  EXPECT_EQ(s.var(false).item<double>(), 0.0);
  EXPECT_EQ(s.norm(1).item<double>(), 2.5);
  EXPECT_EQ(s.logsumexp(0).item<double>(), 2.5);
}

TEST(ReductionsForward, NaNPropagatesAndSortsLast) {
  const Tensor x = from_vector(std::vector<double>{1, kNan, 3, kNan, -2, 0.5}, {1, 6});
  auto [v, i] = x.max(1);
  EXPECT_TRUE(std::isnan(v.item<double>()));
  EXPECT_EQ(i.item<std::int64_t>(), 1);
  EXPECT_EQ(x.argmin(1).item<std::int64_t>(), 1);
  EXPECT_TRUE(std::isnan(x.amin().item<double>()));
  EXPECT_TRUE(std::isnan(x.norm(INFINITY).item<double>()));
  EXPECT_TRUE(std::isnan(x.logsumexp(1).item<double>()));
  EXPECT_EQ(values_of<std::int64_t>(x.argsort(1)), (std::vector<std::int64_t>{4, 5, 0, 2, 1, 3}));
  EXPECT_EQ(values_of<std::int64_t>(x.argsort(1, true)), (std::vector<std::int64_t>{1, 3, 2, 0, 5, 4}));
  EXPECT_EQ(values_of<std::int64_t>(std::get<1>(x.topk(3))), (std::vector<std::int64_t>{1, 3, 2}));
  EXPECT_TRUE(any(ne(x, x)).item<bool>());
  EXPECT_FALSE(equal(x, x));
  EXPECT_TRUE(allclose(x, x, 1e-5, 1e-8, true));
  EXPECT_FALSE(allclose(x, x));
  const Tensor inf = from_vector(std::vector<double>{kInf, 1, -kInf}, {3});
  EXPECT_TRUE(allclose(inf, inf));
  EXPECT_FALSE(allclose(inf, neg(inf)));
  EXPECT_EQ(inf.logsumexp(0).item<double>(), kInf);
  EXPECT_EQ(full({3}, -kInf, kFloat64).logsumexp(0).item<double>(), -kInf);
}

TEST(ReductionsForward, TopkTakesTiesAtTheLowerIndexAndSortIsStable) {
  const Tensor x = from_vector(std::vector<double>{2, 5, 2, 5, 1, 2}, {6});
  auto [v, i] = x.topk(3);
  EXPECT_EQ(values_of<double>(v), (std::vector<double>{5, 5, 2}));
  EXPECT_EQ(values_of<std::int64_t>(i), (std::vector<std::int64_t>{1, 3, 0}));
  EXPECT_EQ(values_of<std::int64_t>(std::get<1>(x.topk(2, 0, false))), (std::vector<std::int64_t>{4, 0}));
  EXPECT_EQ(values_of<std::int64_t>(x.argsort()), (std::vector<std::int64_t>{4, 0, 2, 5, 1, 3}));
  EXPECT_EQ(values_of<std::int64_t>(x.argsort(0, true)), (std::vector<std::int64_t>{1, 3, 0, 2, 5, 4}));
  // -0 and +0 are equal: their order is kept.
  const Tensor z = from_vector(std::vector<double>{0.0, -0.0, 0.0, -1.0}, {4});
  EXPECT_EQ(values_of<std::int64_t>(z.argsort()), (std::vector<std::int64_t>{3, 0, 1, 2}));
  // Unsorted topk holds the same elements.
  const Tensor d = distinct({4, 50});
  auto [us, ui] = d.topk(7, 1, true, false);
  auto [ss, si] = d.topk(7, 1, true, true);
  expect_close(std::get<0>(us.sort(1, true)), ss, 0, 0, "unsorted topk");
}

// ---- golden: PyTorch's results -------------------------------------------------------------------------------

namespace {

const json& golden() {
  static const json g = minidl::testing::read_golden("reduction_golden.json");
  return g;
}

#define MINIDL_REQUIRE_GOLDEN() MINIDL_REQUIRE_GOLDEN_FILE(golden(), "reduction_golden.json", "gen_reduction_golden.py")

using minidl::testing::dtype_named;

double number(const json& v) { return minidl::testing::golden_number(v); }

Tensor tensor_of(const json& t) {
  std::vector<double> v;
  for (const json& e : t["values"]) v.push_back(number(e));
  return from_vector(v, t["shape"].get<Shape>()).to(dtype_named(t["dtype"]));
}

std::vector<std::int64_t> dims_of(const json& args) {
  if (!args.contains("dim")) return {};
  if (args["dim"].is_number()) return {args["dim"].get<std::int64_t>()};
  return args["dim"].get<std::vector<std::int64_t>>();
}

/// Runs the case's op in minidl: its outputs (a bool result as a 0-d bool tensor).
std::vector<Tensor> run_case(const json& c, const std::vector<Tensor>& in) {
  const std::string op = c["op"];
  const json& a = c["args"];
  const Tensor& x = in[0];
  const auto dims = dims_of(a);
  const bool keep = a.value("keepdim", false);
  if (op == "sum") {
    if (a.contains("dtype")) return {sum(x, dims, keep, dtype_named(a["dtype"]))};
    return {dims.empty() ? sum(x) : sum(x, dims, keep)};
  }
  if (op == "mean") return {dims.empty() ? x.mean() : mean(x, dims, keep)};
  if (op == "prod") return {a.contains("dim") ? prod(x, a["dim"].get<std::int64_t>(), keep) : prod(x)};
  if (op == "cumsum") return {cumsum(x, a["dim"].get<std::int64_t>())};
  if (op == "cumprod") return {cumprod(x, a["dim"].get<std::int64_t>())};
  if (op == "var" || op == "std") {
    const std::optional<Scalar> corr(a["correction"].get<double>());
    return {op == "var" ? var(x, dims, corr, keep) : minidl::std(x, dims, corr, keep)};
  }
  if (op == "max_dim" || op == "min_dim") {
    auto [v, i] =
        op == "max_dim" ? max(x, a["dim"].get<std::int64_t>(), keep) : min(x, a["dim"].get<std::int64_t>(), keep);
    return {v, i};
  }
  if (op == "argmax" || op == "argmin") {
    std::optional<std::int64_t> d;
    if (a.contains("dim")) d = a["dim"].get<std::int64_t>();
    return {op == "argmax" ? argmax(x, d, keep) : argmin(x, d, keep)};
  }
  if (op == "max") return {x.max()};
  if (op == "min") return {x.min()};
  if (op == "amax") return {amax(x, dims, keep)};
  if (op == "amin") return {amin(x, dims, keep)};
  if (op == "logsumexp") return {logsumexp(x, dims, keep)};
  if (op == "norm") return {norm(x, std::optional<Scalar>(number(a["p"])), dims, keep)};
  if (op == "sort") {
    auto [v, i] = sort(x, a["dim"].get<std::int64_t>(), a["descending"].get<bool>());
    return {v, i};
  }
  if (op == "argsort") return {argsort(x, a["dim"].get<std::int64_t>(), a["descending"].get<bool>())};
  if (op == "topk") {
    auto [v, i] = topk(x, a["k"].get<std::int64_t>(), a["dim"].get<std::int64_t>(), a["largest"].get<bool>(),
                       a["sorted"].get<bool>());
    return {v, i};
  }
  if (op == "any" || op == "all") {
    const bool is_any = op == "any";
    if (!a.contains("dim")) return {is_any ? x.any() : x.all()};
    const std::int64_t d = a["dim"].get<std::int64_t>();
    return {is_any ? any(x, d, keep) : all(x, d, keep)};
  }
  if (op == "allclose") {
    const bool r = allclose(x, in[1], a.value("rtol", 1e-5), a.value("atol", 1e-8), a.value("equal_nan", false));
    return {full({}, r, kBool)};
  }
  if (op == "equal") return {full({}, equal(x, in[1]), kBool)};
  throw ValueError("golden: unknown op " + op);
}

/// PyTorch's per-dtype tolerances (float64 looser on the GPU, whose libm differs in the last bits).
std::pair<double, double> tolerance(DType dt, bool gpu) {
  switch (dt) {
    case kFloat64:
      return gpu ? std::make_pair(1e-7, 1e-9) : std::make_pair(1e-10, 1e-12);
    case kFloat32:
      return {1.3e-5, 1e-5};
    case kBFloat16:
      return {1.6e-2, 1e-5};
    case kFloat16:
      return {1e-3, 1e-5};
    default:
      return {0.0, 0.0};
  }
}

void expect_matches(const Tensor& got, const json& want, bool gpu, const std::string& what) {
  const Tensor w = tensor_of(want);
  ASSERT_EQ(got.dtype(), w.dtype()) << what;
  const auto [rtol, atol] = tolerance(w.dtype(), gpu);
  expect_values(got, w, rtol, atol, what);
}

void run_golden(const Device& device) {
  int checked = 0;
  for (const json& c : golden()["cases"]) {
    const std::string name = c["name"];
    std::vector<Tensor> in;
    for (const json& t : c["inputs"]) in.push_back(tensor_of(t).to(device));
    const bool grad = c.contains("grad_in");
    if (grad) in[0].requires_grad_(true);
    std::vector<Tensor> out;
    try {
      out = run_case(c, in);
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    ASSERT_EQ(out.size(), c["outputs"].size()) << name;
    for (std::size_t k = 0; k < out.size(); ++k) {
      expect_matches(out[k], c["outputs"][k], device.is_cuda(), name + " output " + std::to_string(k));
    }
    if (grad) {
      mul(out[0], tensor_of(c["grad_out"]).to(device)).sum().backward();
      expect_matches(in[0].grad(), c["grad_in"], device.is_cuda(), name + " gradient");
    }
    ++checked;
  }
  EXPECT_GE(checked, 140);
}

}  // namespace

TEST(ReductionsGolden, MatchPyTorchOnTheCpu) {
  MINIDL_REQUIRE_GOLDEN();
  run_golden(Device(kCPU));
}

TEST(ReductionsGolden, MatchPyTorchOnTheGpu) {
  MINIDL_REQUIRE_GOLDEN();
  MINIDL_REQUIRE_GPU();
  run_golden(Device(kCUDA));
}

// ---- GPU against CPU ---------------------------------------------------------------------------------------

namespace {

const Device kGpu("cuda");

std::pair<double, double> device_tolerance(DType dt) {
  switch (dt) {
    case kFloat64:
      return {1e-9, 1e-11};
    case kFloat32:
      return {1e-4, 1e-5};
    case kBFloat16:
      return {1.6e-2, 1e-5};
    case kFloat16:
      return {1e-3, 1e-5};
    default:
      return {0.0, 0.0};
  }
}

/// f on x on the CPU and on the GPU: every output element, and (for floating x) the gradient of sum(out * g).
/// `atol_floor` raises the absolute tolerance for long float32 / 16-bit accumulations, whose rounding errors grow
/// with the count while the result may be near 0.
void expect_devices_agree(const std::string& what, const std::function<std::vector<Tensor>(const Tensor&)>& f,
                          const Tensor& x, bool differentiable = true, double atol_floor = 0) {
  const bool grad = differentiable && x.is_floating_point();
  Tensor xc = x.detach().clone(), xg = x.detach().to(kGpu);
  if (grad) {
    xc.requires_grad_(true);
    xg.requires_grad_(true);
  }
  std::vector<Tensor> oc, og;
  try {
    oc = f(xc);
    og = f(xg);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
    return;
  }
  ASSERT_EQ(oc.size(), og.size()) << what;
  for (std::size_t k = 0; k < oc.size(); ++k) {
    ASSERT_TRUE(og[k].is_cuda()) << what;
    ASSERT_EQ(oc[k].dtype(), og[k].dtype()) << what;
    const auto [rtol, atol] = device_tolerance(oc[k].dtype());
    expect_values(og[k], oc[k], rtol, std::max(atol, atol_floor), what + " output " + std::to_string(k));
  }
  if (grad && oc[0].requires_grad()) {
    const Tensor g = uni(oc[0].sizes(), -1, 1, oc[0].dtype());
    mul(oc[0], g).sum().backward();
    mul(og[0], g.to(kGpu)).sum().backward();
    const auto [rtol, atol] = device_tolerance(x.dtype());
    expect_values(xg.grad(), xc.grad(), rtol, std::max(atol, atol_floor), what + " gradient");
  }
}

using Many = std::function<std::vector<Tensor>(const Tensor&)>;
Many one(const std::function<Tensor(const Tensor&)>& f) {
  return [f](const Tensor& x) { return std::vector<Tensor>{f(x)}; };
}
Many both(const std::function<std::tuple<Tensor, Tensor>(const Tensor&)>& f) {
  return [f](const Tensor& x) {
    auto [v, i] = f(x);
    return std::vector<Tensor>{v, i};
  };
}

/// Shapes that take each kernel path: short rows (groups of lanes), long rows (a block each, split into
/// segments), wide and narrow strided slices, split strided slices (in packs of columns: 1300 x 256, 2100 x 12),
/// one long row, many long rows scanned by a block each (600 x 4097, element by element), 0-d and empty.
const std::vector<Shape>& path_shapes() {
  static const std::vector<Shape> s{{},           {1},         {7},           {3, 5},         {2, 3, 4},
                                    {33, 65},     {5, 3000},   {2, 200001},   {1, 300000},    {1000, 3},
                                    {3, 2500, 2}, {4, 70, 45}, {2, 3000, 33}, {3, 1300, 256}, {5, 2100, 12},
                                    {600, 4097},  {0, 4},      {4, 0, 3}};
  return s;
}

}  // namespace

TEST(ReductionsGpu, SumMeanProdVarStdNormLogsumexpAgreeWithTheCpu) {
  MINIDL_REQUIRE_GPU();
  for (const Shape& s : path_shapes()) {
    const Tensor x = uni(s);
    const std::int64_t nd = static_cast<std::int64_t>(s.size());
    std::vector<std::vector<std::int64_t>> dim_lists{{}};
    for (std::int64_t d = 0; d < nd; ++d) dim_lists.push_back({d});
    if (nd == 3) dim_lists.push_back({0, 2});
    for (const auto& dims : dim_lists) {
      const std::string tag = shape_str(s) + " dims " + std::to_string(dims.size()) +
                              (dims.empty() ? "" : " first " + std::to_string(dims[0]));
      expect_devices_agree("sum " + tag, one([dims](const Tensor& a) { return sum(a, dims); }), x);
      expect_devices_agree("mean " + tag, one([dims](const Tensor& a) { return mean(a, dims, true); }), x);
      expect_devices_agree("var " + tag, one([dims](const Tensor& a) { return var(a, dims); }), x);
      expect_devices_agree(
          "std " + tag, one([dims](const Tensor& a) { return minidl::std(a, dims, std::optional<Scalar>(0.0)); }), x);
      expect_devices_agree("logsumexp " + tag, one([dims](const Tensor& a) { return logsumexp(a, dims); }), x);
      for (double p : {2.0, 1.0, 3.0, kInf}) {
        if (std::isinf(p) && x.numel() == 0) continue;
        expect_devices_agree("norm " + tag, one([dims, p](const Tensor& a) { return norm(a, p, dims); }), x);
      }
      if (x.numel() > 0) {
        expect_devices_agree("amax " + tag, one([dims](const Tensor& a) { return amax(a, dims); }), distinct(s));
      }
      expect_devices_agree("any " + tag, one([dims](const Tensor& a) { return any(gt(a, 0.9), dims); }), x);
      expect_devices_agree("all " + tag, one([dims](const Tensor& a) { return all(gt(a, -0.9), dims); }), x);
    }
    for (std::int64_t d = 0; d < std::max<std::int64_t>(nd, 1); ++d) {
      const std::string tag = shape_str(s) + " dim " + std::to_string(d);
      expect_devices_agree("prod " + tag, one([d](const Tensor& a) { return prod(a, d); }), uni(s, 0.999, 1.001));
      if (x.numel() > 0) {
        expect_devices_agree("max " + tag, both([d](const Tensor& a) { return max(a, d); }), distinct(s));
        expect_devices_agree("min " + tag, both([d](const Tensor& a) { return min(a, d, true); }), distinct(s));
        expect_devices_agree("argmax ties " + tag, one([d](const Tensor& a) { return argmax(a, d); }),
                             small_ints(s, 3, kFloat32), false);
      }
    }
  }
}

TEST(ReductionsGpu, EveryDtypeAgreesWithTheCpu) {
  MINIDL_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool}) {
    // 3 x 1100 x 32: packs of columns of every width; 520 x 4112: rows scanned by a block each, in packs.
    for (const Shape& s : {Shape{37, 129}, Shape{4, 1025, 3}, Shape{1, 70000}, Shape{3, 1100, 32}, Shape{520, 4112}}) {
      const Tensor x = is_floating_point(dt) ? uni(s, -2, 2, dt) : small_ints(s, 3, dt);
      const std::string tag = std::string(dtype_name(dt)) + " " + shape_str(s);
      for (std::int64_t d = 0; d < static_cast<std::int64_t>(s.size()); ++d) {
        const double n = static_cast<double>(s[static_cast<std::size_t>(d)]);
        const double floor = dt == kFloat32 ? 4e-7 * n : (is_reduced_floating_point(dt) ? 1e-4 * n : 0.0);
        const std::int64_t k = std::min<std::int64_t>(2, s[static_cast<std::size_t>(d)]);
        expect_devices_agree("sum " + tag, one([d](const Tensor& a) { return a.sum(d); }), x, true, floor);
        expect_devices_agree("cumsum " + tag, one([d](const Tensor& a) { return a.cumsum(d); }), x, true, floor);
        expect_devices_agree("max " + tag, both([d](const Tensor& a) { return a.max(d); }), x, false);
        expect_devices_agree("amin " + tag, one([d](const Tensor& a) { return a.amin(d); }), x, false);
        expect_devices_agree("any " + tag, one([d](const Tensor& a) { return a.any(d); }), x);
        expect_devices_agree("all " + tag, one([d](const Tensor& a) { return a.all(d); }), x);
        expect_devices_agree("sort " + tag, both([d](const Tensor& a) { return a.sort(d, true); }), x, false);
        expect_devices_agree("topk " + tag, both([d, k](const Tensor& a) { return a.topk(k, d); }), x, false);
        if (is_floating_point(dt)) {
          // The gradients exp(x - lse) and x / norm follow the 16-bit result's rounding: over the long slices of the
          // last two shapes the two devices' orders of summation can round it to neighbouring values, a step of 3%
          // in lse's gradient and of up to two 16-bit units in norm's (the values themselves are compared).
          const bool result_grads = !is_reduced_floating_point(dt) || x.numel() <= 70000;
          expect_devices_agree("mean " + tag, one([d](const Tensor& a) { return a.mean(d); }), x);
          expect_devices_agree("var " + tag, one([d](const Tensor& a) { return a.var(d); }), x);
          expect_devices_agree("logsumexp " + tag, one([d](const Tensor& a) { return a.logsumexp(d); }), x,
                               result_grads);
          expect_devices_agree("norm " + tag, one([d](const Tensor& a) { return a.norm(2, d); }), x, result_grads);
        }
      }
      const double all_floor = dt == kFloat32
                                   ? 4e-7 * static_cast<double>(x.numel())
                                   : (is_reduced_floating_point(dt) ? 1e-4 * static_cast<double>(x.numel()) : 0.0);
      expect_devices_agree("sum all " + tag, one([](const Tensor& a) { return a.sum(); }), x, true, all_floor);
      expect_devices_agree("prod " + tag, one([](const Tensor& a) { return a.prod(0); }),
                           is_floating_point(dt) ? uni(s, 0.99, 1.01, dt) : x);
    }
  }
}

TEST(ReductionsGpu, ScansSortAndTopkAgreeWithTheCpu) {
  MINIDL_REQUIRE_GPU();
  for (const Shape& s : path_shapes()) {
    const std::int64_t nd = static_cast<std::int64_t>(s.size());
    for (std::int64_t d = 0; d < std::max<std::int64_t>(nd, 1); ++d) {
      const std::string tag = shape_str(s) + " dim " + std::to_string(d);
      const double n_dim = nd == 0 ? 1.0 : static_cast<double>(s[static_cast<std::size_t>(d)]);
      expect_devices_agree("cumsum " + tag, one([d](const Tensor& a) { return cumsum(a, d); }), uni(s), true,
                           1e-13 * n_dim);
      expect_devices_agree("cumprod " + tag, one([d](const Tensor& a) { return cumprod(a, d); }), uni(s, 0.999, 1.001));
      expect_devices_agree("sort " + tag, both([d](const Tensor& a) { return sort(a, d); }), distinct(s));
      expect_devices_agree("sort ties " + tag, both([d](const Tensor& a) { return sort(a, d, true); }),
                           small_ints(s, 4, kFloat32));
      const std::int64_t n = nd == 0 ? 1 : s[static_cast<std::size_t>(d)];
      for (std::int64_t k : {std::int64_t{1}, std::int64_t{3}, n}) {
        if (k > n) continue;
        expect_devices_agree("topk " + std::to_string(k) + " " + tag,
                             both([d, k](const Tensor& a) { return topk(a, k, d); }), distinct(s));
        expect_devices_agree("topk smallest ties " + std::to_string(k) + " " + tag,
                             both([d, k](const Tensor& a) { return topk(a, k, d, false); }),
                             small_ints(s, 5, kFloat32));
      }
    }
  }
  // Few long strided columns (scanned as transposed rows) and one long row (many scan tiles).
  for (const Shape& s : {Shape{2, 300000, 3}, Shape{1, 3000000}}) {
    const std::int64_t d = 1;
    const double floor = 1e-12 * static_cast<double>(shape_numel(s));  // long float64 running sums near 0
    expect_devices_agree("cumsum " + shape_str(s), one([d](const Tensor& a) { return cumsum(a, d); }), uni(s), true,
                         floor);
    expect_devices_agree("cumsum int32 " + shape_str(s), one([d](const Tensor& a) { return cumsum(a, d); }),
                         small_ints(s, 5, kInt32));
    expect_devices_agree("cumprod " + shape_str(s), one([d](const Tensor& a) { return cumprod(a, d); }),
                         uni(s, 0.99999, 1.00001));
  }
  // Zeros in cumprod's input, on the GPU's backward kernel.
  std::vector<double> v = uni({6, 40}, 0.5, 1.5).to_vector<double>();
  v[3] = v[50] = v[51] = v[239] = 0.0;
  expect_devices_agree("cumprod with zeros", one([](const Tensor& a) { return cumprod(a, 1); }),
                       from_vector(v, {6, 40}));
  expect_devices_agree("prod with zeros", one([](const Tensor& a) { return prod(a, 1); }), from_vector(v, {6, 40}));
}

TEST(ReductionsGpu, TopkOfWideRowsTakesEveryLevelOfTheSelection) {
  MINIDL_REQUIRE_GPU();
  // 50k-wide rows (a vocabulary's logits): 13 tiles, then the candidates' level; k up to the largest selected one
  // and past it (the sorting path).
  for (DType dt : {kFloat32, kBFloat16, kFloat64, kInt32}) {
    const Tensor x = dt == kInt32 ? small_ints({8, 50000}, 1000, dt) : uni({8, 50000}, -3, 3, dt);
    for (std::int64_t k : {1, 5, 100, 1000, 1024, 1500}) {
      for (bool largest : {true, false}) {
        expect_devices_agree("topk " + std::string(dtype_name(dt)) + " k " + std::to_string(k),
                             both([k, largest](const Tensor& a) { return topk(a, k, 1, largest); }), x);
      }
    }
    expect_devices_agree("topk of one long row", both([](const Tensor& a) { return topk(a.reshape({-1}), 50, 0); }), x);
  }
  // Mostly equal values: many ties at the k-th key, taken at the lower index.
  const Tensor ties = small_ints({3, 50000}, 2, kFloat32);
  expect_devices_agree("topk of ties", both([](const Tensor& a) { return topk(a, 700, 1); }), ties);
  // The unsorted form holds the same elements.
  const Tensor x = uni({4, 50000});
  auto [u, ui] = topk(x.to(kGpu), 300, 1, true, false);
  auto [sv, si] = topk(x, 300, 1);
  expect_close(std::get<0>(u.sort(1, true)), sv, 0, 0, "unsorted topk on the GPU");
}

TEST(ReductionsGpu, NaNEmptyAndComparisonsOnTheGpu) {
  MINIDL_REQUIRE_GPU();
  const Tensor x = from_vector(std::vector<double>{1, kNan, 3, kNan, -2, 0.5}, {1, 6});
  expect_devices_agree("max nan", both([](const Tensor& a) { return a.max(1); }), x, false);
  expect_devices_agree("sort nan", both([](const Tensor& a) { return a.sort(1, true); }), x, false);
  expect_devices_agree("topk nan", both([](const Tensor& a) { return a.topk(4); }), x, false);
  expect_devices_agree("logsumexp nan", one([](const Tensor& a) { return a.logsumexp(1); }), x, false);
  const Tensor g = x.to(kGpu);
  EXPECT_TRUE(allclose(g, g, 1e-5, 1e-8, true));
  EXPECT_FALSE(allclose(g, g));
  EXPECT_FALSE(equal(g, g));
  const Tensor y = uni({30, 40});
  EXPECT_TRUE(equal(y.to(kGpu), y.to(kGpu).clone()));
  EXPECT_TRUE(allclose(y.to(kGpu), (y + 1e-9).to(kGpu)));
  EXPECT_FALSE(allclose(y.to(kGpu), (y + 1e-3).to(kGpu)));
  const Tensor e = zeros({0, 5}, TensorOptions(kFloat32).device(kGpu));
  EXPECT_EQ(e.sum().item<float>(), 0.0f);
  EXPECT_EQ(e.prod().item<float>(), 1.0f);
  EXPECT_TRUE(e.all().item<bool>());
  EXPECT_EQ(e.cumsum(0).sizes(), (Shape{0, 5}));
  EXPECT_EQ(std::get<0>(e.topk(0, 0)).sizes(), (Shape{0, 5}));
}

// ---- bad arguments --------------------------------------------------------------------------------------------

TEST(ReductionsErrors, TypedErrorsNameTheOpAndTheArgument) {
  const Tensor x = uni({2, 3});
  const Tensor i = small_ints({2, 3}, 4, kInt64);
  EXPECT_ERROR(IndexError, x.sum(2), "sum", "dimension out of range", "2");
  EXPECT_ERROR(IndexError, x.mean(-3), "mean", "dimension out of range");
  EXPECT_ERROR(IndexError, x.prod(5), "prod", "5");
  EXPECT_ERROR(IndexError, x.var(2), "var", "2");
  EXPECT_ERROR(IndexError, x.max(3), "max", "3");
  EXPECT_ERROR(IndexError, x.argmin(2), "argmin", "2");
  EXPECT_ERROR(IndexError, x.amax({0, 4}), "amax", "4");
  EXPECT_ERROR(IndexError, x.logsumexp(7), "logsumexp", "7");
  EXPECT_ERROR(IndexError, x.norm(2, {2}), "norm", "2");
  EXPECT_ERROR(IndexError, x.cumsum(2), "cumsum", "2");
  EXPECT_ERROR(IndexError, x.cumprod(-3), "cumprod", "-3");
  EXPECT_ERROR(IndexError, x.sort(2), "sort", "2");
  EXPECT_ERROR(IndexError, x.argsort(-4), "sort", "-4");
  EXPECT_ERROR(IndexError, x.topk(1, 2), "topk", "2");
  EXPECT_ERROR(IndexError, x.any(2), "any", "2");
  EXPECT_ERROR(IndexError, x.all({0, 2}), "all", "2");
  EXPECT_ERROR(IndexError, full({}, 1.0).sum(1), "sum", "1");
  EXPECT_ERROR(ValueError, x.sum({1, -1}), "sum", "twice");
  EXPECT_ERROR(ValueError, x.amin({0, 0}), "amin", "twice");
  EXPECT_ERROR(IndexError, x.topk(4, 1), "topk", "'k'", "4", "3");
  EXPECT_ERROR(IndexError, x.topk(-1), "topk", "'k'", "-1");
  EXPECT_ERROR(TypeError, i.mean(), "mean", "int64");
  EXPECT_ERROR(TypeError, i.var(), "var", "int64");
  EXPECT_ERROR(TypeError, i.std(1), "std", "int64");
  EXPECT_ERROR(TypeError, i.logsumexp(1), "logsumexp", "int64");
  EXPECT_ERROR(TypeError, i.norm(), "norm", "int64");
  EXPECT_ERROR(TypeError, gt(x, 0).norm(1, {0}), "norm", "bool");
  EXPECT_ERROR(ValueError, zeros({2, 0}).max(), "max", "empty");
  EXPECT_ERROR(ValueError, std::get<0>(zeros({2, 0}).min(1)), "min", "empty dimension", "[2, 0]");
  EXPECT_ERROR(ValueError, zeros({0}).argmax(), "argmax", "empty");
  EXPECT_ERROR(ValueError, zeros({3, 0}).amax(1), "amax", "empty");
  EXPECT_ERROR(ValueError, zeros({3, 0}).norm(INFINITY, {1}), "norm", "empty");
  EXPECT_ERROR(ValueError, x.norm(NAN), "norm", "'p'");
  EXPECT_ERROR(TypeError, allclose(x, x.to(kFloat32)), "allclose", "dtype");
  EXPECT_ERROR(ValueError, allclose(x, uni({3, 2})), "allclose", "[2, 3]", "[3, 2]");
  EXPECT_ERROR(ValueError, allclose(x, x, -1.0), "allclose", "'rtol'");
  EXPECT_ERROR(ValueError, allclose(x, x, 1e-5, -1.0), "allclose", "'atol'");
  EXPECT_ERROR(ValueError, sum(Tensor()), "sum", "self");
  EXPECT_ERROR(ValueError, sort(Tensor()), "sort", "self");
  EXPECT_FALSE(equal(x, uni({3, 2})));
  if (minidl::testing::gpu_available()) {
    EXPECT_ERROR(TypeError, allclose(x, x.to(kGpu)), "allclose", "device");
    EXPECT_ERROR(TypeError, equal(x, x.to(kGpu)), "equal", "device");
    EXPECT_ERROR(IndexError, x.to(kGpu).topk(9), "topk", "'k'");
  }
}
