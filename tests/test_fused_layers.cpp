// The fused layers nn::ConvReLU2d and nn::LinearReLU against the unfused pair (Conv2d or Linear, then relu) with
// the same parameters, on the CPU in float32 and float64 and on the GPU: the fused kernels apply the same ReLU
// to the same sums, so the output and every gradient must agree bitwise (on the GPU in deterministic mode, which
// keeps the backward passes free of atomics). Gradcheck of the fused layers is in test_layers_gradcheck.cpp,
// CPU-vs-GPU of the kernels' epilogues in test_cpu_kernels.cpp / test_gpu_kernels.cpp.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ops/op_utils.h"
#include "test_util.h"

using namespace minidl;
using namespace minidl::testing;
namespace F = minidl::nn::functional;

namespace {

const Device kGpu("cuda");

void expect_bitwise(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const std::vector<double> x = a.detach().cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> y = b.detach().cpu().to(kFloat64).to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << what << ": element " << i << " of " << x.size();
}

/// Runs `fused` and `plain` followed by relu on the same input and upstream gradient (on `device`, in `dtype`)
/// and expects bitwise-equal outputs, input gradients and parameter gradients; also that the ReLU acted (some
/// outputs are zero, some positive).
void expect_fused_equals_plain(const std::string& what, nn::Module& fused, nn::Module& plain, const Shape& in,
                               Device device, DType dtype) {
  SCOPED_TRACE(what);
  plain.to(dtype);
  plain.to(device);
  fused.to(dtype);
  fused.to(device);
  {
    NoGradGuard no_grad;
    const auto fp = fused.named_parameters(), pp = plain.named_parameters();
    ASSERT_EQ(fp.size(), pp.size());
    for (std::size_t i = 0; i < fp.size(); ++i) {
      ASSERT_EQ(fp[i].first, pp[i].first);  // the same names: checkpoints move between the two
      Tensor dst = fp[i].second;
      dst.copy_(pp[i].second);
    }
  }
  const Tensor x = random_tensor(in, dtype).to(device);
  Tensor x_fused = x.clone(), x_plain = x.clone();
  x_fused.requires_grad_(true);
  x_plain.requires_grad_(true);
  const Tensor y_fused = fused.forward(x_fused), y_plain = relu(plain.forward(x_plain));
  expect_bitwise(y_fused, y_plain, "output");
  const std::vector<double> y = y_fused.detach().cpu().to(kFloat64).to_vector<double>();
  int zeros = 0;
  for (double v : y) zeros += v == 0.0;
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, static_cast<int>(y.size()));
  const Tensor g = random_tensor(y_fused.sizes(), dtype).to(device);
  // Through a product and a sum, the gradient reaching the fused layer is a fresh buffer that its backward
  // masks in place; handed to backward() directly, it is the caller's tensor, which must stay untouched.
  (y_fused * g).sum().backward();
  (y_plain * g).sum().backward();
  expect_bitwise(x_fused.grad(), x_plain.grad(), "input gradient");
  const auto fp = fused.named_parameters(), pp = plain.named_parameters();
  for (std::size_t i = 0; i < fp.size(); ++i) expect_bitwise(fp[i].second.grad(), pp[i].second.grad(), fp[i].first);
  const Tensor g_before = g.clone(), x_grad = x_fused.grad().clone();
  x_fused.mutable_grad() = Tensor();
  fused.forward(x_fused).backward(g);
  expect_bitwise(g, g_before, "the gradient handed to backward()");
  expect_bitwise(x_fused.grad(), x_grad, "input gradient from backward(g)");
}

void check_all_layers(Device device, DType dtype) {
  struct ConvCase {
    nn::Conv2dOptions options;
    Shape input;
  };
  const ConvCase convs[] = {
      {nn::Conv2dOptions(1, 32, 3), {4, 1, 28, 28}},                 // the example's conv1
      {nn::Conv2dOptions(32, 64, 3), {2, 32, 26, 26}},               // and conv2
      {nn::Conv2dOptions(3, 5, 3).stride(2).padding(1), {3, 3, 9, 7}},
      {nn::Conv2dOptions(4, 6, {3, 2}).groups(2).bias(false), {2, 4, 8, 6}},
  };
  for (const ConvCase& c : convs) {
    nn::ConvReLU2d fused(c.options);
    nn::Conv2d plain(c.options);
    std::ostringstream name;
    fused->pretty_print(name);
    expect_fused_equals_plain(name.str(), *fused, *plain, c.input, device, dtype);
  }
  for (bool bias : {true, false}) {
    nn::LinearReLU fused(nn::LinearOptions(300, 129).bias(bias));
    nn::Linear plain(nn::LinearOptions(300, 129).bias(bias));
    expect_fused_equals_plain(bias ? "LinearReLU with bias" : "LinearReLU without bias", *fused, *plain, {33, 300},
                              device, dtype);
  }
}

TEST(FusedLayers, MatchUnfusedBitwiseOnCpu) {
  check_all_layers(Device(kCPU), kFloat32);
  check_all_layers(Device(kCPU), kFloat64);
}

TEST(FusedLayers, MatchUnfusedBitwiseOnGpu) {
  MINIDL_REQUIRE_GPU();
  const bool was = deterministic();
  set_deterministic(true);
  check_all_layers(kGpu, kFloat32);
  check_all_layers(kGpu, kFloat64);
  set_deterministic(was);
}

// The fused layers' backward masks the incoming gradient in its own buffer only when nothing else can see it.
TEST(FusedLayers, GradientBufferReusedOnlyWhenExclusive) {
  const Tensor y = relu(random_tensor({4, 5}, kFloat32));
  const auto expected = [&](const Tensor& g) {
    return ops::binary_grad(kernels::BinaryOp::ReluGrad, 0.0, g, y).to_vector<float>();
  };
  Tensor alone = random_tensor({4, 5}, kFloat32);
  const std::vector<float> want = expected(alone);
  const void* buffer = alone.data_ptr<float>();
  const Tensor reused = ops::binary_grad_reusing(kernels::BinaryOp::ReluGrad, 0.0, alone, y);
  EXPECT_EQ(reused.data_ptr<float>(), buffer);
  EXPECT_EQ(reused.to_vector<float>(), want);

  const Tensor shared = random_tensor({4, 5}, kFloat32), other_handle = shared;
  const std::vector<float> before = shared.to_vector<float>();
  const Tensor fresh = ops::binary_grad_reusing(kernels::BinaryOp::ReluGrad, 0.0, shared, y);
  EXPECT_NE(fresh.data_ptr<float>(), shared.data_ptr<float>());
  EXPECT_EQ(shared.to_vector<float>(), before);
  EXPECT_EQ(fresh.to_vector<float>(), expected(shared));

  const Tensor base = random_tensor({20}, kFloat32), view = base.reshape({4, 5});  // a view: shared storage
  const std::vector<float> base_before = base.to_vector<float>();
  (void)ops::binary_grad_reusing(kernels::BinaryOp::ReluGrad, 0.0, view, y);
  EXPECT_EQ(base.to_vector<float>(), base_before);

  autograd::DetectAnomalyGuard anomaly;  // the engine reads the incoming gradient after the closure then
  Tensor checked = random_tensor({4, 5}, kFloat32);
  const void* checked_buffer = checked.data_ptr<float>();
  EXPECT_NE(ops::binary_grad_reusing(kernels::BinaryOp::ReluGrad, 0.0, checked, y).data_ptr<float>(), checked_buffer);
}

TEST(FusedLayers, NamesAndPrinting) {
  nn::ConvReLU2d conv(nn::Conv2dOptions(1, 32, 3));
  nn::LinearReLU fc(9216, 128);
  std::vector<std::string> names;
  for (const auto& p : conv->named_parameters()) names.push_back(p.first);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
  std::ostringstream c, l;
  conv->pretty_print(c);
  fc->pretty_print(l);
  EXPECT_EQ(c.str(), "ConvReLU2d(Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(0, 0), dilation=(1, 1), "
                     "groups=1, bias=true))");
  EXPECT_EQ(l.str(), "LinearReLU(Linear(in_features=9216, out_features=128, bias=true))");
}

TEST(FusedLayers, BadShapesAreRejectedLikeTheUnfusedOps) {
  const Tensor x = random_tensor({2, 3, 8, 8}, kFloat32), w = random_tensor({4, 2, 3, 3}, kFloat32);
  EXPECT_THROW(F::conv2d_relu(x, w), ValueError);  // 3 input channels, weight expects 2
  try {
    F::conv2d_relu(x, w);
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d_relu: weight of shape [4, 2, 3, 3] expects 2 input channels"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(F::linear_relu(random_tensor({2, 5}, kFloat32), random_tensor({3, 4}, kFloat32)), ValueError);
  EXPECT_THROW(F::linear_relu(random_tensor({2, 4}, kFloat32), random_tensor({3, 4}, kFloat32),
                              random_tensor({2}, kFloat32)),
               ValueError);  // bias of 2 for 3 outputs
}

}  // namespace
