// The code examples of docs/API.md, compiled and run. Each block of API.md appears here verbatim (up to
// indentation), followed by checks of what it computed; the test DocsMatch verifies that every ```cpp block
// of API.md is in this file, so the documentation cannot drift from code that compiles.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "minidl/io/safetensors.h"
#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_close;

namespace {

// ---- docs/API.md: autograd, a user-defined op ------------------------------------------------------------
Tensor cube(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;  // the forward pass itself records nothing
    out = x * x * x;
  }
  autograd::SavedTensor saved(x, "cube");  // get() fails if x is modified in place before backward
  return autograd::record(out, "CubeBackward", {x}, [saved](const Tensor& grad) {
    const Tensor x = saved.get();
    return std::vector<Tensor>{grad * x * x * 3.0};  // one gradient per input
  });
}

// ---- docs/API.md: nn, a model ----------------------------------------------------------------------------
struct MlpImpl : nn::Module {
  MlpImpl(std::int64_t in, std::int64_t hidden, std::int64_t out)
      : Module("Mlp"), fc1(in, hidden), fc2(hidden, out) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
  nn::Linear fc1, fc2;
};
MINIDL_MODULE(Mlp);

// ---- docs/API.md: data, a dataset ------------------------------------------------------------------------
/// Sample i is the number i; its label says whether i is odd.
class Numbers : public data::Dataset {
 public:
  std::int64_t size() const override { return 100; }
  Shape sample_shape() const override { return {1}; }
  data::Batch get_batch(const std::vector<std::int64_t>& indices) const override {
    std::vector<float> x;
    std::vector<std::int64_t> y;
    for (std::int64_t i : indices) {
      x.push_back(static_cast<float>(i));
      y.push_back(i % 2);
    }
    const auto n = static_cast<std::int64_t>(indices.size());
    return {from_vector(x, {n, 1}), from_vector(y, {n})};
  }
};

std::string temp_path(const std::string& name) { return (std::filesystem::temp_directory_path() / name).string(); }

}  // namespace

TEST(ApiExamples, Tensor) {
  Tensor a = randn({2, 3});                              // float32 on the CPU
  Tensor b = ones({3}, kFloat64).to(kFloat32);
  Tensor c = (a * 2.0 + b).relu();                       // broadcasts like NumPy
  Tensor m = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row_sums = m.sum({1});                          // {6, 15}
  float total = m.sum().item<float>();                   // 21
  std::vector<float> values = m.t().to_vector<float>();  // {1, 4, 2, 5, 3, 6}
  Device device = cuda::is_available() ? Device(kCUDA) : Device(kCPU);
  Tensor on_device = m.to(device);

  EXPECT_EQ(c.sizes(), (Shape{2, 3}));
  const std::vector<float> av = a.to_vector<float>(), cv = c.to_vector<float>();
  for (std::size_t i = 0; i < av.size(); ++i) EXPECT_FLOAT_EQ(cv[i], std::max(0.0f, av[i] * 2.0f + 1.0f));
  expect_close(row_sums, from_vector<float>({6, 15}, {2}), 0, 0, "row sums");
  EXPECT_EQ(total, 21.0f);
  EXPECT_EQ(values, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(on_device.device(), device);
}

TEST(ApiExamples, DtypesAndViews) {
  Tensor logits = randn({8, 10});
  Tensor target = from_vector<std::int64_t>({1, 0, 3, 9, 2, 2, 7, 5}, {8});  // int64 class labels
  std::int64_t correct = eq(argmax(logits, 1), target).sum().item<std::int64_t>();
  Tensor grid = arange(12.0, kInt64).reshape({3, 4});
  Tensor column = grid.select(1, 2);                     // {2, 6, 10}: a view with stride 4
  column.mul_(10);                                       // writes into grid: {20, 60, 100}
  Tensor rows = grid.t().slice(0, 0, 4, 2);              // rows 0 and 2 of the transpose, no copy
  Tensor quarter = grid.to(kHalf) / 4;                   // float16, computed in float32
  Tensor large = grid > 50;                              // bool, true at 60 and 100

  const std::vector<std::int64_t> predicted = argmax(logits, 1).to_vector<std::int64_t>();
  std::int64_t expected = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) expected += predicted[i] == target.to_vector<std::int64_t>()[i];
  EXPECT_EQ(correct, expected);
  EXPECT_EQ(column.stride(0), 4);
  EXPECT_EQ(grid.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 20, 3, 4, 5, 60, 7, 8, 9, 100, 11}));
  EXPECT_EQ(rows.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 4, 8, 20, 60, 100}));
  EXPECT_FALSE(rows.is_contiguous());
  EXPECT_EQ(quarter.dtype(), kHalf);
  EXPECT_EQ(quarter.to(kFloat64).to_vector<double>()[2], 5.0);
  EXPECT_EQ(large.dtype(), kBool);
  EXPECT_EQ(large.sum().item<std::int64_t>(), 2);
}

TEST(ApiExamples, Errors) {
  std::string message;
  try {
    matmul(randn({2, 3}), randn({4, 5}));
  } catch (const ValueError& e) {
    message = e.what();  // "matmul: shapes [2, 3] and [4, 5] ..."
  }

  EXPECT_NE(message.find("matmul"), std::string::npos) << message;
}

// ---- docs/API.md: From LibTorch ------------------------------------------------------------------------------

TEST(ApiExamples, FromLibtorchIndexing) {
  using namespace minidl::indexing;
  Tensor x = arange(24, kFloat32).reshape({2, 3, 4});
  Tensor first_rows = x.index({Slice(), 0});                 // x[:, 0]: (2, 4), a view of x
  Tensor even = x.index({Ellipsis, Slice(None, None, 2)});   // x[..., ::2]: (2, 3, 2), a view
  Tensor middle = x.index({0, None, Slice(1, 3)});           // x[0, None, 1:3]: (1, 2, 4), a view
  Tensor picked = x.index({1, tensor({2, 0}, kLong)});       // x[1, [2, 0]]: rows 2 and 0 of x[1], a copy
  Tensor fives = x.index({x.remainder(5) == 0});             // x[x % 5 == 0]: {0, 5, 10, 15, 20}
  x.index_put_({Slice(), Slice(), -1}, 0);                   // x[:, :, -1] = 0, seen by the views
  x.index_put_({x > 20}, -1);                                // x[x > 20] = -1

  std::vector<float> want(24);
  for (int i = 0; i < 24; ++i) want[i] = i % 4 == 3 ? 0.f : (i > 20 ? -1.f : static_cast<float>(i));
  EXPECT_EQ(x.to_vector<float>(), want);
  EXPECT_EQ(first_rows.sizes(), (Shape{2, 4}));
  EXPECT_EQ(first_rows.to_vector<float>(), (std::vector<float>{0, 1, 2, 0, 12, 13, 14, 0}));
  EXPECT_EQ(even.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(even.to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, -1}));
  EXPECT_EQ(middle.sizes(), (Shape{1, 2, 4}));
  EXPECT_EQ(middle.to_vector<float>(), (std::vector<float>{4, 5, 6, 0, 8, 9, 10, 0}));
  EXPECT_EQ(picked.sizes(), (Shape{2, 4}));
  EXPECT_EQ(picked.to_vector<float>(), (std::vector<float>{20, 21, 22, 23, 12, 13, 14, 15}));  // a copy: unchanged
  EXPECT_EQ(fives.to_vector<float>(), (std::vector<float>{0, 5, 10, 15, 20}));
}

TEST(ApiExamples, FromLibtorchGatherScatter) {
  Tensor probs = tensor({0.1, 0.7, 0.2, 0.5, 0.3, 0.2}).reshape({2, 3});
  Tensor labels = tensor({1, 0}, kLong);
  Tensor picked = probs.gather(1, labels.unsqueeze(1));                    // (2, 1): {0.7, 0.5}
  Tensor one_hot = zeros({2, 3}).scatter(1, labels.unsqueeze(1), 1.0);    // {{0, 1, 0}, {1, 0, 0}}
  Tensor counts = zeros({3}, kLong);
  counts.scatter_add_(0, tensor({2, 0, 2}, kLong), ones({3}, kLong));     // {1, 0, 2}
  Tensor sums = zeros({2, 2});
  sums.index_add_(0, tensor({0, 1, 0}, kLong), arange(1, 7, kFloat32).reshape({3, 2}));  // {{6, 8}, {3, 4}}
  Tensor large = masked_select(probs, probs > 0.25);                       // {0.7, 0.5, 0.3}
  Tensor where_large = nonzero(probs > 0.25);                              // {{0, 1}, {1, 0}, {1, 1}}
  Tensor best = take_along_dim(probs, probs.argmax(1, /*keepdim=*/true), 1);  // (2, 1): {0.7, 0.5}

  EXPECT_EQ(labels.dtype(), kInt64);
  EXPECT_EQ(picked.sizes(), (Shape{2, 1}));
  EXPECT_EQ(picked.to_vector<float>(), (std::vector<float>{0.7f, 0.5f}));
  EXPECT_EQ(one_hot.to_vector<float>(), (std::vector<float>{0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(counts.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 2}));
  EXPECT_EQ(sums.to_vector<float>(), (std::vector<float>{6, 8, 3, 4}));
  EXPECT_EQ(large.to_vector<float>(), (std::vector<float>{0.7f, 0.5f, 0.3f}));
  EXPECT_EQ(where_large.sizes(), (Shape{3, 2}));
  EXPECT_EQ(where_large.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(best.sizes(), (Shape{2, 1}));
  EXPECT_EQ(best.to_vector<float>(), (std::vector<float>{0.7f, 0.5f}));
}

TEST(ApiExamples, FromLibtorchJoining) {
  Tensor a = ones({2, 3}), b = zeros({2, 3});
  Tensor wide = cat({a, b}, 1);                              // (2, 6)
  Tensor pair = stack({a, b});                               // (2, 2, 3)
  std::vector<Tensor> halves = wide.chunk(2, 1);             // two (2, 3) views: a's and b's values
  std::vector<Tensor> pieces = split(wide, {1, 5}, 1);       // (2, 1) and (2, 5)
  Tensor seq = arange(6).reshape({2, 3});                    // int64 {{0, 1, 2}, {3, 4, 5}}
  Tensor reversed = seq.flip({1});                           // {{2, 1, 0}, {5, 4, 3}}
  Tensor shifted = roll(seq, 1, 1);                          // {{2, 0, 1}, {5, 3, 4}}
  Tensor tiled = seq.repeat({1, 2});                         // (2, 6)
  Tensor doubled = seq.repeat_interleave(2, 0);              // (4, 3): rows 0, 0, 1, 1
  Tensor floored = where(seq > 2, seq, 2);                   // {{2, 2, 2}, {3, 4, 5}}
  Tensor scores = randn({4, 4});
  Tensor future = ones({4, 4}, kBool).triu(1);               // causal attention: no looking ahead
  Tensor attention = softmax(scores.masked_fill(future, -INFINITY), -1);  // row 0 is {1, 0, 0, 0}

  using i64v = std::vector<std::int64_t>;
  EXPECT_EQ(wide.sizes(), (Shape{2, 6}));
  EXPECT_EQ(wide.to_vector<float>(), (std::vector<float>{1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(pair.sizes(), (Shape{2, 2, 3}));
  EXPECT_TRUE(equal(pair.select(0, 0), a));
  EXPECT_TRUE(equal(pair.select(0, 1), b));
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_TRUE(equal(halves[0], a));
  EXPECT_TRUE(equal(halves[1], b));
  EXPECT_EQ(halves[1].data_ptr<float>(), wide.data_ptr<float>() + 3);  // a view: no copy
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].sizes(), (Shape{2, 1}));
  EXPECT_EQ(pieces[1].sizes(), (Shape{2, 5}));
  EXPECT_EQ(seq.dtype(), kInt64);
  EXPECT_EQ(reversed.to_vector<std::int64_t>(), (i64v{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(shifted.to_vector<std::int64_t>(), (i64v{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(tiled.sizes(), (Shape{2, 6}));
  EXPECT_EQ(tiled.to_vector<std::int64_t>(), (i64v{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  EXPECT_EQ(doubled.sizes(), (Shape{4, 3}));
  EXPECT_EQ(doubled.to_vector<std::int64_t>(), (i64v{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  EXPECT_EQ(floored.to_vector<std::int64_t>(), (i64v{2, 2, 2, 3, 4, 5}));
  const std::vector<float> p = attention.to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    float row = 0;
    for (int j = 0; j < 4; ++j) {
      if (j > i) EXPECT_EQ(p[i * 4 + j], 0.f) << i << ", " << j;
      row += p[i * 4 + j];
    }
    EXPECT_NEAR(row, 1.f, 1e-6f) << "row " << i;
  }
  EXPECT_EQ(p[0], 1.f);
}

TEST(ApiExamples, FromLibtorchReductions) {
  Tensor logits = tensor({2.0, 0.5, 3.0, 1.0, 4.0, 1.5, 0.0, 2.5}).reshape({2, 4});
  auto [top_values, top_indices] = logits.topk(2);           // along the last dim: {{3, 2}, {4, 2.5}}, {{2, 0}, {0, 3}}
  auto [best, best_index] = logits.max(1);                   // {3, 4} at {2, 0}
  Tensor predicted = logits.argmax(-1);                      // {2, 0}
  auto [sorted, order] = logits.sort(/*dim=*/1, /*descending=*/true);
  Tensor log_z = logits.logsumexp(1, /*keepdim=*/true);      // (2, 1)
  bool normalised = allclose((logits - log_z).exp().sum(1), ones({2}), 1e-5, 1e-6);  // true
  Tensor column_means = logits.mean(0);                      // {3, 1, 1.5, 1.75}
  Tensor variances = logits.var(1, /*unbiased=*/false);      // {0.921875, 2.125}
  Tensor running = logits.cumsum(1);                         // {{2, 2.5, 5.5, 6.5}, {4, 5.5, 5.5, 8}}
  float total = logits.sum().item<float>();                  // 14.5
  bool any_negative = (logits < 0).any().item<bool>();       // false
  Tensor clipped = logits.clamp(0.5, 3.0).floor();           // {{2, 0, 3, 1}, {3, 1, 0, 2}}
  Tensor length = tensor({3.0, 4.0}).norm();                 // 5

  using i64v = std::vector<std::int64_t>;
  EXPECT_EQ(top_values.to_vector<float>(), (std::vector<float>{3, 2, 4, 2.5}));
  EXPECT_EQ(top_indices.to_vector<std::int64_t>(), (i64v{2, 0, 0, 3}));
  EXPECT_EQ(best.to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(best_index.to_vector<std::int64_t>(), (i64v{2, 0}));
  EXPECT_EQ(predicted.to_vector<std::int64_t>(), (i64v{2, 0}));
  EXPECT_EQ(sorted.to_vector<float>(), (std::vector<float>{3, 2, 1, 0.5, 4, 2.5, 1.5, 0}));
  EXPECT_EQ(order.to_vector<std::int64_t>(), (i64v{2, 0, 3, 1, 0, 3, 1, 2}));
  EXPECT_EQ(log_z.sizes(), (Shape{2, 1}));
  const double z0 = std::log(std::exp(2.0) + std::exp(0.5) + std::exp(3.0) + std::exp(1.0));
  const double z1 = std::log(std::exp(4.0) + std::exp(1.5) + std::exp(0.0) + std::exp(2.5));
  expect_close(log_z, from_vector<double>({z0, z1}, {2, 1}).to(kFloat32), 1e-6, 1e-6, "logsumexp");
  EXPECT_TRUE(normalised);
  EXPECT_EQ(column_means.to_vector<float>(), (std::vector<float>{3, 1, 1.5, 1.75}));
  expect_close(variances, tensor({0.921875, 2.125}), 1e-6, 0, "var");
  EXPECT_EQ(running.to_vector<float>(), (std::vector<float>{2, 2.5, 5.5, 6.5, 4, 5.5, 5.5, 8}));
  EXPECT_EQ(total, 14.5f);
  EXPECT_FALSE(any_negative);
  EXPECT_EQ(clipped.to_vector<float>(), (std::vector<float>{2, 0, 3, 1, 3, 1, 0, 2}));
  EXPECT_EQ(length.item<float>(), 5.f);
}

TEST(ApiExamples, FromLibtorchLinalg) {
  Tensor q = randn({2, 4, 5, 8}), k = randn({2, 4, 5, 8});   // (batch, heads, tokens, head dim)
  Tensor scores = einsum("bhqd,bhkd->bhqk", {q, k}) / std::sqrt(8.0);  // = matmul(q, k.transpose(-2, -1)) / sqrt(8)
  Tensor w = randn({8, 3}), bias = randn({3});
  Tensor y = addmm(bias, q.reshape({-1, 8}), w);             // bias + x·w: (40, 3)
  Tensor per_head = bmm(q.reshape({8, 5, 8}), k.reshape({8, 5, 8}).transpose(1, 2));  // (8, 5, 5)
  Tensor u = tensor({1.0, 2.0}), v = tensor({3.0, 4.0, 5.0});
  Tensor table = outer(u, v);                                // {{3, 4, 5}, {6, 8, 10}}
  Tensor squared_length = dot(u, u);                         // 5
  Tensor trace = einsum("ii", {eye(3)});                     // 3

  EXPECT_EQ(scores.sizes(), (Shape{2, 4, 5, 5}));
  expect_close(scores, matmul(q, k.transpose(-2, -1)) / std::sqrt(8.0), 1e-5, 1e-5, "einsum");
  EXPECT_EQ(y.sizes(), (Shape{40, 3}));
  expect_close(y, matmul(q.reshape({-1, 8}), w) + bias, 1e-5, 1e-5, "addmm");
  expect_close(per_head, (scores * std::sqrt(8.0)).reshape({8, 5, 5}), 1e-5, 1e-5, "bmm");
  EXPECT_EQ(table.to_vector<float>(), (std::vector<float>{3, 4, 5, 6, 8, 10}));
  EXPECT_EQ(squared_length.dim(), 0);
  EXPECT_EQ(squared_length.item<float>(), 5.f);
  EXPECT_EQ(trace.item<float>(), 3.f);
}

TEST(ApiExamples, FromLibtorchCreationAndAccess) {
  manual_seed(42);
  Tensor sevens = full({2, 3}, 7, dtype(kInt32));
  Tensor like = zeros_like(sevens, kFloat64);                // (2, 3) float64 zeros
  Tensor noise = randn_like(like);                           // float64, like's shape and device
  Tensor steps = linspace(0, 1, 5);                          // {0, 0.25, 0.5, 0.75, 1}
  Tensor decades = logspace(0, 3, 4);                        // {1, 10, 100, 1000}
  Tensor identity = eye(3, dtype(kInt64));
  Tensor dice = randint(1, 7, {10});                         // int64 in [1, 7)
  Tensor shuffled = randperm(5);                             // a permutation of 0, ..., 4
  Tensor draws = multinomial(tensor({0.1, 0.0, 0.9}), 2);    // without replacement: 0 and 2, in some order
  Tensor coins = bernoulli(full({1000}, 0.5));               // 0 or 1 (float32)
  Tensor weight = empty({3, 4});
  weight.uniform_(-0.1, 0.1);
  weight.normal_(0, 0.02);
  float host[] = {1, 2, 3, 4, 5, 6};
  Tensor wrapped = from_blob(host, {2, 3});                  // host's memory, not copied
  auto acc = wrapped.accessor<float, 2>();
  acc[1][2] = 60;                                            // writes host[5]
  float corner = wrapped.index({1, 2}).item<float>();        // 60
  std::vector<float> flat = wrapped.to_vector<float>();      // {1, 2, 3, 4, 5, 60}
  std::cout << wrapped << "\n" << wrapped.sizes() << "\n";   // [[ 1.,  2.,  3.],
                                                             //  [ 4.,  5., 60.]]
                                                             // [ CPUFloatType{2,3} ]
                                                             // [2, 3]

  using i64v = std::vector<std::int64_t>;
  EXPECT_EQ(sevens.dtype(), kInt32);
  EXPECT_EQ(sevens.to_vector<std::int32_t>(), (std::vector<std::int32_t>(6, 7)));
  EXPECT_EQ(like.dtype(), kFloat64);
  EXPECT_EQ(like.sizes(), (Shape{2, 3}));
  EXPECT_EQ(like.to_vector<double>(), std::vector<double>(6, 0.0));
  EXPECT_EQ(noise.dtype(), kFloat64);
  EXPECT_EQ(noise.sizes(), (Shape{2, 3}));
  EXPECT_GT(noise.abs().sum().item<double>(), 0.0);
  EXPECT_EQ(steps.dtype(), kFloat32);
  EXPECT_EQ(steps.to_vector<float>(), (std::vector<float>{0, 0.25, 0.5, 0.75, 1}));
  expect_close(decades, tensor({1, 10, 100, 1000}), 1e-6, 0, "logspace");
  EXPECT_EQ(identity.to_vector<std::int64_t>(), (i64v{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(dice.dtype(), kInt64);
  for (std::int64_t d : dice.to_vector<std::int64_t>()) EXPECT_TRUE(d >= 1 && d <= 6) << d;
  std::vector<std::int64_t> perm = shuffled.to_vector<std::int64_t>();
  std::sort(perm.begin(), perm.end());
  EXPECT_EQ(perm, (i64v{0, 1, 2, 3, 4}));
  std::vector<std::int64_t> drawn = draws.to_vector<std::int64_t>();
  std::sort(drawn.begin(), drawn.end());
  EXPECT_EQ(drawn, (i64v{0, 2}));
  EXPECT_EQ(coins.dtype(), kFloat32);
  EXPECT_TRUE(equal(coins, coins.clamp(0, 1).round()));     // only zeros and ones
  const float heads = coins.sum().item<float>();
  EXPECT_TRUE(heads > 400 && heads < 600) << heads;
  EXPECT_LT(weight.abs().max().item<float>(), 0.2f);         // ten standard deviations
  EXPECT_GT(weight.std().item<float>(), 0.005f);
  EXPECT_EQ(host[5], 60.f);
  EXPECT_EQ(corner, 60.f);
  EXPECT_EQ(flat, (std::vector<float>{1, 2, 3, 4, 5, 60}));
  std::ostringstream printed;
  printed << wrapped << "\n" << wrapped.sizes();
  EXPECT_EQ(printed.str(), "[[ 1.,  2.,  3.],\n [ 4.,  5., 60.]]\n[ CPUFloatType{2,3} ]\n[2, 3]");
  // Seeded: the same calls after manual_seed(42) draw the same numbers.
  manual_seed(42);
  EXPECT_TRUE(equal(randn_like(like), noise));
}

TEST(ApiExamples, Autograd) {
  Tensor x = randn({4}, TensorOptions().requires_grad());
  Tensor y = (x * x).sum();
  y.backward();                                          // x.grad() is 2 * x
  Tensor z;
  {
    NoGradGuard no_grad;                                 // nothing is recorded in this scope
    z = x * 3.0;
  }

  expect_close(x.grad(), x.detach() * 2.0, 1e-6, 1e-6, "d/dx sum(x^2)");
  EXPECT_FALSE(z.requires_grad());
}

TEST(ApiExamples, UserDefinedOp) {
  Tensor x = randn({3, 2}, TensorOptions(kFloat64).requires_grad());
  bool ok = gradcheck([](const std::vector<Tensor>& in) { return cube(in[0]); }, {x});

  EXPECT_TRUE(ok);
}

TEST(ApiExamples, Module) {
  Mlp model(10, 32, 3);
  Tensor logits = model(randn({8, 10}));                 // (8, 3)
  for (const auto& [name, p] : model->named_parameters())
    std::cout << name << " " << shape_str(p.sizes()) << "\n";  // fc1.weight [32, 10], fc1.bias [32], ...
  model->eval();                                         // BatchNorm/Dropout in inference mode; train() undoes it
  model->train();

  EXPECT_EQ(logits.sizes(), (Shape{8, 3}));
  EXPECT_EQ(model->named_parameters().size(), 4u);
  EXPECT_EQ(model->named_parameters()[0].first, "fc1.weight");
}

// ---- docs/API.md: the everyday toolbox (Embedding, ModuleList, CrossEntropyLoss with ignore_index) --------
struct TaggerImpl : nn::Module {
  TaggerImpl() {
    embed = register_module("embed", nn::Embedding(nn::EmbeddingOptions(1000, 64).padding_idx(0)));
    blocks = register_module("blocks", nn::ModuleList());
    for (int i = 0; i < 2; ++i) blocks->push_back(nn::Sequential(nn::Linear(64, 64), nn::SiLU()));
    head = register_module("head", nn::Linear(64, 10));
  }
  Tensor forward(const Tensor& tokens) override {      // (N, T) int64
    Tensor x = embed(tokens);                          // (N, T, 64)
    for (const auto& b : *blocks) x = x + b->forward(x);
    return head(x).permute({0, 2, 1});                 // (N, 10, T)
  }
  nn::Embedding embed{nullptr};
  nn::ModuleList blocks{nullptr};
  nn::Linear head{nullptr};
};
MINIDL_MODULE(Tagger);

TEST(ApiExamples, Toolbox) {
  const Tensor tokens = randint(0, 1000, {4, 7}, TensorOptions(kInt64));
  const Tensor tags = masked_fill(randint(1, 10, {4, 7}, TensorOptions(kInt64)), tokens.lt(200), 0);
  Tagger model;
  nn::CrossEntropyLoss loss_fn(nn::CrossEntropyLossOptions().ignore_index(0).label_smoothing(0.1));
  Tensor loss = loss_fn(model(tokens), tags);            // tags (N, T); padding tags (0) ignored
  for (const auto& p : model->named_parameters()) std::cout << p.key() << "\n";

  optim::SGD opt(model->parameters(), optim::SGDOptions(0.5));
  const double first = loss.item<double>();
  for (int i = 0; i < 30; ++i) {
    opt.zero_grad();
    loss = loss_fn(model(tokens), tags);
    loss.backward();
    opt.step();
  }
  EXPECT_LT(loss_fn(model(tokens), tags).item<double>(), 0.5 * first);
  EXPECT_EQ(model->embed->weight.select(0, 0).abs().sum().item<double>(), 0.0);  // the padding row never moved
  EXPECT_EQ(model->named_parameters().size(), 7u);
}

TEST(ApiExamples, Sequential) {
  nn::Sequential cnn(nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1)), nn::BatchNorm2d(8), nn::ReLU(),
                     nn::MaxPool2d(nn::MaxPool2dOptions(2)), nn::Flatten(), nn::Linear(8 * 14 * 14, 10));
  Tensor logits = cnn(randn({2, 1, 28, 28}));           // (2, 10)
  Tensor loss = nn::functional::cross_entropy(logits, from_vector<std::int64_t>({3, 7}, {2}));
  loss.backward();
  std::cout << *cnn << "\n";                             // the module tree with each layer's options

  EXPECT_EQ(logits.sizes(), (Shape{2, 10}));
  for (const Tensor& p : cnn->parameters()) EXPECT_TRUE(p.grad().defined());
}

TEST(ApiExamples, FusedLayers) {
  nn::ConvReLU2d conv1(nn::Conv2dOptions(1, 32, 3));   // parameters conv1.weight, conv1.bias as with Conv2d
  Tensor y = conv1(randn({8, 1, 28, 28}));              // = relu(conv2d(x, weight, bias))

  Tensor x = randn({8, 1, 28, 28});
  y = conv1(x);
  expect_close(y, relu(nn::functional::conv2d(x, conv1->weight, conv1->bias)), 0.0, 0.0, "ConvReLU2d");
}

TEST(ApiExamples, RecurrentLayers) {
  nn::LSTM lstm(nn::LSTMOptions(32, 64).num_layers(2).batch_first(true).bidirectional(true));
  auto [out, state] = lstm(randn({8, 100, 32}));         // out (8, 100, 128)
  auto [h_n, c_n] = state;                               // (4, 8, 64) each
  auto [out2, h2] = nn::GRU(32, 64)(randn({100, 8, 32}), zeros({1, 8, 64}));
  nn::LSTMCell cell(32, 64);
  auto [h, c] = cell(randn({8, 32}));                    // then cell(x, std::make_tuple(h, c))

  EXPECT_EQ(out.sizes(), (Shape{8, 100, 128}));
  EXPECT_EQ(h_n.sizes(), (Shape{4, 8, 64}));
  EXPECT_EQ(c_n.sizes(), (Shape{4, 8, 64}));
  EXPECT_EQ(out2.sizes(), (Shape{100, 8, 64}));
  EXPECT_EQ(h2.sizes(), (Shape{1, 8, 64}));
  expect_close(h2.select(0, 0), out2.select(0, 99), 0.0, 0.0, "GRU h_n is the last output");
  // The last layer's forward final state is the output's last step, its reverse one the first step's.
  expect_close(h_n.select(0, 2), out.select(1, 99).narrow(1, 0, 64), 0.0, 0.0, "LSTM forward h_n");
  expect_close(h_n.select(0, 3), out.select(1, 0).narrow(1, 64, 64), 0.0, 0.0, "LSTM reverse h_n");
  EXPECT_EQ(h.sizes(), (Shape{8, 64}));
  EXPECT_EQ(c.sizes(), (Shape{8, 64}));
}

TEST(ApiExamples, GenerativeLayers) {
  namespace F = nn::functional;
  nn::Sequential decoder(nn::ConvTranspose2d(nn::ConvTranspose2dOptions(64, 32, 4).stride(2).padding(1)), nn::ReLU(),
                         nn::Upsample(nn::UpsampleOptions().scale_factor(std::vector<double>{2, 2}).mode(kBilinear)),
                         nn::ReflectionPad2d(1), nn::Conv2d(32, 12, 3), nn::PixelShuffle(2));
  Tensor img = decoder(randn({8, 64, 7, 7}));           // (8, 3, 56, 56)
  Tensor p = F::pad(img, F::PadFuncOptions({1, 1, 2, 2}).mode(kReplicate));
  Tensor s = F::interpolate(img, F::InterpolateFuncOptions().size(std::vector<std::int64_t>{28, 28})
                                     .mode(kBilinear).align_corners(true));

  EXPECT_EQ(img.sizes(), (Shape{8, 3, 56, 56}));
  EXPECT_EQ(p.sizes(), (Shape{8, 3, 60, 58}));
  EXPECT_EQ(s.sizes(), (Shape{8, 3, 28, 28}));
  (img.sum() + p.sum() + s.sum()).backward();
  for (const Tensor& param : decoder->parameters()) EXPECT_TRUE(param.grad().defined());
}

TEST(ApiExamples, NormalizationLayers) {
  nn::LayerNorm ln(nn::LayerNormOptions({768}));
  Tensor h = ln(randn({4, 128, 768}));                   // statistics over the last dim
  std::cout << *ln << "\n";                             // LayerNorm([768], eps=1e-05, elementwise_affine=true)

  EXPECT_EQ(h.sizes(), (Shape{4, 128, 768}));
  expect_close(h.mean({-1}), zeros({4, 128}), 0.0, 1e-5, "LayerNorm row means");
  std::ostringstream os;
  os << *ln;
  EXPECT_EQ(os.str(), "LayerNorm([768], eps=1e-05, elementwise_affine=true)");
}

TEST(ApiExamples, Optim) {
  manual_seed(0);
  Mlp model(10, 32, 3);
  optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(1e-2).weight_decay(1e-2));
  optim::CosineAnnealingLR scheduler(optimizer, /*T_max=*/50);
  Tensor x = randn({64, 10});
  Tensor y = argmax(matmul(x, randn({10, 3})), 1);      // labels from a random linear map
  for (int epoch = 0; epoch < 50; ++epoch) {
    optimizer.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(x), y);
    loss.backward();
    optimizer.step();
    scheduler.step();                                    // lr follows a cosine from 1e-2 to 0 over 50 epochs
  }

  const float final_loss = nn::functional::cross_entropy(model(x), y).item<float>();
  EXPECT_LT(final_loss, 0.3f);
  EXPECT_NEAR(optimizer.lr(), 0.0, 1e-12);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
  EXPECT_EQ(sgd.lr(), 0.1);
}

TEST(ApiExamples, ParamGroupsAndClipping) {
  manual_seed(0);
  Mlp backbone(10, 32, 8), head(8, 16, 3);
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(backbone->parameters());                       // the defaults: lr 1e-3
  groups.emplace_back(head->parameters(), std::make_unique<optim::AdamWOptions>(optim::AdamWOptions(1e-2)));
  optim::AdamW optimizer(groups, optim::AdamWOptions(1e-3));
  optimizer.param_groups()[1].options().set_lr(5e-3);
  EXPECT_EQ(optimizer.param_groups()[0].options().get_lr(), 1e-3);
  EXPECT_EQ(optimizer.param_groups()[1].options().get_lr(), 5e-3);

  Mlp model(10, 32, 3);
  optim::SGD sgd(model->parameters(), 0.1);
  Tensor x = randn({64, 10}) * 100.0;  // large inputs: large gradients, which the clipping scales down
  Tensor loss = nn::functional::cross_entropy(model(x), argmax(matmul(x, randn({10, 3})), 1));
  {
    auto& optimizer = sgd;
    loss.backward();
    Tensor total = nn::utils::clip_grad_norm_(model->parameters(), /*max_norm=*/1.0);
    optimizer.step();
    EXPECT_GT(total.item<float>(), 1.0f);
    Tensor squares = zeros({});
    for (const Tensor& p : model->parameters()) squares = squares + (p.grad() * p.grad()).sum();
    EXPECT_NEAR(std::sqrt(squares.item<float>()), 1.0f, 1e-4f) << "the gradients' norm after clipping";
  }
}

TEST(ApiExamples, Data) {
  auto dataset = std::make_shared<Numbers>();
  data::DataLoader loader(dataset, data::DataLoaderOptions().set_batch_size(32).set_seed(1));
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    for (data::Batch& batch : loader.epoch(epoch)) {
      // batch.data: float32 (32, 1), the last batch (4, 1); batch.target: int64 (32)
      std::cout << "epoch " << epoch << ": " << batch.target.size(0) << " samples\n";
    }
  }

  EXPECT_EQ(loader.num_batches(), 4);
  std::vector<int> seen(100, 0);
  for (data::Batch& batch : loader.epoch(3)) {
    const auto x = batch.data.to_vector<float>();
    const auto y = batch.target.to_vector<std::int64_t>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      ++seen[static_cast<std::size_t>(x[i])];
      EXPECT_EQ(y[i], static_cast<std::int64_t>(x[i]) % 2);
    }
  }
  for (int count : seen) EXPECT_EQ(count, 1);
}

TEST(ApiExamples, Mnist) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (sudo apt-get install dataset-fashion-mnist)";
  Device device = cuda::is_available() ? Device(kCUDA) : Device(kCPU);
  auto train = std::make_shared<data::MnistDataset>(data::MnistDataset::load(
      "/usr/share/datasets/fashion-mnist", /*train=*/true, data::Normalization::fashion_mnist()));
  train->limit(1000);                                    // the first 1000 images only
  data::DataLoader mnist_loader(train, data::DataLoaderOptions().set_batch_size(128).set_device(device));

  EXPECT_EQ(train->size(), 1000);
  EXPECT_EQ(mnist_loader.num_batches(), 8);
  std::optional<data::Batch> first;
  mnist_loader.start_epoch(0);
  first = mnist_loader.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->data.sizes(), (Shape{128, 1, 28, 28}));
  EXPECT_EQ(first->data.device(), device);
}

TEST(ApiExamples, Checkpoints) {
  const std::string path = temp_path("mlp_api_example.safetensors");
  Mlp model(10, 32, 3);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  (model(randn({4, 10})).sum()).backward();
  optimizer.step();
  io::save(*model, path, {{"epoch", "1"}});              // safetensors, readable by PyTorch
  Mlp restored(10, 32, 3);
  io::load(*restored, path);                             // checks every name, shape and dtype first
  io::TrainingState state;                               // what a resumed run needs besides the model
  state.epoch = 1;
  state.optimizer = optimizer.state_dict();
  state.rng = get_rng_state();
  io::save_training_state(path + ".state", state);
  io::TrainingState back = io::load_training_state(path + ".state");
  optimizer.load_state_dict(back.optimizer);
  set_rng_state(back.rng);

  const auto saved = io::state_dict(*model), loaded = io::state_dict(*restored);
  ASSERT_EQ(saved.size(), loaded.size());
  for (const auto& [name, t] : saved) expect_close(loaded.at(name), t, 0, 0, name);
  EXPECT_EQ(back.epoch, 1);
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".state");
}

TEST(ApiExamples, Autocast) {
  Mlp amp_model(10, 32, 3);
  optim::SGD amp_opt(amp_model->parameters(), optim::SGDOptions(0.05));
  Tensor amp_x = randn({8, 10}), amp_y = randint(0, 3, {8});
  Tensor amp_loss;
  {
    autocast::AutocastGuard guard(kCPU, kBFloat16);      // torch.autocast("cpu", dtype=torch.bfloat16)
    Tensor logits = amp_model(amp_x);                    // the linear layers in bfloat16
    amp_loss = nn::functional::cross_entropy(logits, amp_y);  // the loss in float32
  }
  amp_opt.zero_grad();
  amp_loss.backward();                                   // gradients of the float32 parameters in float32
  amp_opt.step();
  EXPECT_EQ(amp_loss.dtype(), kFloat32);
  for (const auto& p : amp_model->parameters()) {
    EXPECT_EQ(p.dtype(), kFloat32);
    EXPECT_EQ(p.grad().dtype(), kFloat32);
  }
  EXPECT_FALSE(autocast::is_autocast_enabled(kCPU));
}

TEST(ApiExamples, DevicesAndThreads) {
  std::cout << "minidl " << version() << ", CUDA " << (cuda::is_available() ? "available" : "not available")
            << ", " << get_num_threads() << " CPU threads\n";
  Mlp model(10, 32, 3);
  if (cuda::is_available()) {
    model->to(Device(kCUDA));                            // moves parameters and buffers in place
    Tensor out = model(randn({8, 10}).cuda());           // inputs must be on the model's device
    std::cout << out.cpu() << "\n";
  }

  EXPECT_EQ(version(), MINIDL_VERSION_STRING);
}

// ---- the documentation matches this file -----------------------------------------------------------------

namespace {
/// Lines without surrounding whitespace, blank lines dropped, joined with '\n'.
std::string normalized(std::istream& in) {
  std::string line, out;
  while (std::getline(in, line)) {
    const auto b = line.find_first_not_of(" \t"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos) continue;
    out += line.substr(b, e - b + 1);
    out += '\n';
  }
  return out;
}
}  // namespace

TEST(ApiExamples, Attention) {
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(64, 8));
  Tensor x = randn({10, 2, 64});                                    // (L, N, E)
  Tensor causal = ones({10, 10}, kBool).triu(1);                    // true: not allowed (PyTorch's sense here)
  auto [y, w] = mha->forward(x, x, x, {}, /*need_weights=*/true, causal);  // y (10, 2, 64), w (2, 10, 10)
  auto [y2, none] = mha->forward(x, x, x, {}, /*need_weights=*/false, causal);  // through scaled_dot_product_attention
  Tensor q = randn({2, 8, 10, 8});                                  // (N, heads, L, head_dim)
  Tensor o = nn::functional::scaled_dot_product_attention(q, q, q, {}, 0.0, /*is_causal=*/true);
  EXPECT_EQ(y.sizes(), (Shape{10, 2, 64}));
  EXPECT_EQ(w.sizes(), (Shape{2, 10, 10}));
  expect_close(y2, y, 1e-5, 1e-6, "need_weights false");
  expect_close(w.triu(1), zeros({2, 10, 10}), 0, 0, "causal weights");
  EXPECT_EQ(o.sizes(), q.sizes());
  EXPECT_FALSE(none.defined());
}

TEST(ApiExamples, LowPrecisionLayers) {
  namespace F = nn::functional;
  Tensor x = randn({8, 3, 32, 32}).to(kBFloat16);         // .to(kCUDA): cuDNN on the tensor cores
  Tensor w = randn({16, 3, 3, 3}).to(kBFloat16);
  Tensor y = F::max_pool2d(F::conv2d_relu(x, w), 2);      // bfloat16 (8, 16, 15, 15), float32 sums inside
  Tensor h = F::layer_norm(y.flatten(1), {3600}, ones({3600}));  // float32 weight: bfloat16 out
  EXPECT_EQ(y.sizes(), (Shape{8, 16, 15, 15}));
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(h.dtype(), kBFloat16);
  expect_close(h.to(kFloat64), F::layer_norm(y.to(kFloat64).flatten(1), {3600}), 1.6e-2, 1e-5, "layer_norm");
}

TEST(ApiExamples, GradScaler) {
  manual_seed(0);
  Mlp net(10, 32, 3);
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  amp::GradScaler scaler;                                // PyTorch's defaults: 2^16, x2 every 2000 clean steps
  Tensor inputs = randn({64, 10});
  Tensor labels = argmax(matmul(inputs, randn({10, 3})), 1);
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(net(inputs), labels);
    scaler.scale(loss).backward();                       // the gradients of loss * scale
    scaler.unscale_(opt);                                // the true gradients, for clipping
    nn::utils::clip_grad_norm_(net->parameters(), 1.0);
    scaler.step(opt);                                    // skipped on the device when a gradient is inf or NaN
    scaler.update();                                     // x0.5 after a skipped step
  }

  manual_seed(0);  // the same model and data, untrained
  Mlp untrained(10, 32, 3);
  Tensor same_inputs = randn({64, 10});
  EXPECT_TRUE(equal(same_inputs, inputs));
  EXPECT_LT(nn::functional::cross_entropy(net(inputs), labels).item<float>(),
            nn::functional::cross_entropy(untrained(inputs), labels).item<float>());
  EXPECT_EQ(scaler.get_scale(), 65536.0) << "float32 gradients never overflow here";
}

TEST(ApiExamples, LowPrecisionCheckpoints) {
  const std::string path = temp_path("lowp_api_example.safetensors");
  io::save_state_dict({{"weight", randn({4, 4}).to(kBFloat16)}, {"bias", zeros({4}, TensorOptions(kFloat16))}},
                      path + ".half");                   // dtypes BF16 and F16 in the file

  const io::SafetensorsContents contents = io::read_safetensors(path + ".half");
  ASSERT_EQ(contents.tensors.size(), 2u);
  for (const io::TensorRecord& r : contents.tensors) EXPECT_EQ(r.dtype, r.name == "weight" ? "BF16" : "F16");
  std::filesystem::remove(path + ".half");
}

TEST(ApiExamples, DocsMatch) {
  const std::filesystem::path self(__FILE__);
  const std::filesystem::path doc = self.parent_path().parent_path() / "docs" / "API.md";
  std::ifstream self_file(self);
  if (!self_file) GTEST_SKIP() << "the sources are not at " << self << " (a relocated build)";
  std::ifstream doc_file(doc);
  ASSERT_TRUE(doc_file) << "cannot read " << doc;
  std::stringstream whole;
  whole << self_file.rdbuf();
  const std::string code = normalized(whole);
  std::string line, block;
  int blocks = 0, line_no = 0, block_start = 0;
  bool in_block = false;
  while (std::getline(doc_file, line)) {
    ++line_no;
    if (!in_block && line.rfind("```cpp", 0) == 0) {
      in_block = true;
      block.clear();
      block_start = line_no;
    } else if (in_block && line.rfind("```", 0) == 0) {
      in_block = false;
      ++blocks;
      std::istringstream block_in(block);
      EXPECT_TRUE(code.find(normalized(block_in)) != std::string::npos)
          << "the ```cpp block at docs/API.md:" << block_start << " is not in " << self.filename();
    } else if (in_block) {
      block += line + "\n";
    }
  }
  EXPECT_FALSE(in_block) << "unterminated ```cpp block at docs/API.md:" << block_start;
  EXPECT_GE(blocks, 10) << "docs/API.md should have an example for each part of the API";
}
