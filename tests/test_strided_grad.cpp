// Strided gradients in backward rules: rules recorded with record_strided (views, elementwise, where, matmul,
// cat, split) receive the incoming gradient as it is, and must give the gradients they give a contiguous one;
// split's backward fills the pieces without a gradient with zeros; matmul loops over batch dims that do not merge
// (a head split of one (B, T, 3C) buffer) instead of copying. Every case compares against the same computation
// with contiguous copies in between (which makes every gradient contiguous), element by element, and float64
// gradcheck covers the new paths.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

namespace {

/// The gradients of `inputs` under f, with a fresh graph.
std::vector<Tensor> grads_of(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                             const std::vector<Tensor>& inputs) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.detach().clone().requires_grad_(true));
  // A random weighting of the output, so that every element's gradient differs.
  const Tensor out = f(leaves);
  const Tensor w = uniform(out.sizes(), -1.0, 1.0, TensorOptions(out.dtype()));
  (out * w).sum().backward();
  std::vector<Tensor> g;
  for (const Tensor& l : leaves) g.push_back(l.grad().defined() ? l.grad() : zeros_like(l));
  return g;
}

/// f and f with every `dense` hop made contiguous agree on the gradients (the strided hops change only layouts).
void expect_same_grads(const std::function<Tensor(const std::vector<Tensor>&, bool dense)>& f,
                       const std::vector<Tensor>& inputs, DType dt, const std::string& what) {
  manual_seed(7);
  const auto strided = grads_of([&](const std::vector<Tensor>& x) { return f(x, false); }, inputs);
  manual_seed(7);
  const auto dense = grads_of([&](const std::vector<Tensor>& x) { return f(x, true); }, inputs);
  const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    expect_close(strided[i], dense[i], tol, tol, what + ", input " + std::to_string(i));
  }
}

/// q·kᵀ·v attention-shaped products of a head split of one (B, T, 3C) buffer, as the GPT's attention: the
/// transposed gradients reach matmul, the elementwise ops and the split's backward without contiguous copies.
Tensor head_split_attention(const Tensor& x, std::int64_t heads, bool dense) {
  const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2) / 3;
  const auto hop = [dense](const Tensor& t) { return dense ? t.contiguous() : t; };
  const std::vector<Tensor> qkv = x.split(C, 2);
  const auto split_heads = [&](const Tensor& t) { return hop(t.view({B, T, heads, C / heads}).transpose(1, 2)); };
  const Tensor q = split_heads(qkv[0]), k = split_heads(qkv[1]), v = split_heads(qkv[2]);
  const Tensor scores = hop(matmul(q * 0.5, hop(k.transpose(-2, -1))));
  const Tensor y = matmul(softmax(scores, -1), v);
  return hop(y.transpose(1, 2)).reshape({B, T, C}).tanh();
}

TEST(StridedGrad, HeadSplitAttentionMatchesContiguousGradients) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (const auto& [B, T, C, H] : std::vector<std::array<std::int64_t, 4>>{{2, 5, 8, 2}, {3, 16, 24, 4}, {2, 32, 64, 2}, {1, 1, 4, 1}}) {
      const Tensor x = random_tensor({B, T, 3 * C}, dt);
      expect_same_grads([H = H](const std::vector<Tensor>& in, bool dense) {
        return head_split_attention(in[0], H, dense);
      }, {x}, dt, std::string("attention ") + dtype_name(dt) + " " + shape_str(x.sizes()));
    }
  }
}

TEST(StridedGrad, HeadSplitAttentionGradcheck) {
  const Tensor x = random_tensor({2, 4, 12}, kFloat64, true);
  EXPECT_TRUE(autograd::gradcheck([](const std::vector<Tensor>& in) { return head_split_attention(in[0], 2, false); },
                                  {x}));
}

TEST(StridedGrad, MatmulOfUnmergeableBatchDimsMatchesContiguousProduct) {
  // (B, H, T, E) views of (B, T, H*E) buffers: their (B, H) batch strides never merge into one.
  for (DType dt : {kFloat32, kFloat64}) {
    for (const auto& [B, H, T, E] : std::vector<std::array<std::int64_t, 4>>{{2, 3, 40, 16}, {4, 2, 64, 32}, {2, 2, 3, 2}}) {
      const Tensor a = random_tensor({B, T, H * E}, dt).view({B, T, H, E}).transpose(1, 2);
      const Tensor b = random_tensor({B, T, H * E}, dt).view({B, T, H, E}).transpose(1, 2);
      const std::string what = std::string(dtype_name(dt)) + " " + shape_str(a.sizes());
      const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
      expect_close(matmul(a, b.transpose(-2, -1)), matmul(a.contiguous(), b.contiguous().transpose(-2, -1)), tol,
                   tol, "a·bᵀ " + what);
      expect_close(matmul(a.transpose(-2, -1), b), matmul(a.contiguous().transpose(-2, -1), b.contiguous()), tol,
                   tol, "aᵀ·b " + what);
      // Broadcast over the heads on one side.
      const Tensor c = random_tensor({B, 1, E, T}, dt);
      expect_close(matmul(a, c), matmul(a.contiguous(), c), tol, tol, "broadcast " + what);
    }
  }
}

TEST(StridedGrad, SplitBackwardZeroFillsPiecesWithoutGradient) {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({3, 10, 4}, dt, true);
    const std::vector<Tensor> pieces = x.split(3, 1);  // sizes 3, 3, 3, 1
    // Pieces 1 and 3 get gradients, one of them strided; 0 and 2 none.
    const Tensor w = random_tensor({4, 3, 3}, dt);
    (pieces[1].transpose(0, 2) * w).sum().add(pieces[3].sum() * 2.0).backward();
    Tensor expected = zeros({3, 10, 4}, TensorOptions(dt));
    expected.narrow(1, 3, 3).copy_(w.transpose(0, 2));
    expected.narrow(1, 9, 1).fill_(2.0);
    expect_close(x.grad(), expected, 0.0, 0.0, std::string("split ") + dtype_name(dt));
    // A second backward through a retained graph gives the same gradient (the shared buffer starts afresh).
    x.grad().zero_();
    const std::vector<Tensor> again = x.chunk(2, 0);
    (again[1] * 3.0).sum().backward();
    Tensor second = zeros({3, 10, 4}, TensorOptions(dt));
    second.narrow(0, 2, 1).fill_(3.0);
    expect_close(x.grad(), second, 0.0, 0.0, std::string("chunk ") + dtype_name(dt));
  }
}

TEST(StridedGrad, SplitBackwardRetainGraphTwice) {
  const Tensor x = random_tensor({6, 5}, kFloat64, true);
  const std::vector<Tensor> p = x.split(2, 0);
  const Tensor loss = (p[0].t() * 2.0).sum() + p[2].sum();
  loss.backward({}, /*retain_graph=*/true);
  const Tensor first = x.grad().clone();
  x.grad().zero_();
  loss.backward();
  expect_close(x.grad(), first, 0.0, 0.0, "second backward");
  Tensor expected = zeros({6, 5}, TensorOptions(kFloat64));
  expected.narrow(0, 0, 2).fill_(2.0);
  expected.narrow(0, 4, 2).fill_(1.0);
  expect_close(first, expected, 0.0, 0.0, "first backward");
}

TEST(StridedGrad, ElementwiseAndViewRulesTakeStridedGradients) {
  // Each rule below receives a transposed (strided) gradient from the transpose after it.
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor a = random_tensor({6, 7}, dt), b = random_tensor({6, 7}, dt);
    const Tensor m = random_tensor({6, 6}, dt), m2 = random_tensor({7, 7}, dt);
    expect_same_grads([&](const std::vector<Tensor>& in, bool dense) {
      const auto hop = [dense](const Tensor& t) { return dense ? t.contiguous() : t; };
      const Tensor e = hop((in[0] * in[1] + exp(in[0]) - gelu(in[1])).transpose(0, 1));
      const Tensor s = hop(where(gt(in[1], 0.0), sigmoid(in[0]), in[1] * 2.0).t());
      const Tensor v = hop(in[0].view({7, 6}).transpose(0, 1).unsqueeze(0).expand({2, 6, 7}));
      return matmul(e + s, m) + matmul(v, m2).sum({0}).t() - in[0].narrow(1, 1, 6).t().sum();
    }, {a, b}, dt, std::string("elementwise ") + dtype_name(dt));
  }
}

}  // namespace
