// Every elementwise op in every dtype it takes, against the same op computed in float64 and converted to the
// result dtype, with PyTorch's per-dtype tolerances (OpInfo: float32 rtol 1.3e-6 atol 1e-5, bfloat16 rtol
// 1.6e-2, float16 rtol 1e-3, float64 1e-7; integers exact). Each case also runs on a transposed view and a
// broadcast operand (which must give the contiguous result bitwise) and on empty inputs, and on the GPU against
// the CPU when one is present.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "minidl/minidl.h"
#include "test_util.h"

using namespace minidl;

namespace {

struct OpCase {
  std::string name;
  int arity;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  bool floating_only;  // integral inputs give float32 (exp, log, ...) or the op takes floating inputs only
  bool positive;       // needs inputs > 0 (log, sqrt) or nonzero divisors
  bool no_bool;        // rejects bool inputs (neg, sub) or is meaningless on them
};

std::vector<OpCase> cases() {
  using T = const Tensor&;
  return {
      {"neg", 1, [](T a, T) { return neg(a); }, false, false, true},
      {"abs", 1, [](T a, T) { return abs(a); }, false, false, true},
      {"relu", 1, [](T a, T) { return relu(a); }, false, false, true},
      {"exp", 1, [](T a, T) { return exp(a); }, true, false, true},
      {"log", 1, [](T a, T) { return log(a); }, true, true, true},
      {"sqrt", 1, [](T a, T) { return sqrt(a); }, true, true, true},
      {"sigmoid", 1, [](T a, T) { return sigmoid(a); }, true, false, true},
      {"tanh", 1, [](T a, T) { return tanh(a); }, true, false, true},
      {"gelu", 1, [](T a, T) { return gelu(a); }, true, false, true},
      {"add_scalar", 1, [](T a, T) { return a + 3; }, false, false, true},
      {"mul_scalar", 1, [](T a, T) { return a * 2; }, false, false, true},
      {"add", 2, [](T a, T b) { return add(a, b, 2); }, false, false, true},
      {"sub", 2, [](T a, T b) { return sub(a, b); }, false, false, true},
      {"mul", 2, [](T a, T b) { return mul(a, b); }, false, false, false},
      {"div", 2, [](T a, T b) { return div(a, b); }, true, true, true},
      {"maximum", 2, [](T a, T b) { return maximum(a, b); }, false, false, false},
      {"minimum", 2, [](T a, T b) { return minimum(a, b); }, false, false, false},
      {"floor_divide", 2, [](T a, T b) { return floor_divide(a, b); }, false, true, true},
      {"remainder", 2, [](T a, T b) { return remainder(a, b); }, false, true, true},
      {"eq", 2, [](T a, T b) { return eq(a, b); }, false, false, false},
      {"lt", 2, [](T a, T b) { return lt(a, b); }, false, false, false},
      {"ge", 2, [](T a, T b) { return ge(a, b); }, false, false, false},
      {"logical_and", 2, [](T a, T b) { return logical_and(a, b); }, false, false, false},
      {"logical_xor", 2, [](T a, T b) { return logical_xor(a, b); }, false, false, false},
  };
}

const std::vector<DType> kDtypes = {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8, kBool};

/// Inputs valid for the op in dtype dt: small whole numbers where integral or `whole` (so products stay in range
/// and a quotient is an integer or at least 1/25 away from one, in every precision), positive where the op needs
/// it, and a repeated column so that comparisons meet ties.
Tensor input(DType dt, const Shape& shape, bool positive, bool whole) {
  Tensor x = mul(randn(shape, kFloat64), 6.0);
  if (whole || is_integral(dt, true)) x = floor_divide(x, 1.0);
  if (positive) x = add(abs(x), 1.0);
  if (dt == kUInt8) x = abs(x);
  x.narrow(-1, 0, 1).fill_(2);
  return x.to(dt);
}

void expect_close_to(const Tensor& got, const Tensor& want64, DType dt, const std::string& what) {
  ASSERT_EQ(got.sizes(), want64.sizes()) << what;
  const std::vector<double> g = got.cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> w = want64.to(got.dtype()).to(kFloat64).to_vector<double>();
  double rtol = 0, atol = 0;
  if (dt == kFloat64) rtol = 1e-7, atol = 1e-7;  // PyTorch's float64 tolerance: devices' libm differ in ulps
  if (dt == kFloat32) rtol = 1.3e-6, atol = 1e-5;
  if (dt == kBFloat16) rtol = 1.6e-2, atol = 1e-5;
  if (dt == kHalf) rtol = 1e-3, atol = 1e-5;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " element " << i;
      continue;
    }
    if (g[i] == w[i]) continue;  // also both infinite of one sign (exp overflowing float16)
    EXPECT_LE(std::abs(g[i] - w[i]), atol + rtol * std::abs(w[i])) << what << " element " << i << ": " << g[i]
                                                                  << " vs " << w[i];
  }
}

bool applies(const OpCase& c, DType dt) {
  if (dt == kBool && (c.no_bool || c.positive)) return false;
  if (c.name == "gelu" && !is_floating_point(dt)) return false;
  return true;
}

}  // namespace

TEST(OpsDtypes, EveryOpInEveryDtypeAgainstFloat64) {
  int checked = 0;
  for (const OpCase& c : cases()) {
    for (DType dt : kDtypes) {
      if (!applies(c, dt)) continue;
      const std::string what = c.name + " " + dtype_name(dt);
      const bool whole = c.name == "floor_divide" || c.name == "remainder";
      const Tensor a = input(dt, {5, 7}, c.positive && c.arity == 1, whole);
      const Tensor b = input(dt, {5, 7}, c.positive, whole);
      const Tensor got = c.op(a, b);
      // The float64 reference: integer ops are exact in float64 for these magnitudes; floating results of
      // integral inputs are float32 (PyTorch's default dtype).
      Tensor want = c.op(a.to(kFloat64), b.to(kFloat64));
      if (is_integral(dt, true) && is_integral(got.dtype(), true) && got.dtype() != kBool) {
        want = c.op(a.to(kInt64), b.to(kInt64));  // integer semantics (floor division, wrap-around)
      }
      if (!is_floating_point(dt) && c.floating_only) {
        EXPECT_EQ(got.dtype(), kFloat32) << what;
      } else if (got.dtype() != kBool) {
        EXPECT_EQ(got.dtype(), dt) << what;
      }
      expect_close_to(got, want, is_floating_point(got.dtype()) ? got.dtype() : dt, what);
      // A transposed view and a broadcast row: the same values, bitwise.
      EXPECT_EQ(c.op(a.t(), b.t()).to(kFloat64).to_vector<double>(),
                c.op(a.t().contiguous(), b.t().contiguous()).to(kFloat64).to_vector<double>())
          << what << " (transposed)";
      const Tensor row = b.narrow(0, 2, 1);
      EXPECT_EQ(c.op(a, row).to(kFloat64).to_vector<double>(),
                c.op(a, row.expand({5, 7}).contiguous()).to(kFloat64).to_vector<double>())
          << what << " (broadcast)";
      // Rows that are contiguous along the last dim but not with each other (a narrowed last dim, permuted leading
      // dims): the per-row vector loop, the same values, bitwise.
      const Tensor a3 = input(dt, {3, 4, 40}, c.positive && c.arity == 1, whole).narrow(2, 5, 30).permute({1, 0, 2});
      const Tensor b3 = input(dt, {3, 4, 40}, c.positive, whole).narrow(2, 7, 30).permute({1, 0, 2});
      EXPECT_EQ(c.op(a3, b3).to(kFloat64).to_vector<double>(),
                c.op(a3.contiguous(), b3.contiguous()).to(kFloat64).to_vector<double>())
          << what << " (strided rows)";
      // Empty inputs give empty outputs of the broadcast shape.
      EXPECT_EQ(c.op(a.narrow(0, 0, 0), b.narrow(0, 0, 0)).sizes(), (Shape{0, 7})) << what << " (empty)";
      if (minidl::testing::gpu_available()) {
        const Tensor on_gpu = c.op(a.cuda().t(), b.cuda().t());
        expect_close_to(on_gpu, c.op(a.t(), b.t()).to(kFloat64), is_floating_point(on_gpu.dtype()) ? on_gpu.dtype()
                                                                                                     : dt,
                        what + " (GPU, transposed)");
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 150);
}

TEST(OpsDtypes, OpsAnIntegralOrBoolDtypeCannotTakeAreTypeErrors) {
  Tensor ints = from_vector<std::int64_t>({1, 2}, {2}), bools = ints > 1;
  EXPECT_THROW(gelu(ints.to(kInt32)).sum(), TypeError);
  EXPECT_THROW(neg(bools), TypeError);
  EXPECT_THROW(sub(bools, bools), TypeError);
  EXPECT_THROW(ints.mean(), TypeError);
  EXPECT_THROW(softmax(ints, 0), TypeError);
  EXPECT_THROW(ints.add_(0.5), TypeError);        // a float result into an int64 tensor
  EXPECT_THROW(bools.add_(ints), TypeError);      // an int64 result into a bool tensor
  EXPECT_THROW(floor_divide(ints, zeros({2}, kInt64)), ValueError);
  EXPECT_THROW(randn({2, 3}).view({3, 2}).transpose(0, 1).view({6}), ValueError);
  EXPECT_THROW(randn({2, 3}).select(2, 0), IndexError);
  EXPECT_THROW(randn({2, 3}).narrow(0, -3, 1), IndexError);
}
