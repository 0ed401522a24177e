// Autograd semantics: accumulation, retain_graph, no_grad, detach, broadcast gradient shapes, errors.
#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

TEST(Autograd, ScalarBackwardGivesAnalyticGradient) {
  Tensor x = random_tensor({5}, kFloat64, true);
  Tensor y = (x * x * 3.0).sum();  // dy/dx = 6x
  y.backward();
  expect_close(x.grad(), x.detach() * 6.0, 1e-12, 1e-12, "6x");
}

TEST(Autograd, GradientsAccumulateUntilZeroed) {
  Tensor x = random_tensor({4}, kFloat64, true);
  (x * 2.0).sum().backward();
  (x * 3.0).sum().backward();
  expect_close(x.grad(), full({4}, 5.0, kFloat64), 0, 1e-12, "accumulated");
  x.mutable_grad().zero_();
  (x * 1.0).sum().backward();
  expect_close(x.grad(), ones({4}, kFloat64), 0, 1e-12, "after zero");
}

TEST(Autograd, BackwardTwiceNeedsRetainGraph) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = x.exp().sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  expect_close(x.grad(), x.detach().exp() * 2.0, 1e-12, 1e-12, "twice");
  try {
    y.backward();
    FAIL() << "expected AutogradError";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y;
  {
    NoGradGuard g;
    y = x * 2.0;
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  EXPECT_THROW(y.sum().backward(), AutogradError);
}

TEST(Autograd, DetachStopsGradient) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = (x.detach() * x).sum();  // d/dx = x (the detached factor is a constant)
  y.backward();
  expect_close(x.grad(), x.detach(), 1e-12, 1e-12, "detach");
  EXPECT_FALSE(x.detach().requires_grad());
  EXPECT_EQ(x.detach().data_ptr(), x.data_ptr());
}

TEST(Autograd, BroadcastGradientsHaveInputShapes) {
  Tensor a = random_tensor({2, 3, 4}, kFloat64, true);
  Tensor b = random_tensor({3, 1}, kFloat64, true);
  Tensor c = random_tensor({4}, kFloat64, true);
  ((a * b + c) / (b * b + 2.0)).sum().backward();
  EXPECT_EQ(a.grad().sizes(), a.sizes());
  EXPECT_EQ(b.grad().sizes(), b.sizes());
  EXPECT_EQ(c.grad().sizes(), c.sizes());
}

TEST(Autograd, NonScalarBackwardNeedsGradient) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = x * 2.0;
  EXPECT_THROW(y.backward(), AutogradError);
  const Tensor g = random_tensor({3});
  y.backward(g);
  expect_close(x.grad(), g * 2.0, 1e-12, 1e-12, "explicit gradient");
  EXPECT_THROW((x * 2.0).backward(random_tensor({4})), ValueError);
}

TEST(Autograd, ModifiedSavedTensorIsDetected) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = x * 2.0;
  Tensor z = y.exp();  // saves its output
  Tensor w = (y * y).sum();
  {
    NoGradGuard g;
    y.mul_(3.0);  // y was saved by mul
  }
  try {
    w.backward();
    FAIL() << "expected AutogradError";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("inplace"), std::string::npos) << e.what();
  }
  (void)z;
}

TEST(Autograd, InPlaceOnLeafRequiringGradIsAnError) {
  Tensor x = random_tensor({3}, kFloat64, true);
  EXPECT_THROW(x.mul_(2.0), AutogradError);
  NoGradGuard g;
  EXPECT_NO_THROW(x.mul_(2.0));
}

TEST(Autograd, DiamondGraphSumsBothPaths) {
  Tensor x = random_tensor({4}, kFloat64, true);
  Tensor y = x.exp();
  Tensor z = (y * y + y.sigmoid()).sum();
  z.backward();
  const Tensor e = x.detach().exp(), s = e.sigmoid();
  expect_close(x.grad(), (e * e * 2.0) + s * (1.0 - s) * e, 1e-10, 1e-12, "diamond");
}

TEST(Autograd, UserDefinedOpThroughRecordPassesGradcheck) {
  // softplus(x) = log(1 + exp(x)), with a hand-written backward: sigmoid(x)
  auto softplus = [](const Tensor& x) {
    Tensor out;
    {
      NoGradGuard g;
      out = (x.exp() + 1.0).log();
    }
    autograd::SavedTensor saved(x, "softplus");
    return autograd::record(out, "SoftplusBackward", {x}, [saved](const Tensor& grad) {
      return std::vector<Tensor>{grad * saved.get().sigmoid()};
    });
  };
  Tensor x = random_tensor({2, 3}, kFloat64, true);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return softplus(in[0]); }, {x}));
}

TEST(Autograd, GradcheckCatchesAWrongBackward) {
  auto wrong = [](const Tensor& x) {
    Tensor out;
    {
      NoGradGuard g;
      out = x * x;
    }
    return autograd::record(out, "WrongBackward", {x}, [](const Tensor& grad) { return std::vector<Tensor>{grad}; });
  };
  Tensor x = random_tensor({3}, kFloat64, true, 0.5, 1.0);
  EXPECT_THROW(gradcheck([&](const std::vector<Tensor>& in) { return wrong(in[0]); }, {x}), AutogradError);
  autograd::GradcheckOptions o;
  o.raise = false;
  EXPECT_FALSE(gradcheck([&](const std::vector<Tensor>& in) { return wrong(in[0]); }, {x}, o));
}
