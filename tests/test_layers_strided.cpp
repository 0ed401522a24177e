// Every op whose kernel reads contiguous memory, on strided inputs (transposed, permuted, sliced, offset into a
// storage): its one ops::dense() at entry makes the result and the gradients the same, bitwise, as for the
// contiguous copy; the gradient arriving from a view's backward (a permute) is strided too. On the CPU, and on
// the GPU where one is present.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "minidl/minidl.h"
#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;

namespace {

struct StridedCase {
  std::string name;
  Shape shape;                                                // the leaf's shape
  std::function<Tensor(const Tensor&)> strided;               // a strided view of the leaf
  std::function<Tensor(const Tensor&, const Device&)> op;     // the op under test, on that view's values
};

std::vector<StridedCase> cases() {
  const auto t2 = [](const Tensor& x) { return x.t(); };
  const auto swap_hw = [](const Tensor& x) { return x.transpose(2, 3); };
  return {
      {"softmax", {5, 4}, t2, [](const Tensor& v, const Device&) { return softmax(v, 1); }},
      {"log_softmax", {5, 4}, t2, [](const Tensor& v, const Device&) { return log_softmax(v, 0); }},
      {"sum_dims", {3, 4, 5}, [](const Tensor& x) { return x.permute({2, 0, 1}); },
       [](const Tensor& v, const Device&) { return sum(v, {0, 2}); }},
      {"max_dim", {5, 4}, t2, [](const Tensor& v, const Device&) { return std::get<0>(max(v, 1)); }},
      {"linear", {6, 4}, t2,
       [](const Tensor& v, const Device& d) {
         manual_seed(3);  // the same weights on every device: drawn on the CPU
         return F::linear(v, randn({3, 6}, kFloat64).to(d), randn({3}, kFloat64).to(d));
       }},
      {"conv2d", {2, 3, 6, 5}, swap_hw,
       [](const Tensor& v, const Device& d) {
         manual_seed(4);
         return F::conv2d(v, randn({4, 3, 3, 3}, kFloat64).to(d), randn({4}, kFloat64).to(d), 1, 1);
       }},
      {"max_pool2d", {2, 3, 6, 4}, swap_hw, [](const Tensor& v, const Device&) { return F::max_pool2d(v, 2); }},
      {"avg_pool2d", {2, 3, 6, 4}, swap_hw, [](const Tensor& v, const Device&) { return F::avg_pool2d(v, 2); }},
      {"batch_norm", {3, 4, 5, 2}, [](const Tensor& x) { return x.permute({0, 1, 3, 2}).slice(2, 0, 2); },
       [](const Tensor& v, const Device&) { return F::batch_norm(v, Tensor(), Tensor(), Tensor(), Tensor(), true); }},
      {"cross_entropy", {4, 6}, t2,
       [](const Tensor& v, const Device& d) {
         return F::cross_entropy(v, from_vector<std::int64_t>({1, 0, 3, 3, 2, 1}, {6}).to(d));
       }},
      {"index_select", {5, 4}, t2,
       [](const Tensor& v, const Device& d) {
         return index_select(v, 1, from_vector<std::int64_t>({4, 0, 4}, {3}).to(d));
       }},
  };
}

/// The op's output and the leaf's gradient for a strided view (or its contiguous copy) of the leaf. The
/// output is permuted before the loss when it has two or more dims, so the incoming gradient is strided.
std::pair<Tensor, Tensor> run(const StridedCase& c, const Tensor& values, const Device& device, bool dense) {
  Tensor leaf = values.to(device).detach().requires_grad_(true);
  Tensor view = c.strided(leaf);
  if (dense) view = view.contiguous();
  Tensor out = c.op(view, device);
  Tensor weights =
      arange(static_cast<double>(out.numel()), TensorOptions(kFloat64).device(device)).reshape(out.sizes());
  Tensor shaped = out.dim() >= 2 ? out.transpose(0, 1) : out;
  Tensor wshaped = out.dim() >= 2 ? weights.transpose(0, 1) : weights;
  (shaped * wshaped).sum().backward();
  return {out.detach().cpu(), leaf.grad().cpu()};
}

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << what;
}

}  // namespace

TEST(LayersStrided, StridedInputsGiveTheContiguousResultsAndGradients) {
  for (const StridedCase& c : cases()) {
    const Tensor values = randn(c.shape, kFloat64);
    ASSERT_FALSE(c.strided(values).is_contiguous()) << c.name;
    const auto [out, grad] = run(c, values, Device(kCPU), false);
    const auto [out_dense, grad_dense] = run(c, values, Device(kCPU), true);
    expect_same(out, out_dense, c.name + " output");
    expect_same(grad, grad_dense, c.name + " gradient");
  }
}

TEST(LayersStrided, GradcheckThroughAStridedConvolutionInput) {
  const Tensor x = randn({1, 2, 4, 3}, TensorOptions(kFloat64).requires_grad());
  const Tensor w = randn({2, 2, 2, 2}, TensorOptions(kFloat64).requires_grad());
  const auto f = [](const std::vector<Tensor>& in) {
    return (F::conv2d(in[0].transpose(2, 3), in[1]).permute({0, 2, 3, 1}) * 0.5).pow(2.0).sum();
  };
  EXPECT_TRUE(autograd::gradcheck(f, {x, w}));
}

TEST(LayersStridedGpu, StridedInputsGiveTheContiguousResultsAndGradients) {
  MINIDL_REQUIRE_GPU();
  const bool tf32_conv = cuda::allow_tf32_conv(), tf32_matmul = cuda::allow_tf32_matmul();
  cuda::set_allow_tf32(false, false);
  for (const StridedCase& c : cases()) {
    const Tensor values = randn(c.shape, kFloat64);
    const auto [out, grad] = run(c, values, Device(kCUDA), false);
    const auto [out_dense, grad_dense] = run(c, values, Device(kCUDA), true);
    // The same kernels on the same values (cuDNN's backward algorithms may add in any order: to rounding).
    minidl::testing::expect_close(out, out_dense, 1e-12, 1e-12, c.name + " output (GPU)");
    minidl::testing::expect_close(grad, grad_dense, 1e-12, 1e-12, c.name + " gradient (GPU)");
    // And the GPU agrees with the CPU.
    const auto [out_cpu, grad_cpu] = run(c, values, Device(kCPU), false);
    minidl::testing::expect_close(out, out_cpu, 1e-9, 1e-9, c.name + " output GPU vs CPU");
    minidl::testing::expect_close(grad, grad_cpu, 1e-9, 1e-9, c.name + " gradient GPU vs CPU");
  }
  cuda::set_allow_tf32(tf32_conv, tf32_matmul);
}
