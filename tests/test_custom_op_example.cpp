// The user-defined op of examples/custom_model (swish with a hand-written backward registered through
// autograd::record): values, gradcheck, graph behaviour, and the same results on the GPU.
#include "test_util.h"

#include "../examples/custom_model/swish.h"

using namespace minidl;
using custom_model::swish;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

namespace {
/// x * sigmoid(x) from minidl's own differentiable ops: the reference for values and gradients.
Tensor swish_reference(const Tensor& x) { return x * sigmoid(x); }
}  // namespace

TEST(CustomOpExample, ForwardMatchesComposedOps) {
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({3, 4, 5}, dtype, false, -6.0, 6.0);
    const Tensor y = swish(x);
    EXPECT_EQ(y.dtype(), dtype);
    expect_close(y, swish_reference(x), dtype == kFloat32 ? 1e-6 : 1e-14, 1e-7, "swish forward");
  }
}

TEST(CustomOpExample, PassesGradcheck) {
  const Tensor x = random_tensor({4, 6}, kFloat64, true, -4.0, 4.0);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return swish(in[0]); }, {x}));
  // Inside a larger expression, and with the op applied twice (its saved tensors are per call).
  const Tensor w = random_tensor({6, 3}, kFloat64, true);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return swish(matmul(swish(in[0]), in[1])); }, {x, w}));
}

TEST(CustomOpExample, BackwardMatchesComposedOps) {
  const Tensor x = random_tensor({5, 7}, kFloat64, true, -5.0, 5.0);
  const Tensor g = random_tensor({5, 7}, kFloat64);
  swish(x).backward(g);
  const Tensor ours = x.grad().clone();
  x.mutable_grad() = Tensor();
  swish_reference(x).backward(g);
  expect_close(ours, x.grad(), 1e-12, 1e-14, "swish backward");
}

TEST(CustomOpExample, RecordsOneNodeOnlyWhenNeeded) {
  const Tensor x = random_tensor({3}, kFloat64, true);
  const Tensor y = swish(x);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "SwishBackward");
  EXPECT_FALSE(swish(x.detach()).requires_grad());
  NoGradGuard no_grad;
  EXPECT_FALSE(swish(x).requires_grad());
}

TEST(CustomOpExample, InputModifiedBeforeBackwardIsReported) {
  const Tensor x = random_tensor({4}, kFloat64, true);
  Tensor h = x * 1.0;
  const Tensor y = swish(h).sum();
  {
    NoGradGuard no_grad;
    h.mul_(2.0);
  }
  EXPECT_THROW(y.backward(), AutogradError);
}

TEST(CustomOpExample, ModuleWorksInSequential) {
  nn::Sequential net(nn::Linear(4, 3), custom_model::Swish(), nn::Linear(3, 2));
  const Tensor x = random_tensor({5, 4}, kFloat32);
  const Tensor y = net(x);
  ASSERT_EQ(y.sizes(), (Shape{5, 2}));
  y.sum().backward();
  for (const Tensor& p : net->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().sizes(), p.sizes());
  }
}

TEST(CustomOpExample, GpuMatchesCpu) {
  MINIDL_REQUIRE_GPU();
  const Tensor x = random_tensor({64, 33}, kFloat32, false, -6.0, 6.0);
  const Tensor g = random_tensor({64, 33}, kFloat32);
  const Tensor xc = x.clone().requires_grad_(true);
  const Tensor xg = x.cuda().requires_grad_(true);
  const Tensor yc = swish(xc), yg = swish(xg);
  EXPECT_TRUE(yg.is_cuda());
  yc.backward(g);
  yg.backward(g.cuda());
  expect_close(yg.cpu(), yc, 1e-5, 1e-6, "swish forward on the GPU");
  expect_close(xg.grad().cpu(), xc.grad(), 1e-5, 1e-6, "swish backward on the GPU");
}
