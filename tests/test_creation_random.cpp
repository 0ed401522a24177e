// Creation and random ops (include/minidl/factories.h and the Tensor methods of that family).
// - Deterministic creation (arange, linspace, logspace, full, eye, fill_diagonal_) against PyTorch's values in
//   tests/golden/creation_golden.json (tests/golden/gen_creation_golden.py), every element, on the CPU and GPU.
// - *_like / new_* / from_blob semantics, dtype inference, errors naming the op and argument.
// - Random ops statistically (fixed seeds, bounds of about five standard deviations or chi-square far in the
//   tail), for reproducibility after manual_seed, for every dtype they take, through strided destinations, and on
//   the GPU (also inside a captured CUDA graph: fresh, valid values at every replay).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include "golden_file.h"
#include "test_util.h"

using namespace minidl;
using json = nlohmann::json;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

namespace {

// ---- helpers -------------------------------------------------------------------------------------------------------

const DType kAllDtypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool};
const DType kFloatDtypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16};

std::vector<double> values(const Tensor& t) { return t.detach().cpu().to(kFloat64).contiguous().to_vector<double>(); }

/// Pearson's chi-square of observed counts against expected probabilities (which sum to 1).
double chi_square(const std::vector<double>& counts, const std::vector<double>& probs) {
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  double s = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double e = total * probs[i];
    s += (counts[i] - e) * (counts[i] - e) / e;
  }
  return s;
}
/// A bound the statistic of `dof` degrees of freedom exceeds with probability well below 1e-6.
double chi_square_bound(std::size_t dof) {
  return static_cast<double>(dof) + 7.0 * std::sqrt(2.0 * static_cast<double>(dof)) + 15.0;
}

/// Counts of the integer values 0 .. bins-1 in t (which must hold only those).
std::vector<double> histogram(const Tensor& t, std::int64_t low, std::size_t bins) {
  std::vector<double> c(bins, 0.0);
  for (double v : values(t)) {
    const auto i = static_cast<std::int64_t>(v) - low;
    EXPECT_TRUE(i >= 0 && i < static_cast<std::int64_t>(bins)) << "value " << v << " outside the range";
    if (i >= 0 && i < static_cast<std::int64_t>(bins)) c[static_cast<std::size_t>(i)] += 1;
  }
  return c;
}

void expect_mean_var(const Tensor& t, double mean, double var, const std::string& what) {
  const std::vector<double> v = values(t);
  const double n = static_cast<double>(v.size());
  double m = 0, q = 0;
  for (double x : v) m += x;
  m /= n;
  for (double x : v) q += (x - m) * (x - m);
  q /= n - 1;
  // Five standard errors of the mean; the variance's relative standard error is about sqrt(2 / n) (for normal
  // and uniform draws below that), and dtype rounding adds a little.
  EXPECT_NEAR(m, mean, 5 * std::sqrt(var / n) + 1e-3 * std::fabs(mean) + 1e-6) << what << ": mean";
  EXPECT_NEAR(q, var, var * (5 * std::sqrt(2.0 / n) + 0.01)) << what << ": variance";
}

bool is_permutation_of_range(const Tensor& t) {
  std::vector<double> v = values(t);
  std::sort(v.begin(), v.end());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] != static_cast<double>(i)) return false;
  }
  return true;
}

TensorOptions on(Device d, DType t) { return TensorOptions(t).device(d); }

// ---- golden ---------------------------------------------------------------------------------------------------------

const json& golden() {
  static const json g = minidl::testing::read_golden("creation_golden.json");
  return g;
}

#define MINIDL_REQUIRE_GOLDEN() MINIDL_REQUIRE_GOLDEN_FILE(golden(), "creation_golden.json", "gen_creation_golden.py")

using minidl::testing::dtype_named;

/// A JSON number as the Scalar Python wrote it: true/false, an integer, or a floating value.
Scalar scalar_of(const json& v) {
  if (v.is_boolean()) return Scalar(v.get<bool>());
  if (v.is_number_integer()) return Scalar(v.get<std::int64_t>());
  return Scalar(v.get<double>());
}

/// PyTorch's per-dtype rtol for the 16-bit types, else `rtol`.
double rtol_for(DType d, double rtol) {
  if (d == kBFloat16) return 1.6e-2;
  if (d == kFloat16) return 1e-3;
  return rtol;
}

/// The spacing of a dtype's values near 1.
double epsilon(DType d) {
  switch (d) {
    case kFloat64:
      return 2.220446049250313e-16;
    case kFloat16:
      return 9.765625e-4;
    case kBFloat16:
      return 7.8125e-3;
    default:
      return 1.1920928955078125e-7;
  }
}

void expect_golden(const Tensor& t, const json& row, DType dtype, double rtol, const std::string& what,
                   double atol = 0.0) {
  const std::vector<double> expected = row["values"].get<std::vector<double>>();
  ASSERT_EQ(t.dtype(), dtype) << what;
  ASSERT_EQ(t.numel(), static_cast<std::int64_t>(expected.size())) << what;
  expect_close(t, from_vector(expected, t.sizes(), kFloat64), rtol, atol, what);
}

/// linspace's and logspace's integral results truncate a floating value: an ulp of difference in how it was
/// computed (PyTorch's versions differ: before 2.x it counted every element up from start) moves it by one.
void expect_within_one(const Tensor& t, const json& row, const std::string& what) {
  const std::vector<double> expected = row["values"].get<std::vector<double>>(), got = values(t);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_LE(std::fabs(got[i] - expected[i]), 1.0) << what << " " << i;
}

void check_golden_ranges(Device device) {
  for (const json& row : golden()["arange"]) {
    const std::string what = "arange" + row.dump();
    const DType want = dtype_named(row["result_dtype"].get<std::string>());
    TensorOptions o = TensorOptions().device(device);
    if (!row["dtype"].is_null()) o.dtype(dtype_named(row["dtype"].get<std::string>()));
    const Tensor t = arange(scalar_of(row["start"]), scalar_of(row["end"]), scalar_of(row["step"]), o);
    expect_golden(t, row, want, 0.0, what);
    EXPECT_EQ(t.device(), device);
  }
  for (const json& row : golden()["linspace"]) {
    const std::string what = "linspace" + row.dump();
    const DType d = dtype_named(row["dtype"].get<std::string>());
    const Tensor t =
        linspace(scalar_of(row["start"]), scalar_of(row["end"]), row["steps"].get<std::int64_t>(), on(device, d));
    if (is_integral(d, false)) {
      expect_within_one(t, row, what);
      continue;
    }
    // Within a few ulps of the larger end: the two halves' formula (PyTorch 2.x, minidl) and counting up from
    // start (older PyTorch) round differently.
    const double scale = std::max(std::fabs(row["start"].get<double>()), std::fabs(row["end"].get<double>()));
    expect_golden(t, row, d, rtol_for(d, 0.0), what, 4 * epsilon(d) * scale);
  }
  for (const json& row : golden()["logspace"]) {
    const std::string what = "logspace" + row.dump();
    const DType d = dtype_named(row["dtype"].get<std::string>());
    const double base = row["base"].get<double>();
    const Tensor t =
        logspace(scalar_of(row["start"]), scalar_of(row["end"]), row["steps"].get<std::int64_t>(), base, on(device, d));
    if (is_integral(d, false)) {
      expect_within_one(t, row, what);
      continue;
    }
    // An ulp of the exponent e moves base^e by e ln(base) ulps; the power itself by another few.
    const double e = std::max(std::fabs(row["start"].get<double>()), std::fabs(row["end"].get<double>()));
    expect_golden(t, row, d, std::max(rtol_for(d, 0.0), 4 * epsilon(d) * (e * std::fabs(std::log(base)) + 2)), what);
  }
}

void check_golden_fills(Device device) {
  for (const json& row : golden()["full"]) {
    const DType want = dtype_named(row["result_dtype"].get<std::string>());
    TensorOptions o = TensorOptions().device(device);
    if (!row["dtype"].is_null()) o.dtype(dtype_named(row["dtype"].get<std::string>()));
    expect_golden(full(row["shape"].get<Shape>(), scalar_of(row["value"]), o), row, want, 0.0, "full" + row.dump());
  }
  for (const json& row : golden()["eye"]) {
    const DType d = dtype_named(row["dtype"].get<std::string>());
    const std::int64_t n = row["n"].get<std::int64_t>();
    const Tensor t = row["m"].is_null() ? eye(n, on(device, d)) : eye(n, row["m"].get<std::int64_t>(), on(device, d));
    EXPECT_EQ(t.sizes(), row["shape"].get<Shape>());
    expect_golden(t, row, d, 0.0, "eye" + row.dump());
  }
  for (const json& row : golden()["fill_diagonal"]) {
    const Shape shape = row["shape"].get<Shape>();
    Tensor t = arange(static_cast<double>(shape_numel(shape)), on(device, kFloat32)).reshape(shape);
    t.fill_diagonal_(row["value"].get<double>(), row["wrap"].get<bool>());
    expect_golden(t, row, kFloat32, 0.0, "fill_diagonal_" + row.dump());
  }
}

// ---- the statistical checks, for either device
// ------------------------------------------------------------------------

void check_randint(Device device) {
  for (DType d : kAllDtypes) {
    manual_seed(21);
    const std::int64_t low = d == kBool ? 0 : (d == kUInt8 ? 3 : -4), high = d == kBool ? 2 : low + 11;
    const Tensor t = randint(low, high, {301, 67}, on(device, d));
    ASSERT_EQ(t.dtype(), d);
    ASSERT_EQ(t.device(), device);
    const auto bins = static_cast<std::size_t>(high - low);
    const std::vector<double> counts = histogram(t, low, bins);
    EXPECT_LT(chi_square(counts, std::vector<double>(bins, 1.0 / static_cast<double>(bins))),
              chi_square_bound(bins - 1))
        << "randint in " << d;
  }
  // Default dtype int64, the one-bound form from 0, and the int64 range's ends.
  const Tensor a = randint(5, {1000}, TensorOptions().device(device));
  EXPECT_EQ(a.dtype(), kInt64);
  for (double v : values(a)) EXPECT_TRUE(v >= 0 && v < 5) << v;
  const std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  const std::vector<std::int64_t> wide =
      randint(lo, hi, {4000}, TensorOptions().device(device)).cpu().to_vector<std::int64_t>();
  const auto negatives = std::count_if(wide.begin(), wide.end(), [](std::int64_t v) { return v < 0; });
  EXPECT_NEAR(static_cast<double>(negatives), 2000.0, 5 * std::sqrt(1000.0)) << "randint over the whole int64 range";
  const Tensor like = randint_like(random_tensor({3, 5}, kFloat64).to(device).t(), 2, 9);
  EXPECT_EQ(like.sizes(), (Shape{5, 3}));
  EXPECT_EQ(like.dtype(), kFloat64);
  for (double v : values(like)) EXPECT_TRUE(v >= 2 && v < 9 && v == std::floor(v)) << v;
  EXPECT_EQ(randint_like(a, 7, kInt32).dtype(), kInt32);
}

void check_random_(Device device) {
  // Over the dtype's range: integral dtypes from 0 to their largest value, floating ones to 2^digits.
  const std::map<DType, double> tops = {{kUInt8, 255},
                                        {kInt32, 2147483647.0},
                                        {kBool, 1},
                                        {kFloat16, 2048},
                                        {kBFloat16, 256},
                                        {kFloat32, 16777216.0},
                                        {kFloat64, 9007199254740992.0},
                                        {kInt64, 9223372036854775807.0}};
  for (const auto& [d, top] : tops) {
    manual_seed(5);
    Tensor t = empty({2000}, on(device, d));
    t.random_();
    double largest = 0;
    for (double v : values(t)) {
      EXPECT_TRUE(v >= 0 && v <= top && v == std::floor(v)) << d << ": " << v;
      largest = std::max(largest, v);
    }
    EXPECT_GT(largest, top * (d == kBool ? 0.5 : 0.9)) << d << " reaches the top of its range";
  }
  // random_(to), random_(from, to) through a strided view: the view's elements in range, the others unchanged.
  Tensor base = full({6, 8}, -100.0, on(device, kFloat64));
  Tensor view = base.slice(1, 1, 8, 2).t();
  view.random_(-3, 4);
  const std::vector<double> b = values(base);
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i % 8 % 2 == 1) {
      EXPECT_TRUE(b[i] >= -3 && b[i] < 4) << i << ": " << b[i];
    } else {
      EXPECT_EQ(b[i], -100.0) << i;
    }
  }
  Tensor small = empty({5000}, on(device, kInt32));
  small.random_(3);
  EXPECT_LT(chi_square(histogram(small, 0, 3), {1 / 3.0, 1 / 3.0, 1 / 3.0}), chi_square_bound(2));
}

void check_uniform_normal(Device device) {
  for (DType d : kFloatDtypes) {
    manual_seed(9);
    Tensor u = empty({40000}, on(device, d));
    u.uniform_(-2.0, 3.0);
    for (double v : values(u)) ASSERT_TRUE(v >= -2.0 && v < 3.0) << d << ": " << v;
    expect_mean_var(u, 0.5, 25.0 / 12.0, std::string("uniform_ ") + dtype_name(d));
    Tensor g = empty({40000}, on(device, d));
    g.normal_(1.5, 0.5);
    expect_mean_var(g, 1.5, 0.25, std::string("normal_ ") + dtype_name(d));
    expect_mean_var(normal(-1.0, 2.0, {40000}, on(device, d)), -1.0, 4.0, std::string("normal ") + dtype_name(d));
    expect_mean_var(rand_like(u), 0.5, 1.0 / 12.0, std::string("rand_like ") + dtype_name(d));
    expect_mean_var(randn_like(u, kFloat64), 0.0, 1.0, "randn_like to float64");
    EXPECT_EQ(randn_like(u, kFloat64).dtype(), kFloat64);
  }
  // Strided destination: every element of a transposed view drawn, nothing else touched.
  Tensor base = zeros({300, 201}, on(device, kFloat32));
  Tensor view = base.narrow(1, 0, 200).t();
  view.normal_(0.0, 1.0);
  const std::vector<double> b = values(base);
  int zeros_inside = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i % 201 == 200) {
      EXPECT_EQ(b[i], 0.0) << i;
    } else {
      zeros_inside += b[i] == 0.0;
    }
  }
  EXPECT_EQ(zeros_inside, 0);
  expect_mean_var(view, 0.0, 1.0, "normal_ through a transposed view");
}

void check_bernoulli(Device device) {
  for (DType d : kAllDtypes) {
    manual_seed(13);
    Tensor t = zeros({20000}, on(device, d));
    t.bernoulli_(0.3);
    const std::vector<double> v = values(t);
    const double ones = std::count(v.begin(), v.end(), 1.0);
    EXPECT_EQ(std::count(v.begin(), v.end(), 0.0) + ones, 20000.0) << d;
    EXPECT_NEAR(ones / 20000.0, 0.3, 5 * std::sqrt(0.21 / 20000)) << "bernoulli_(0.3) in " << d;
  }
  // Per-element probabilities: a row of p for each of many rows; each column's frequency follows its p.
  const Tensor p_row = from_vector<double>({0.0, 0.05, 0.5, 0.9, 1.0}, {1, 5}).to(device);
  for (DType d : kFloatDtypes) {
    const Tensor p = p_row.to(d).expand({8000, 5}).contiguous();
    const Tensor draws = bernoulli(p);
    EXPECT_EQ(draws.dtype(), d);
    const Tensor freq = draws.to(kFloat64).mean({0});
    const std::vector<double> f = values(freq), pv = values(p_row);
    for (std::size_t j = 0; j < 5; ++j) {
      EXPECT_NEAR(f[j], pv[j], 5 * std::sqrt(pv[j] * (1 - pv[j]) / 8000) + 1e-12) << d << " column " << j;
    }
  }
  // bernoulli_(p tensor) broadcast over an integer self, through a strided view; bernoulli(x, p).
  Tensor ints = full({7, 6}, 5, on(device, kInt64));
  Tensor view = ints.t();
  view.bernoulli_(from_vector<float>({0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 1.0f}, {7}).to(device));
  const std::vector<double> iv = values(ints);
  for (std::size_t i = 0; i < iv.size(); ++i) {
    const std::size_t row = i / 6;  // ints[row, col] = view[col, row], whose p is p[row]
    EXPECT_EQ(iv[i], (row % 2 == 1 || row == 6) ? 1.0 : 0.0) << i;
  }
  const Tensor half_draws = bernoulli(random_tensor({100, 100}, kFloat64).to(device), 0.25);
  EXPECT_EQ(half_draws.dtype(), kFloat64);
  EXPECT_NEAR(values(half_draws.mean()).at(0), 0.25, 5 * std::sqrt(0.1875 / 10000));
  EXPECT_EQ(zeros({3}, on(device, kFloat32)).bernoulli().sum().item<float>(), 0.0f);
}

void check_randperm(Device device) {
  for (std::int64_t n : {0, 1, 2, 7, 1000, 100003}) {
    manual_seed(static_cast<std::uint64_t>(n) + 1);
    const Tensor p = randperm(n, TensorOptions().device(device));
    EXPECT_EQ(p.dtype(), kInt64);
    EXPECT_EQ(p.sizes(), (Shape{n}));
    EXPECT_TRUE(is_permutation_of_range(p)) << "randperm(" << n << ")";
  }
  for (const auto& [d, n] : std::vector<std::pair<DType, std::int64_t>>{
           {kInt32, 5000}, {kUInt8, 256}, {kFloat32, 3000}, {kFloat64, 3000}, {kFloat16, 2049}, {kBFloat16, 257}}) {
    const Tensor p = randperm(n, on(device, d));
    EXPECT_EQ(p.dtype(), d);
    EXPECT_TRUE(is_permutation_of_range(p)) << "randperm(" << n << ") in " << d;
  }
  // All 24 orders of 4 elements about equally often.
  std::map<std::vector<double>, double> seen;
  for (int i = 0; i < 4800; ++i) seen[values(randperm(4, TensorOptions().device(device)))] += 1;
  EXPECT_EQ(seen.size(), 24u);
  std::vector<double> counts;
  for (const auto& [order, c] : seen) counts.push_back(c);
  EXPECT_LT(chi_square(counts, std::vector<double>(counts.size(), 1.0 / static_cast<double>(counts.size()))),
            chi_square_bound(23));
  // Element 0's position in a long permutation is uniform.
  std::vector<double> where(10, 0.0);
  for (int i = 0; i < 2000; ++i) {
    const std::vector<double> p = values(randperm(10, TensorOptions().device(device)));
    where[static_cast<std::size_t>(std::find(p.begin(), p.end(), 0.0) - p.begin())] += 1;
  }
  EXPECT_LT(chi_square(where, std::vector<double>(10, 0.1)), chi_square_bound(9));
}

void check_multinomial(Device device) {
  const std::vector<double> w = {1.0, 0.0, 3.0, 0.5, 0.0, 2.5, 1.0};  // sum 8
  std::vector<double> probs;
  for (double x : w) probs.push_back(x / 8.0);
  std::vector<double> positive_probs;
  for (double x : probs) {
    if (x > 0) positive_probs.push_back(x);
  }
  const auto positive_counts = [&](const std::vector<double>& c) {
    std::vector<double> r;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (w[i] > 0) {
        r.push_back(c[i]);
      } else {
        EXPECT_EQ(c[i], 0.0) << "category " << i << " of weight 0 drawn";
      }
    }
    return r;
  };
  for (DType d : kFloatDtypes) {
    manual_seed(17);
    const Tensor weights = from_vector<double>(w, {7}).to(device).to(d);
    // With replacement: many samples of one row; one sample of many rows (the single-sample path).
    const Tensor many = multinomial(weights, 30000, true);
    EXPECT_EQ(many.dtype(), kInt64);
    EXPECT_EQ(many.sizes(), (Shape{30000}));
    EXPECT_LT(chi_square(positive_counts(histogram(many, 0, 7)), positive_probs), chi_square_bound(4))
        << "multinomial with replacement in " << d;
    const Tensor rows = weights.unsqueeze(0).expand({30000, 7});  // strided input: made dense once
    const Tensor one = multinomial(rows, 1, false);
    EXPECT_EQ(one.sizes(), (Shape{30000, 1}));
    EXPECT_LT(chi_square(positive_counts(histogram(one, 0, 7)), positive_probs), chi_square_bound(4))
        << "one sample per row in " << d;
    // Without replacement: distinct samples, zero weights last, the first sample distributed as the weights.
    const Tensor all = multinomial(rows.narrow(0, 0, 3000), 7, false);
    const std::vector<double> a = values(all);
    std::vector<double> first(7, 0.0);
    for (std::size_t r = 0; r < 3000; ++r) {
      const std::set<double> distinct(a.begin() + r * 7, a.begin() + r * 7 + 7);
      EXPECT_EQ(distinct.size(), 7u) << "row " << r;
      for (std::size_t j = 0; j < 5; ++j) EXPECT_GT(w[static_cast<std::size_t>(a[r * 7 + j])], 0.0) << "row " << r;
      first[static_cast<std::size_t>(a[r * 7])] += 1;
    }
    EXPECT_LT(chi_square(positive_counts(first), positive_probs), chi_square_bound(4)) << d;
  }
  // Successive sampling without replacement: P(first i, second j) = p_i p_j / (1 - p_i).
  const std::vector<double> p3 = {0.5, 0.3, 0.2};
  const Tensor w3 = from_vector<double>(p3, {1, 3}).to(device).expand({20000, 3});
  const std::vector<double> pairs = values(multinomial(w3, 2, false));
  std::map<std::pair<int, int>, double> seen;
  for (std::size_t r = 0; r < 20000; ++r) {
    seen[{static_cast<int>(pairs[2 * r]), static_cast<int>(pairs[2 * r + 1])}] += 1;
  }
  std::vector<double> counts, expected;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      if (i == j) continue;
      counts.push_back(seen[{i, j}]);
      expected.push_back(p3[i] * p3[j] / (1 - p3[i]));
    }
  }
  EXPECT_LT(chi_square(counts, expected), chi_square_bound(5)) << "ordered pairs without replacement";
  // A 2-d input's rows follow their own distributions (here: one certain category each).
  Tensor certain = zeros({4, 4}, on(device, kFloat32));
  certain.fill_diagonal_(2.0);
  const std::vector<double> c = values(multinomial(certain, 3, true));
  for (std::size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], static_cast<double>(i / 3));
  const std::vector<double> c2 = values(multinomial(certain, 4, false));
  for (std::size_t r = 0; r < 4; ++r) EXPECT_EQ(c2[r * 4], static_cast<double>(r)) << "the certain one comes first";
}

void check_multinomial_errors(Device device) {
  const auto w = [&](std::vector<double> v) {
    return from_vector<double>(v, {static_cast<std::int64_t>(v.size())}).to(device);
  };
  EXPECT_ERROR(ValueError, multinomial(w({1.0, -1.0}), 1), "multinomial", "'input'", "non-negative", "negative");
  EXPECT_ERROR(ValueError, multinomial(w({1.0, INFINITY}), 2, true), "multinomial", "'input'", "infinite");
  EXPECT_ERROR(ValueError, multinomial(w({NAN, 1.0}), 2, false), "multinomial", "'input'", "NaN");
  EXPECT_ERROR(ValueError, multinomial(w({0.0, 0.0}), 1), "multinomial", "'input'", "positive sum", "only zeros");
  EXPECT_ERROR(ValueError, multinomial(w({1.0, 1.0, 0.0, 0.0}).reshape({2, 2}), 2, true), "multinomial", "row 1",
               "only zeros");
  EXPECT_ERROR(ValueError, multinomial(w({1.0, 1.0}), 3, false), "multinomial", "'num_samples'", "at most", "(2)", "3");
  EXPECT_ERROR(ValueError, multinomial(w({1.0, 1.0}), 0), "multinomial", "'num_samples'", "> 0", "0");
  EXPECT_ERROR(ValueError, multinomial(w({1.0, 1.0}).reshape({1, 1, 2}), 1), "multinomial", "'input'", "1-d or 2-d",
               "3-d");
  EXPECT_ERROR(TypeError, multinomial(w({1.0, 1.0}).to(kInt64), 1), "multinomial", "floating", "int64");
  EXPECT_ERROR(ValueError, multinomial(zeros({2, 0}, on(device, kFloat32)), 1, true), "multinomial", "no categories");
}

void check_reproducible(Device device) {
  const std::vector<std::function<Tensor()>> draws = {
      [&] { return randint(-5, 1000, {1001}, TensorOptions().device(device)); },
      [&] { return randperm(513, TensorOptions().device(device)); },
      [&] {
        return multinomial(rand({3, 50}, TensorOptions().device(device)), 20, false);
      },
      [&] {
        return multinomial(rand({3, 50}, TensorOptions().device(device)), 20, true);
      },
      [&] {
        return multinomial(rand({300, 5}, TensorOptions().device(device)), 1, true);
      },
      [&] { return bernoulli(rand({1001}, TensorOptions().device(device))); },
      [&] { return empty({1001}, on(device, kFloat16)).normal_(); },
      [&] { return empty({1001}, on(device, kBFloat16)).uniform_(-1, 1); },
      [&] { return empty({1001}, on(device, kUInt8)).random_(); },
  };
  for (std::size_t i = 0; i < draws.size(); ++i) {
    manual_seed(1234);
    const std::vector<double> a = values(draws[i]()), b = values(draws[i]());
    manual_seed(1234);
    const std::vector<double> a2 = values(draws[i]());
    EXPECT_EQ(a, a2) << "draw " << i << " after the same seed";
    EXPECT_NE(a, b) << "draw " << i << " twice";
  }
}

// ---- CPU tests -----------------------------------------------------------------------------------------------------

TEST(CreationGolden, RangesMatchPyTorch) {
  MINIDL_REQUIRE_GOLDEN();
  check_golden_ranges(Device(kCPU));
}

TEST(CreationGolden, FullEyeFillDiagonalMatchPyTorch) {
  MINIDL_REQUIRE_GOLDEN();
  check_golden_fills(Device(kCPU));
}

TEST(Creation, FullInfersTheDtypeFromTheValue) {
  EXPECT_EQ(full({2}, 1.5).dtype(), kFloat32);
  EXPECT_EQ(full({2}, 7).dtype(), kInt64);
  EXPECT_EQ(full({2}, true).dtype(), kBool);
  EXPECT_EQ(full({2}, 7, TensorOptions().requires_grad(false)).dtype(), kInt64);
  const Tensor t = full({2, 3}, 1.5, TensorOptions().dtype(kInt64).device(kCPU));
  EXPECT_EQ(t.dtype(), kInt64);
  for (auto v : t.to_vector<std::int64_t>()) EXPECT_EQ(v, 1);
  const Tensor big = full({3}, std::int64_t{1} << 40, kInt64);
  for (auto v : big.to_vector<std::int64_t>()) EXPECT_EQ(v, std::int64_t{1} << 40);
  EXPECT_TRUE(full({2}, 0.5, requires_grad()).requires_grad());
  EXPECT_EQ(zeros({2}, dtype(kInt32)).dtype(), kInt32);
}

TEST(Creation, LikeAndNewTakeShapeDtypeDeviceUnlessOptionsSay) {
  const Tensor x = random_tensor({3, 4}, kFloat64).t();  // strided: the results are contiguous
  for (const Tensor& t : {zeros_like(x), ones_like(x), empty_like(x), full_like(x, 2.5), rand_like(x), randn_like(x)}) {
    EXPECT_EQ(t.sizes(), (Shape{4, 3}));
    EXPECT_EQ(t.dtype(), kFloat64);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_FALSE(t.requires_grad());
  }
  for (double v : values(ones_like(x))) EXPECT_EQ(v, 1.0);
  for (double v : values(zeros_like(x, kInt32))) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(zeros_like(x, kInt32).dtype(), kInt32);
  const Tensor f = full_like(x, 7, kInt64);  // full_like keeps x's dtype unless told, whatever the value's kind
  EXPECT_EQ(f.dtype(), kInt64);
  for (double v : values(f)) EXPECT_EQ(v, 7.0);
  EXPECT_EQ(full_like(x, 7).dtype(), kFloat64);
  EXPECT_TRUE(ones_like(x, TensorOptions().requires_grad()).requires_grad());
  EXPECT_EQ(ones_like(x, TensorOptions().requires_grad()).dtype(), kFloat64);

  const Tensor i = zeros({2}, kInt32);
  EXPECT_EQ(i.new_zeros({3, 2}).dtype(), kInt32);
  EXPECT_EQ(i.new_ones({3}, kFloat16).dtype(), kFloat16);
  EXPECT_EQ(i.new_empty({0, 4}).sizes(), (Shape{0, 4}));
  const Tensor nf = i.new_full({2, 2}, 9);
  EXPECT_EQ(nf.dtype(), kInt32);
  for (double v : values(nf)) EXPECT_EQ(v, 9.0);
  for (double v : values(i.new_ones({3}, kFloat16))) EXPECT_EQ(v, 1.0);
}

TEST(Creation, ArangeOverloadsAndDtypes) {
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(5.0).dtype(), kFloat32);
  EXPECT_EQ(arange(1, 4).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(arange(1.0, 2.0, 0.25, kFloat64).to_vector<double>(), (std::vector<double>{1.0, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(0, 10, 3, kInt32).to_vector<std::int32_t>(), (std::vector<std::int32_t>{0, 3, 6, 9}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  for (DType d : kAllDtypes) {
    if (d == kBool) continue;
    const Tensor t = arange(0, 7, d);
    EXPECT_EQ(t.dtype(), d);
    EXPECT_EQ(values(t), (std::vector<double>{0, 1, 2, 3, 4, 5, 6})) << d;
  }
  const Tensor big = arange(100003, kFloat64);  // split over the thread pool
  const std::vector<double> b = big.to_vector<double>();
  for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], static_cast<double>(i));
}

TEST(Creation, LinspaceLogspaceEdgeCases) {
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  EXPECT_EQ(values(linspace(2.5, 7, 1)), (std::vector<double>{2.5}));
  EXPECT_EQ(linspace(0, 1, 5).dtype(), kFloat32);
  EXPECT_EQ(values(linspace(-1, 1, 5, kFloat64)), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
  EXPECT_EQ(values(logspace(0, 3, 4, 10.0, kFloat64)), (std::vector<double>{1, 10, 100, 1000}));
  EXPECT_EQ(values(logspace(3, 3, 1, 2.0)), (std::vector<double>{8}));
  // Both ends exact for long ranges (the second half counts down from the end).
  const std::vector<double> l = values(linspace(0.1, 0.7, 100001, kFloat64));
  EXPECT_EQ(l.front(), 0.1);
  EXPECT_EQ(l.back(), 0.7);
  for (std::size_t i = 1; i < l.size(); ++i) ASSERT_GT(l[i], l[i - 1]);
}

TEST(Creation, EyeAllDtypes) {
  for (DType d : kAllDtypes) {
    const Tensor e = eye(3, 5, d);
    EXPECT_EQ(e.dtype(), d);
    const std::vector<double> v = values(e);
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], i / 5 == i % 5 ? 1.0 : 0.0) << d << " " << i;
  }
  EXPECT_EQ(eye(0).sizes(), (Shape{0, 0}));
  EXPECT_EQ(eye(4, 0).sizes(), (Shape{4, 0}));
  EXPECT_TRUE(eye(2, TensorOptions().requires_grad()).requires_grad());
}

TEST(Creation, FromBlobViewsCallerMemory) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  Tensor t = from_blob(data.data(), {2, 3});
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_EQ(t.data_ptr(), data.data());
  EXPECT_EQ(values(t), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  data[4] = 50;  // not a copy: both ways
  EXPECT_EQ(values(t)[4], 50.0);
  t.mul_(2.0);
  EXPECT_EQ(data[0], 2.0f);
  // Strides in elements: a transposed view of the same memory.
  const Tensor tt = from_blob(data.data(), {3, 2}, {1, 3});
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(values(tt), (std::vector<double>{2, 8, 4, 100, 6, 12}));
  // Other dtypes; the deleter runs once, when the last view has gone.
  std::vector<std::int64_t> ints = {7, 8, 9};
  int deleted = 0;
  void* deleted_ptr = nullptr;
  {
    Tensor owner = from_blob(
        ints.data(), {3}, [&](void* p) { ++deleted, deleted_ptr = p; }, kInt64);
    Tensor view = owner.narrow(0, 1, 2);
    owner = Tensor();
    EXPECT_EQ(deleted, 0);
    EXPECT_EQ(view.to_vector<std::int64_t>(), (std::vector<std::int64_t>{8, 9}));
  }
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(deleted_ptr, ints.data());
  std::vector<double> dd = {1, 2, 3, 4};
  {
    const Tensor s = from_blob(
        dd.data(), {2}, {2}, [&](void*) { ++deleted; }, kFloat64);
    EXPECT_EQ(values(s), (std::vector<double>{1, 3}));
  }
  EXPECT_EQ(deleted, 2);
  EXPECT_EQ(from_blob(nullptr, {0, 3}).numel(), 0);
  EXPECT_TRUE(from_blob(dd.data(), {4}, TensorOptions(kFloat64).requires_grad()).requires_grad());
}

TEST(Creation, FillFromTensorAndFillDiagonal) {
  Tensor t = random_tensor({3, 4}, kFloat32);
  t.fill_(full({}, 2.5, kFloat64));
  for (double v : values(t)) EXPECT_EQ(v, 2.5);
  Tensor ti = zeros({5}, kInt32);
  ti.fill_(full({}, 3));
  for (double v : values(ti)) EXPECT_EQ(v, 3.0);
  // The gradient reaches the value (the sum of the incoming gradient), not the old contents.
  const Tensor v = full({}, 1.0, TensorOptions(kFloat64).requires_grad());
  const Tensor x = random_tensor({2, 3}, kFloat64, true);
  Tensor y = x * 2.0;
  y.fill_(v);
  (y * from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3})).sum().backward();
  EXPECT_EQ(v.grad().item<double>(), 21.0);
  for (double g : values(x.grad())) EXPECT_EQ(g, 0.0);
  // fill_diagonal_ on a view writes the view's diagonal in its base.
  Tensor base = zeros({4, 6}, kFloat64);
  base.narrow(1, 2, 3).fill_diagonal_(1.0);
  const std::vector<double> b = values(base);
  for (std::size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i], (i / 6 < 3 && i % 6 == i / 6 + 2) ? 1.0 : 0.0) << i;
  }
}

TEST(Creation, FillDiagonalGradcheck) {
  // Through a transposed and a sliced input: the diagonal's gradient is zero, the rest passes through.
  const Tensor a = random_tensor({5, 4}, kFloat64, true);
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = in[0].t().contiguous();
    y.fill_diagonal_(0.5);
    return y * y;
  };
  EXPECT_TRUE(gradcheck(fn, {a}));
  const Tensor b = random_tensor({6, 8}, kFloat64, true);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0].slice(1, 0, 8, 2).contiguous();
        y.fill_diagonal_(-1.0, true);
        return y.exp();
      },
      {b}));
}

TEST(Creation, Errors) {
  EXPECT_ERROR(ValueError, linspace(0, 1, -1), "linspace", "'steps'", ">= 0", "-1");
  EXPECT_ERROR(TypeError, linspace(0, 1, 3, kBool), "linspace", "bool");
  EXPECT_ERROR(ValueError, logspace(0, 1, -2), "logspace", "'steps'", "-2");
  EXPECT_ERROR(TypeError, arange(0, 2, kBool), "arange", "bool");
  EXPECT_ERROR(ValueError, arange(0, 5, 0.5, kInt64), "arange", "step must be nonzero", "truncates");
  EXPECT_ERROR(ValueError, arange(5, 0), "arange", "runs against the step");
  EXPECT_ERROR(ValueError, eye(-1), "eye", "'n'", ">= 0", "-1");
  EXPECT_ERROR(ValueError, eye(2, -3), "eye", "'m'", "-3");
  std::vector<float> d(4);
  EXPECT_ERROR(ValueError, from_blob(d.data(), {2, 2}, {1}), "from_blob", "one stride per dimension", "(2)", "1");
  EXPECT_ERROR(ValueError, from_blob(d.data(), {2, 2}, {-1, 1}), "from_blob", "non-negative strides", "-1");
  EXPECT_ERROR(ValueError, from_blob(nullptr, {2}), "from_blob", "'data'", "null", "2 elements");
  EXPECT_ERROR(ValueError, from_blob(d.data(), {-2}), "-2");
  EXPECT_ERROR(ValueError, zeros({2}).fill_(zeros({2})), "fill_", "'value'", "0-dimensional", "1 dimensions");
  EXPECT_ERROR(ValueError, zeros({3}).fill_diagonal_(1.0), "fill_diagonal_", "at least 2 dimensions", "1");
  EXPECT_ERROR(ValueError, zeros({2, 2, 3}).fill_diagonal_(1.0), "fill_diagonal_", "equal size", "[2, 2, 3]");
}

TEST(Random, RandintEveryDtype) { check_randint(Device(kCPU)); }
TEST(Random, RandomInPlace) { check_random_(Device(kCPU)); }
TEST(Random, UniformNormalInPlace) { check_uniform_normal(Device(kCPU)); }
TEST(Random, Bernoulli) { check_bernoulli(Device(kCPU)); }
TEST(Random, Randperm) { check_randperm(Device(kCPU)); }
TEST(Random, Multinomial) { check_multinomial(Device(kCPU)); }
TEST(Random, MultinomialErrors) { check_multinomial_errors(Device(kCPU)); }
TEST(Random, ReproducibleAfterManualSeed) { check_reproducible(Device(kCPU)); }

TEST(Random, SameValuesForAnyThreadCount) {
  const int threads = get_num_threads();
  std::vector<std::vector<double>> runs;
  for (int t : {1, 3}) {
    set_num_threads(t);
    manual_seed(77);
    std::vector<double> v = values(randint(0, 1000000, {100001}));
    const std::vector<double> m = values(multinomial(rand({97, 31}), 9, false));
    v.insert(v.end(), m.begin(), m.end());
    const std::vector<double> r = values(multinomial(rand({97, 31}), 9, true));
    v.insert(v.end(), r.begin(), r.end());
    const std::vector<double> b = values(bernoulli(rand({100001}, kFloat64)));
    v.insert(v.end(), b.begin(), b.end());
    runs.push_back(v);
  }
  set_num_threads(threads);
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(Random, InPlaceDrawsAndAutograd) {
  // A leaf that requires grad refuses in-place draws; an intermediate's draw cuts the gradient to its old value.
  Tensor leaf = random_tensor({3}, kFloat64, true);
  EXPECT_ERROR(AutogradError, leaf.uniform_(), "uniform_");
  EXPECT_ERROR(AutogradError, leaf.normal_(), "normal_");
  EXPECT_ERROR(AutogradError, leaf.bernoulli_(0.5), "bernoulli_");
  EXPECT_ERROR(AutogradError, leaf.random_(), "random_");
  Tensor y = leaf * 3.0;
  y.normal_();
  (y * leaf).sum().backward();
  expect_close(leaf.grad(), y.detach(), 0, 0, "only the product's own path");
  {
    const NoGradGuard no_grad;
    leaf.uniform_(0.25, 0.5);
  }
  for (double v : values(leaf)) EXPECT_TRUE(v >= 0.25 && v < 0.5);
  const std::uint64_t before = y.version();
  y.bernoulli_(0.5);
  EXPECT_GT(y.version(), before);
}

TEST(Random, Errors) {
  EXPECT_ERROR(ValueError, randint(3, 3, {2}), "randint", "low < high", "low=3", "high=3");
  EXPECT_ERROR(ValueError, randint(0, 300, {2}, kUInt8), "randint", "'high - 1'", "uint8", "299");
  EXPECT_ERROR(ValueError, randint(-1, 2, {2}, kUInt8), "randint", "'from'", "uint8", "-1");
  EXPECT_ERROR(ValueError, randint(0, 3, {2}, kBool), "randint", "bool", "2");
  EXPECT_ERROR(ValueError, randint(0, 70000, {2}, kFloat16), "randint", "float16", "69999");
  EXPECT_ERROR(ValueError, randperm(-1), "randperm", "'n'", ">= 0", "-1");
  EXPECT_ERROR(ValueError, randperm(257, kUInt8), "randperm", "'n'", "uint8", "257");
  EXPECT_ERROR(ValueError, randperm(2050, kFloat16), "randperm", "'n'", "2049", "2050");
  EXPECT_ERROR(TypeError, randperm(3, kBool), "randperm", "bool");
  EXPECT_ERROR(TypeError, rand({2}, kInt64), "rand", "floating", "int64");
  EXPECT_ERROR(TypeError, randn({2}, kBool), "randn", "floating", "bool");
  EXPECT_ERROR(TypeError, rand_like(zeros({2}, kInt32)), "rand", "int32");
  EXPECT_ERROR(ValueError, normal(0, -1, {2}), "normal", "std >= 0", "-1");
  EXPECT_ERROR(TypeError, zeros({2}, kInt64).uniform_(), "uniform_", "floating", "int64");
  EXPECT_ERROR(TypeError, zeros({2}, kInt64).normal_(), "normal_", "floating", "int64");
  EXPECT_ERROR(ValueError, zeros({2}).uniform_(2, 1), "uniform_", "from <= to", "from=2", "to=1");
  EXPECT_ERROR(ValueError, zeros({2}).normal_(0, -1), "normal_", "std >= 0", "-1");
  EXPECT_ERROR(ValueError, zeros({2}).bernoulli_(1.5), "bernoulli_", "'p'", "0 <= p <= 1", "1.5");
  EXPECT_ERROR(ValueError, zeros({2}).bernoulli_(full({2}, 1.5)), "bernoulli_", "'p'", "[0, 1]");
  EXPECT_ERROR(ValueError, zeros({2}).bernoulli_(full({3}, 0.5)), "bernoulli_", "'p'", "[3]", "[2]");
  EXPECT_ERROR(TypeError, zeros({2}).bernoulli_(zeros({2}, kInt64)), "bernoulli_", "'p'", "floating", "int64");
  EXPECT_ERROR(ValueError, bernoulli(full({2}, -0.5)), "bernoulli", "'input'", "[0, 1]");
  EXPECT_ERROR(ValueError, bernoulli(full({2}, NAN)), "bernoulli", "'input'", "NaN");
  EXPECT_ERROR(TypeError, bernoulli(zeros({2}, kInt64)), "bernoulli", "floating", "int64");
  EXPECT_ERROR(ValueError, bernoulli(zeros({2}), 2.0), "bernoulli", "'p'", "2");
  EXPECT_ERROR(ValueError, zeros({2}, kInt64).random_(5, 5), "random_", "'from' < 'to'", "from=5", "to=5");
  EXPECT_ERROR(ValueError, zeros({2}, kUInt8).random_(0, 257), "random_", "'to - 1'", "uint8", "256");
  EXPECT_ERROR(ValueError, zeros({2}, kFloat16).random_(4000, std::nullopt), "random_", "2048", "4000");
}

// ---- GPU tests -----------------------------------------------------------------------------------------------------

const Device kGpu(kCUDA);

TEST(CreationGpu, GoldenRangesAndFills) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_GOLDEN();
  check_golden_ranges(kGpu);
  check_golden_fills(kGpu);
}

TEST(CreationGpu, MatchesTheCpu) {
  MINIDL_REQUIRE_GPU();
  for (DType d : kAllDtypes) {
    expect_close(full({3, 0, 2}, 3, on(kGpu, d)), full({3, 0, 2}, 3, d), 0, 0, "full, no elements");
    expect_close(eye(37, 23, on(kGpu, d)), eye(37, 23, d), 0, 0, std::string("eye ") + dtype_name(d));
    if (d == kBool) continue;
    expect_close(arange(-3, 200, 3, on(kGpu, d == kUInt8 ? kInt32 : d)), arange(-3, 200, 3, d == kUInt8 ? kInt32 : d),
                 0, 0, std::string("arange ") + dtype_name(d));
    // The same formula, rounded as written on both devices: the same bits.
    expect_close(linspace(-3.3, 11.7, 1001, on(kGpu, d == kUInt8 ? kInt32 : d)),
                 linspace(-3.3, 11.7, 1001, d == kUInt8 ? kInt32 : d), 0, 0, std::string("linspace ") + dtype_name(d));
    if (is_floating_point(d)) {
      expect_close(logspace(-2, 2, 777, 3.0, on(kGpu, d)), logspace(-2, 2, 777, 3.0, d), rtol_for(d, 8 * epsilon(d)), 0,
                   std::string("logspace ") + dtype_name(d));
    }
  }
  Tensor t = zeros({7, 3}, on(kGpu, kFloat32));
  t.fill_diagonal_(4.0, true);
  Tensor c = zeros({7, 3});
  c.fill_diagonal_(4.0, true);
  expect_close(t, c, 0, 0, "fill_diagonal_ with wrap");
  t.fill_(full({}, 1.5, kFloat64).cuda());
  for (double v : values(t)) EXPECT_EQ(v, 1.5);
  // from_blob over device memory.
  const Tensor owner = arange(12, on(kGpu, kFloat32));
  const Tensor view = from_blob(owner.data_ptr(), {3, 2}, {1, 3}, on(kGpu, kFloat32));
  EXPECT_TRUE(view.is_cuda());
  expect_close(view, arange(12.0).as_strided({3, 2}, {1, 3}, 0), 0, 0, "from_blob on the GPU");
}

TEST(RandomGpu, RandintEveryDtype) {
  MINIDL_REQUIRE_GPU();
  check_randint(kGpu);
}
TEST(RandomGpu, RandomInPlace) {
  MINIDL_REQUIRE_GPU();
  check_random_(kGpu);
}
TEST(RandomGpu, UniformNormalInPlace) {
  MINIDL_REQUIRE_GPU();
  check_uniform_normal(kGpu);
}
TEST(RandomGpu, Bernoulli) {
  MINIDL_REQUIRE_GPU();
  check_bernoulli(kGpu);
}
TEST(RandomGpu, Randperm) {
  MINIDL_REQUIRE_GPU();
  check_randperm(kGpu);
  EXPECT_TRUE(is_permutation_of_range(randperm(3000017, TensorOptions().device(kGpu)))) << "a long permutation";
}
TEST(RandomGpu, Multinomial) {
  MINIDL_REQUIRE_GPU();
  check_multinomial(kGpu);
  // Rows longer than a block, many rows, and categories of weight 0 between: never drawn.
  Tensor w = rand({300, 1500}, TensorOptions().device(kGpu));
  w.narrow(1, 700, 100).zero_();
  for (bool replacement : {true, false}) {
    const std::vector<double> s = values(multinomial(w, 50, replacement));
    for (std::size_t i = 0; i < s.size(); ++i) ASSERT_FALSE(s[i] >= 700 && s[i] < 800) << i << ": " << s[i];
  }
}
TEST(RandomGpu, MultinomialErrors) {
  MINIDL_REQUIRE_GPU();
  check_multinomial_errors(kGpu);
}
TEST(RandomGpu, ReproducibleAfterManualSeed) {
  MINIDL_REQUIRE_GPU();
  check_reproducible(kGpu);
}

TEST(RandomGpu, FreshValidDrawsAtEveryGraphReplay) {
  MINIDL_REQUIRE_GPU();
  const Tensor weights = rand({64, 33}, TensorOptions().device(kGpu));
  Tensor p = rand({1000}, TensorOptions().device(kGpu));
  Tensor ints, perm, one, with, without, coin, filled = empty({999}, on(kGpu, kFloat16));
  auto step = [&] {
    ints = randint(-7, 7, {1000}, TensorOptions().device(kGpu));
    perm = randperm(777, TensorOptions().device(kGpu));
    one = multinomial(weights, 1);
    with = multinomial(weights, 9, true);
    without = multinomial(weights, 9, false);
    coin = bernoulli(p);
    filled.normal_(2.0, 0.5);
  };
  step();  // warm-up outside the capture
  cuda::CUDAGraph g;
  g.capture_begin();
  step();
  g.capture_end();
  std::vector<std::vector<double>> seen;
  for (int replay = 0; replay < 3; ++replay) {
    g.replay();
    for (double v : values(ints)) ASSERT_TRUE(v >= -7 && v < 7);
    EXPECT_TRUE(is_permutation_of_range(perm));
    for (const Tensor* s : {&one, &with, &without}) {
      for (double v : values(*s)) ASSERT_TRUE(v >= 0 && v < 33);
    }
    const std::vector<double> w = values(without);
    for (std::size_t r = 0; r < 64; ++r) {
      EXPECT_EQ(std::set<double>(w.begin() + r * 9, w.begin() + r * 9 + 9).size(), 9u) << "row " << r;
    }
    expect_mean_var(filled, 2.0, 0.25, "normal_ in a graph");
    std::vector<double> all = values(ints);
    for (const Tensor* s : {&perm, &one, &with, &without, &coin}) {
      const std::vector<double> v = values(*s);
      all.insert(all.end(), v.begin(), v.end());
    }
    seen.push_back(all);
  }
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_NE(seen[1], seen[2]);
}

}  // namespace
