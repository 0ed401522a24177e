// Anomaly detection: the first op whose forward output or backward gradient holds NaN/Inf is named; off, the
// values flow through unchecked; the guard restores the previous setting.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "test_util.h"

using namespace minidl;
using minidl::autograd::DetectAnomalyGuard;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

namespace {

// The AutogradError message f() throws; fails the test when it throws nothing.
std::string anomaly_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const AutogradError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an AutogradError";
  return "";
}

void expect_contains(const std::string& msg, const std::vector<std::string>& needles) {
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message lacks \"" << n << "\": " << msg;
}

// Fresh values in [0.5, 2) with one element (at a random position) replaced by `value`.
Tensor with_one(const Shape& shape, double value, std::int64_t* where) {
  Tensor t = random_tensor(shape, kFloat64, false, 0.5, 2.0);
  std::vector<double> v = t.to_vector<double>();
  *where = static_cast<std::int64_t>(rand({}, kFloat64).item<double>() * static_cast<double>(v.size()));
  v[static_cast<std::size_t>(*where)] = value;
  return from_vector(v, shape).requires_grad_(true);
}

}  // namespace

TEST(Anomaly, OffByDefaultAndGuardRestores) {
  EXPECT_FALSE(autograd::detect_anomaly());
  {
    DetectAnomalyGuard on;
    EXPECT_TRUE(autograd::detect_anomaly());
    {
      DetectAnomalyGuard off(false);
      EXPECT_FALSE(autograd::detect_anomaly());
    }
    EXPECT_TRUE(autograd::detect_anomaly());
  }
  EXPECT_FALSE(autograd::detect_anomaly());
  autograd::set_detect_anomaly(true);
  EXPECT_TRUE(autograd::detect_anomaly());
  autograd::set_detect_anomaly(false);
  EXPECT_FALSE(autograd::detect_anomaly());
}

TEST(Anomaly, ForwardLogOfNegativeNamesTheOp) {
  std::int64_t where = 0;
  const Tensor x = with_one({3, 4}, -1.5, &where);
  const Tensor h = x * 2.0;  // finite: checked and passed
  DetectAnomalyGuard on;
  const std::string msg = anomaly_message([&] { log(h); });
  expect_contains(msg, {"forward", "op Log", "LogBackward", "1 of 12 values", "flat index " + std::to_string(where),
                        "nan", "every input is finite"});
}

TEST(Anomaly, ForwardBlamesAnInputThatWasAlreadyBad) {
  std::int64_t where = 0;
  const Tensor x = with_one({5}, std::numeric_limits<double>::infinity(), &where);
  DetectAnomalyGuard on;
  const std::string msg = anomaly_message([&] { exp(x); });
  expect_contains(msg, {"forward", "op Exp", "input(s) 0 already held NaN/Inf", "inf"});
}

TEST(Anomaly, BackwardInfIsNamedWithItsNode) {
  // sqrt is finite at 0 but its derivative 0.5 / sqrt(x) is not.
  std::int64_t where = 0;
  const Tensor x = with_one({2, 3}, 0.0, &where);
  DetectAnomalyGuard on;
  const Tensor loss = (sqrt(x) * 3.0).sum();  // forward passes every check
  const std::string msg = anomaly_message([&] { loss.backward(); });
  expect_contains(msg, {"backward", "node SqrtBackward", "input 0", "1 of 6 values",
                        "flat index " + std::to_string(where), "inf", "the gradient it received was finite"});
  EXPECT_FALSE(x.grad().defined()) << "no gradient may be accumulated past the anomaly";
}

TEST(Anomaly, OffLetsNonFiniteValuesThrough) {
  std::int64_t where = 0;
  const Tensor x = with_one({2, 3}, 0.0, &where);
  ASSERT_FALSE(autograd::detect_anomaly());
  const Tensor y = log(x * -1.0);  // log of values <= 0: NaN, and -Inf at the zero
  const std::vector<double> v = y.detach().to_vector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (static_cast<std::int64_t>(i) == where) {
      EXPECT_TRUE(std::isinf(v[i]) && v[i] < 0) << i << ": " << v[i];
    } else {
      EXPECT_TRUE(std::isnan(v[i])) << i << ": " << v[i];
    }
  }
  sqrt(x).sum().backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_TRUE(std::isinf(g[static_cast<std::size_t>(where)]));
}

TEST(Anomaly, FiniteComputationGivesIdenticalResults) {
  const Tensor x = random_tensor({8, 5}, kFloat64);
  const Tensor w = random_tensor({5, 3}, kFloat64, true);
  const Tensor target = from_vector<std::int64_t>({0, 2, 1, 1, 0, 2, 2, 1}, {8});
  auto run = [&] {
    w.mutable_grad() = Tensor();
    const Tensor loss = nn::functional::cross_entropy(relu(matmul(x, w)) + sigmoid(matmul(x, w)), target);
    loss.backward();
    return std::make_pair(loss.detach(), w.grad().clone());
  };
  const auto off = run();
  std::pair<Tensor, Tensor> on;
  {
    DetectAnomalyGuard guard;
    on = run();
  }
  expect_close(on.first, off.first, 0, 0, "loss");
  expect_close(on.second, off.second, 0, 0, "grad");
}

TEST(Anomaly, GuardRestoresAfterAnException) {
  std::int64_t where = 0;
  const Tensor x = with_one({4}, -1.0, &where);
  try {
    DetectAnomalyGuard on;
    sqrt(x);
    FAIL() << "expected an AutogradError";
  } catch (const AutogradError&) {
  }
  EXPECT_FALSE(autograd::detect_anomaly());
}

TEST(Anomaly, DetectsOnTheGpu) {
  MINIDL_REQUIRE_GPU();
  std::int64_t where = 0;
  const Tensor x = with_one({64}, -2.0, &where).detach().cuda().requires_grad_(true);
  DetectAnomalyGuard on;
  const std::string msg = anomaly_message([&] { log(x); });
  expect_contains(msg, {"forward", "op Log", "flat index " + std::to_string(where), "cuda:0"});
}
