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

TEST(Autograd, AnOptionalInputThatWasNotGivenIsSavedAsUndefined) {
  // A rule with an optional input (an RNN's initial state) saves it whether or not the caller gave it.
  const autograd::SavedTensor absent(Tensor(), "rnn");
  EXPECT_FALSE(absent.get().defined());
  Tensor x = random_tensor({4}, kFloat64, true);
  const autograd::SavedTensor present(x, "rnn"), missing(Tensor(), "rnn");
  const Tensor y = autograd::record(x * 1.0, "WithOptional", {x, Tensor()}, [=](const Tensor& g) {
    EXPECT_FALSE(missing.get().defined());
    return std::vector<Tensor>{g * present.get(), Tensor()};
  });
  y.sum().backward();
  expect_close(x.grad(), x.detach(), 0, 0, "gradient through the rule");
}

TEST(Autograd, InPlaceOnLeafRequiringGradIsAnError) {
  Tensor x = random_tensor({3}, kFloat64, true);
  EXPECT_THROW(x.mul_(2.0), AutogradError);
  NoGradGuard g;
  EXPECT_NO_THROW(x.mul_(2.0));
}

// In-place ops on tensors with history are recorded, as in PyTorch: the gradient flows through what the tensor
// was before the write (autograd/inplace.h).
TEST(Autograd, InPlaceOpsOnNonLeavesAreRecorded) {
  Tensor x = random_tensor({2, 5}, kFloat64, true);
  Tensor y = x * 2.0;
  y.mul_(3.0).add_(1.5);  // y = 6x + 1.5
  (y * y).sum().backward();
  const Tensor expected = (x.detach() * 6.0 + 1.5) * 12.0;  // d/dx (6x + 1.5)^2
  expect_close(x.grad(), expected, 1e-12, 1e-12, "x.grad through mul_ and add_");
}

TEST(Autograd, InPlaceAddOfATensorSendsTheBroadcastGradientToIt) {
  Tensor x = random_tensor({3, 4}, kFloat64, true), w = random_tensor({4}, kFloat64, true);
  const Tensor c = random_tensor({3, 4});
  Tensor y = x * 1.0;
  y.add_(w, -0.5);
  (y * c).sum().backward();
  expect_close(x.grad(), c, 1e-12, 1e-12, "x.grad");
  expect_close(w.grad(), c.sum({0}) * -0.5, 1e-12, 1e-12, "w.grad: summed over the broadcast rows");
}

TEST(Autograd, InPlaceCopyAndFillRouteTheGradient) {
  Tensor x = random_tensor({2, 3}, kFloat64, true), w = random_tensor({6}, kFloat64, true);
  const Tensor c = random_tensor({6});
  Tensor y = w * 2.0;
  y.copy_(x);  // y's old value (from w) no longer matters: w gets zeros, x gets the gradient, reshaped
  (y * c).sum().backward();
  expect_close(x.grad(), c.reshape({2, 3}), 1e-12, 1e-12, "x.grad through copy_");
  expect_close(w.grad(), zeros({6}, kFloat64), 0, 0, "w.grad after its value was overwritten");
  // A tensor without history that copies one with history joins the graph.
  Tensor z = zeros({6}, kFloat64);
  z.copy_(x);
  EXPECT_TRUE(z.requires_grad());
  Tensor counts = zeros({6}, kInt64);
  counts.copy_(x);  // an integer copy carries no gradient
  EXPECT_FALSE(counts.requires_grad());
  Tensor v = x * 1.0;
  v.fill_(2.0);
  EXPECT_TRUE(v.requires_grad());
  x.mutable_grad() = Tensor();
  (v * c.reshape({2, 3})).sum().backward();
  expect_close(x.grad(), zeros({2, 3}, kFloat64), 0, 0, "x.grad after fill_");
}

TEST(Autograd, InPlaceOpsPassGradcheck) {
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 1.5;
    y.add_(in[1], -0.7).mul_(2.0).add_(0.25);
    return (y * y * in[0]).sum();
  };
  EXPECT_TRUE(gradcheck(fn, {random_tensor({3, 4}, kFloat64, true), random_tensor({4}, kFloat64, true)}));
}

TEST(Autograd, InPlaceOnSharedStorageWhileRecordingIsAnError) {
  Tensor x = random_tensor({4}, kFloat64, true);
  Tensor y = x * 2.0;
  const Tensor view = y.reshape({2, 2});  // shares y's storage
  try {
    y.mul_(3.0);
    FAIL() << "expected AutogradError";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("mul_"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("shared"), std::string::npos) << e.what();
  }
  Tensor e = x.exp();  // saves its output for the backward pass
  EXPECT_THROW(e.add_(1.0), AutogradError);
  NoGradGuard no_grad;  // nothing recorded: allowed
  EXPECT_NO_THROW(y.mul_(3.0));
  (void)view;
}

TEST(Autograd, InPlaceUnderNoGradIsNotRecorded) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = x * 2.0;
  {
    NoGradGuard no_grad;
    y.mul_(3.0);
  }
  y.sum().backward();
  expect_close(x.grad(), ones_like(x.detach()) * 2.0, 1e-12, 1e-12, "the untracked mul_ does not count");
}

TEST(Autograd, ReluInPlaceMatchesReluAndItsGradient) {
  Tensor x = random_tensor({4, 5}, kFloat64, true);
  const Tensor c = random_tensor({4, 5});
  Tensor y = x * 1.0;
  Tensor& same = relu_(y);
  EXPECT_EQ(&same, &y);
  expect_close(y.detach(), relu(x.detach()), 0, 0, "relu_ values");
  (y * c).sum().backward();
  const std::vector<double> xv = x.to_vector<double>(), cv = c.to_vector<double>();
  std::vector<double> ev(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) ev[i] = xv[i] > 0 ? cv[i] : 0.0;
  expect_close(x.grad(), from_vector(ev, {4, 5}), 0, 0, "x.grad through relu_");
  // Its result is saved for the backward pass: a later in-place write while recording is refused.
  Tensor z = x * 2.0;
  z.relu_();
  EXPECT_THROW(z.mul_(2.0), AutogradError);
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor h = in[0] * 1.5;
    return (relu_(h) * in[0]).sum();
  };
  EXPECT_TRUE(gradcheck(fn, {random_tensor({3, 4}, kFloat64, true)}));
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
