// The everyday nn toolbox (issue 24): activations (silu, softplus, elu, mish, hardswish, gelu tanh, logsigmoid,
// softmax2d), Embedding and one_hot, the losses with LibTorch's options, ModuleList / ModuleDict / Identity, empty
// holders, named_parameters() as an OrderedDict and module printing. Each op: float64 gradcheck of every option,
// values against an independent reference (element loops or other ops), float32 and float64, transposed and
// empty inputs, typed errors, the GPU against the CPU (skipped without one), and PyTorch's values from
// tests/golden/nn_basics_golden.json (written by tests/golden/gen_nn_basics_golden.py).
#include <cmath>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden_file.h"
#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;
using json = nlohmann::json;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}

/// Values in [lo, hi] kept at least `gap` away from each of `kinks`, so finite differences never cross one.
Tensor away_from(const Shape& s, std::vector<double> kinks, double lo = -4.0, double hi = 4.0, double gap = 0.05) {
  std::vector<double> v = uniform(s, lo, hi, kFloat64).to_vector<double>();
  for (double& x : v) {
    for (double k : kinks) {
      if (std::fabs(x - k) < gap) x = k + (x >= k ? gap : -gap);
    }
  }
  return from_vector(v, s);
}

// ---- activations ---------------------------------------------------------------------------------------------

struct Activation {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> reference;
  std::vector<double> kinks;
};

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus_ref(double x, double beta, double threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

std::vector<Activation> activations() {
  const double k = std::sqrt(2.0 / M_PI);
  return {
      {"silu", [](const Tensor& x) { return F::silu(x); }, [](double x) { return x * sigmoid_ref(x); }, {}},
      {"softplus",
       [](const Tensor& x) { return F::softplus(x); },
       [](double x) { return softplus_ref(x, 1.0, 20.0); },
       {}},
      {"softplus(beta=2, threshold=3)",
       [](const Tensor& x) { return F::softplus(x, F::SoftplusFuncOptions().beta(2).threshold(3)); },
       [](double x) { return softplus_ref(x, 2.0, 3.0); },
       {1.5}},
      {"elu", [](const Tensor& x) { return F::elu(x); }, [](double x) { return x > 0 ? x : std::expm1(x); }, {0.0}},
      {"elu(alpha=0.5)",
       [](const Tensor& x) { return F::elu(x, F::ELUFuncOptions().alpha(0.5)); },
       [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); },
       {0.0}},
      {"mish",
       [](const Tensor& x) { return F::mish(x); },
       [](double x) { return x * std::tanh(std::log1p(std::exp(x))); },
       {}},
      {"hardswish",
       [](const Tensor& x) { return F::hardswish(x); },
       [](double x) { return x <= -3  ? 0.0
                             : x >= 3 ? x
                                      : x * (x + 3) / 6; },
       {-3.0, 3.0}},
      {"gelu(tanh)",
       [](const Tensor& x) { return F::gelu(x, F::GELUFuncOptions().approximate("tanh")); },
       [k](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); },
       {}},
      {"gelu(none)",
       [](const Tensor& x) { return F::gelu(x, F::GELUFuncOptions()); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       {}},
      {"logsigmoid",
       [](const Tensor& x) { return F::logsigmoid(x); },
       [](double x) { return std::log(sigmoid_ref(x)); },
       {}},
  };
}

TEST(NnBasicsActivations, MatchTheirFormulasInFloat32AndFloat64) {
  for (const Activation& a : activations()) {
    for (DType dt : {kFloat64, kFloat32}) {
      const Tensor x = away_from({7, 9}, a.kinks).to(dt);
      const Tensor y = a.op(x);
      EXPECT_EQ(y.dtype(), dt) << a.name;
      std::vector<double> expected;
      for (double v : x.to(kFloat64).to_vector<double>()) expected.push_back(a.reference(v));
      const double tol = dt == kFloat64 ? 1e-12 : 2e-6;
      expect_close(y, from_vector(expected, x.sizes()), tol, tol, a.name + " " + dtype_name(dt));
    }
  }
}

TEST(NnBasicsActivations, ExtremeInputsStayFinite) {
  const Tensor x = from_vector<double>({-800.0, -50.0, 50.0, 800.0}, {4});
  for (const Activation& a : activations()) {
    const std::vector<double> y = a.op(x).to_vector<double>();
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_TRUE(std::isfinite(y[i])) << a.name << " at " << i;
  }
  const std::vector<double> ls = F::logsigmoid(x).to_vector<double>();
  EXPECT_DOUBLE_EQ(ls[0], -800.0);
  EXPECT_DOUBLE_EQ(ls[3], 0.0 - std::log1p(std::exp(-800.0)));
}

TEST(NnBasicsActivations, GradcheckFloat64) {
  for (const Activation& a : activations()) {
    const Tensor x = leaf(away_from({3, 4}, a.kinks));
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return a.op(in[0]); }, {x})) << a.name;
  }
  const Tensor x = leaf(random_tensor({2, 3, 4, 5}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return F::softmax2d(in[0]); }, {x}));
}

TEST(NnBasicsActivations, TransposedAndEmptyInputs) {
  for (const Activation& a : activations()) {
    const Tensor base = away_from({6, 5}, a.kinks);
    const Tensor t = base.t();  // non-contiguous
    expect_close(a.op(t), a.op(t.contiguous()), 0, 0, a.name + " transposed");
    const Tensor sliced = base.slice(1, 1, 4);
    expect_close(a.op(sliced), a.op(sliced.contiguous()), 0, 0, a.name + " sliced");
    const Tensor empty_in = leaf(zeros({0, 3}, TensorOptions(kFloat64)));
    const Tensor y = a.op(empty_in);
    EXPECT_EQ(y.sizes(), (Shape{0, 3})) << a.name;
    y.sum().backward();
    EXPECT_EQ(empty_in.grad().sizes(), (Shape{0, 3})) << a.name;
  }
}

TEST(NnBasicsActivations, ModulesAndSoftmaxForms) {
  const Tensor x = random_tensor({2, 3, 4, 4});
  expect_close(nn::SiLU()(x), F::silu(x), 0, 0, "SiLU");
  expect_close(nn::Softplus(nn::SoftplusOptions().beta(3))(x), F::softplus(x, F::SoftplusFuncOptions().beta(3)), 0, 0,
               "Softplus");
  expect_close(nn::ELU(nn::ELUOptions().alpha(2))(x), F::elu(x, F::ELUFuncOptions().alpha(2)), 0, 0, "ELU");
  expect_close(nn::Mish()(x), F::mish(x), 0, 0, "Mish");
  expect_close(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2))(x), leaky_relu(x, 0.2), 0, 0, "LeakyReLU");
  expect_close(F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(0.3)), leaky_relu(x, 0.3), 0, 0,
               "F::leaky_relu options");
  expect_close(nn::LeakyReLU()(x), leaky_relu(x, 0.01), 0, 0, "LeakyReLU default slope");
  expect_close(nn::Hardswish()(x), F::hardswish(x), 0, 0, "Hardswish");
  expect_close(nn::GELU(nn::GELUOptions().approximate("tanh"))(x), F::gelu(x, F::GELUFuncOptions().approximate("tanh")),
               0, 0, "GELU");
  expect_close(nn::Softmax2d()(x), softmax(x, 1), 0, 0, "Softmax2d 4-d");
  expect_close(nn::Softmax2d()(x.select(0, 0)), softmax(x.select(0, 0), 0), 0, 0, "Softmax2d 3-d");
  expect_close(nn::Softmax(nn::SoftmaxOptions(2))(x), softmax(x, 2), 0, 0, "Softmax");
  expect_close(nn::LogSoftmax(1)(x), log_softmax(x, 1), 0, 0, "LogSoftmax");
  expect_close(F::softmax(x, F::SoftmaxFuncOptions(-1)), softmax(x, -1), 0, 0, "F::softmax options");
  expect_close(nn::Identity()(x), x, 0, 0, "Identity");
  EXPECT_TRUE(nn::Identity()(x).is_same(x));
}

TEST(NnBasicsActivations, EluInplaceOverwritesTheInputAndKeepsTheGradient) {
  const Tensor x0 = away_from({4, 5}, {0.0});
  const Tensor expected = F::elu(x0, F::ELUFuncOptions().alpha(0.7));
  Tensor x = x0.clone();
  const Tensor y = F::elu(x, F::ELUFuncOptions().alpha(0.7).inplace(true));
  expect_close(x, expected, 0, 0, "elu_ wrote its input");
  EXPECT_TRUE(y.is_same(x));
  const Tensor a = leaf(x0.clone());
  Tensor b = a * 1.0;
  F::elu(b, F::ELUFuncOptions().inplace(true)).sum().backward();
  const Tensor c = leaf(x0.clone());
  F::elu(c).sum().backward();
  expect_close(a.grad(), c.grad(), 0, 0, "gradient through elu_");
}

TEST(NnBasicsActivations, LeakyReluInplaceOverwritesTheInputAndKeepsTheGradient) {
  const Tensor x0 = away_from({4, 5}, {0.0});
  for (const double slope : {0.2, -0.5}) {  // a negative slope too: its backward reads the saved input, not the output
    const Tensor expected = leaky_relu(x0, slope);
    Tensor x = x0.clone();
    const Tensor y = F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(slope).inplace(true));
    expect_close(x, expected, 0, 0, "leaky_relu_ wrote its input");
    EXPECT_TRUE(y.is_same(x));
    Tensor v = x0.clone();
    EXPECT_TRUE(leaky_relu_(v, slope).is_same(v));
    expect_close(v, expected, 0, 0, "minidl::leaky_relu_");
    const Tensor a = leaf(x0.clone());
    Tensor b = a * 1.0;
    nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(slope).inplace(true))(b).sum().backward();
    const Tensor c = leaf(x0.clone());
    leaky_relu(c, slope).sum().backward();
    expect_close(a.grad(), c.grad(), 0, 0, "gradient through leaky_relu_");
  }
  std::ostringstream printed;
  printed << *nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2).inplace(true));
  EXPECT_EQ(printed.str(), "LeakyReLU(negative_slope=0.2, inplace=true)");
}

TEST(NnBasicsActivations, BadInputIsTyped) {
  Tensor integral = ones({3}, TensorOptions(kInt64));
  EXPECT_ERROR(TypeError, leaky_relu_(integral, 0.1), "leaky_relu_", "int64");
  EXPECT_ERROR(ValueError, F::gelu(random_tensor({2}), F::GELUFuncOptions().approximate("erf")), "gelu", "approximate",
               "erf");
  EXPECT_ERROR(ValueError, F::softmax2d(random_tensor({2, 3})), "Softmax2d", "[2, 3]");
  EXPECT_ERROR(TypeError, F::silu(ones({3}, TensorOptions(kInt64))), "silu");
  EXPECT_ERROR(ValueError, F::softplus(random_tensor({2}), F::SoftplusFuncOptions().beta(0)), "softplus", "beta");
}

// ---- embedding and one_hot -----------------------------------------------------------------------------------

Tensor indices(const Shape& s, std::int64_t n) { return randint(0, n, s, TensorOptions(kInt64)); }

TEST(NnBasicsEmbedding, InitIsStandardNormalWithThePaddingRowZeroed) {
  manual_seed(3);
  nn::Embedding e(nn::EmbeddingOptions(400, 50).padding_idx(-2));
  EXPECT_EQ(*e->options.padding_idx(), 398);
  EXPECT_EQ(e->weight.sizes(), (Shape{400, 50}));
  EXPECT_TRUE(e->weight.requires_grad());
  const Tensor rest = cat({e->weight.slice(0, 0, 398), e->weight.slice(0, 399, 400)}, 0);
  EXPECT_NEAR(rest.mean().item<double>(), 0.0, 0.02);
  EXPECT_NEAR(rest.std().item<double>(), 1.0, 0.02);
  EXPECT_EQ(e->weight.select(0, 398).abs().sum().item<double>(), 0.0);
  std::ostringstream os;
  os << e;
  EXPECT_EQ(os.str(), "Embedding(num_embeddings=400, embedding_dim=50, padding_idx=398)");
}

TEST(NnBasicsEmbedding, ForwardPicksRowsForAnyIndexShape) {
  nn::Embedding e(10, 3);
  for (const Shape& s : {Shape{}, Shape{5}, Shape{2, 3}, Shape{2, 0, 4}, Shape{2, 2, 3}}) {
    const Tensor ix = indices(s, 10);
    const Tensor y = e(ix);
    Shape expected_shape = s;
    expected_shape.push_back(3);
    ASSERT_EQ(y.sizes(), expected_shape);
    expect_close(y, index_select(e->weight, 0, ix.reshape({-1})).reshape(expected_shape), 0, 0, shape_str(s));
  }
  const Tensor ix = indices({4, 6}, 10);
  expect_close(e(ix.t()), e(ix.t().contiguous()), 0, 0, "transposed indices");
  expect_close(e(ix.to(kInt32)), e(ix), 0, 0, "int32 indices");
  expect_close(F::embedding(ix, e->weight.t().contiguous().t()), e(ix), 0, 0, "transposed weight");
}

TEST(NnBasicsEmbedding, GradientSkipsThePaddingRow) {
  const Tensor w = leaf(random_tensor({6, 4}));
  const Tensor ix = from_vector<std::int64_t>({1, 2, 2, 5, 1, 2, 0, 3}, {2, 4});
  const Tensor g = random_tensor({2, 4, 4});
  F::embedding(ix, w, F::EmbeddingFuncOptions().padding_idx(2)).backward(g);
  std::vector<double> expected(6 * 4, 0.0);
  const std::vector<std::int64_t> iv = ix.to_vector<std::int64_t>();
  const std::vector<double> gv = g.to_vector<double>();
  for (std::size_t i = 0; i < iv.size(); ++i) {
    if (iv[i] == 2) continue;
    for (int d = 0; d < 4; ++d) expected[static_cast<std::size_t>(iv[i] * 4 + d)] += gv[i * 4 + d];
  }
  expect_close(w.grad(), from_vector(expected, {6, 4}), 1e-14, 1e-14, "embedding gradient");
}

TEST(NnBasicsEmbedding, GradcheckFloat64) {
  const Tensor w = leaf(random_tensor({7, 3}));
  const Tensor ix = from_vector<std::int64_t>({0, 3, 3, 6, 2, 3}, {3, 2});
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return F::embedding(ix, in[0]); }, {w}));
  // The padding row's zero gradient is by design (not the derivative: GradientSkipsThePaddingRow checks it), so
  // with padding the check runs on indices that never pick it.
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) { return F::embedding(ix, in[0], F::EmbeddingFuncOptions().padding_idx(1)); },
      {w}));
}

TEST(NnBasicsEmbedding, FromPretrainedSharesTheTableAndFreezes) {
  const Tensor table = random_tensor({5, 2});
  nn::Embedding frozen = nn::Embedding::from_pretrained(table);
  EXPECT_FALSE(frozen->weight.requires_grad());
  EXPECT_EQ(frozen->weight.data_ptr(), table.data_ptr());
  nn::Embedding trained =
      nn::Embedding::from_pretrained(table, nn::EmbeddingFromPretrainedOptions().freeze(false).padding_idx(0));
  EXPECT_TRUE(trained->weight.requires_grad());
  expect_close(trained(from_vector<std::int64_t>({4, 0}, {2})),
               index_select(table, 0, from_vector<std::int64_t>({4, 0}, {2})), 0, 0, "from_pretrained rows");
}

TEST(NnBasicsEmbedding, BadInputIsTyped) {
  nn::Embedding e(5, 2);
  EXPECT_ERROR(IndexError, e(from_vector<std::int64_t>({1, 5}, {2})), "Embedding", "5", "[0, 5)");
  EXPECT_ERROR(IndexError, e(from_vector<std::int64_t>({-1}, {1})), "Embedding", "-1");
  EXPECT_ERROR(IndexError, F::embedding(from_vector<std::int64_t>({7}, {1}), e->weight), "embedding", "7");
  EXPECT_ERROR(TypeError, e(random_tensor({2})), "Embedding", "input");
  EXPECT_ERROR(ValueError, nn::Embedding(nn::EmbeddingOptions(5, 2).padding_idx(5)), "Embedding", "padding_idx");
  EXPECT_ERROR(ValueError, F::embedding(indices({2}, 3), random_tensor({3})), "embedding", "2-d");
}

TEST(NnBasicsOneHot, MatchesAnElementLoop) {
  const Tensor t = indices({3, 4}, 6);
  for (std::int64_t classes : {-1, 6, 9}) {
    const Tensor y = F::one_hot(t, classes);
    const std::int64_t c = classes == -1 ? t.max().item<std::int64_t>() + 1 : classes;
    ASSERT_EQ(y.sizes(), (Shape{3, 4, c}));
    EXPECT_EQ(y.dtype(), kInt64);
    const std::vector<std::int64_t> tv = t.to_vector<std::int64_t>(), yv = y.to_vector<std::int64_t>();
    for (std::size_t i = 0; i < tv.size(); ++i) {
      for (std::int64_t k = 0; k < c; ++k) {
        ASSERT_EQ(yv[i * static_cast<std::size_t>(c) + static_cast<std::size_t>(k)], tv[i] == k ? 1 : 0);
      }
    }
  }
  EXPECT_EQ(F::one_hot(t.t(), 6).sizes(), (Shape{4, 3, 6}));
  expect_close(F::one_hot(t.t(), 6), F::one_hot(t.t().contiguous(), 6), 0, 0, "transposed");
  EXPECT_EQ(F::one_hot(zeros({0}, TensorOptions(kInt64)), 4).sizes(), (Shape{0, 4}));
  EXPECT_ERROR(ValueError, F::one_hot(from_vector<std::int64_t>({0, 4}, {2}), 3), "one_hot", "num_classes");
  EXPECT_ERROR(ValueError, F::one_hot(from_vector<std::int64_t>({-1}, {1}), 3), "one_hot", "non-negative");
  EXPECT_ERROR(ValueError, F::one_hot(zeros({0}, TensorOptions(kInt64))), "one_hot", "empty");
  EXPECT_ERROR(TypeError, F::one_hot(random_tensor({2})), "one_hot", "int64");
}

// ---- losses --------------------------------------------------------------------------------------------------

double reduce_ref(const std::vector<double>& l, nn::Reduction r, double denom) {
  double s = 0;
  for (double v : l) s += v;
  return r == nn::Reduction::Sum ? s : s / denom;
}

/// Checks a pointwise loss against a per-element reference for every reduction, float64 and float32.
void expect_pointwise(const std::string& name,
                      const std::function<Tensor(const Tensor&, const Tensor&, nn::Reduction)>& loss,
                      const std::function<double(double, double)>& ref, const Tensor& x, const Tensor& t) {
  const std::vector<double> xv = x.to_vector<double>(), tv = t.to_vector<double>();
  std::vector<double> per;
  for (std::size_t i = 0; i < xv.size(); ++i) per.push_back(ref(xv[i], tv[i]));
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-12 : 3e-5;
    const Tensor xd = x.to(dt), td = t.to(dt);
    expect_close(loss(xd, td, kNone), from_vector(per, x.sizes()), tol, tol, name + " none");
    EXPECT_NEAR(loss(xd, td, kSum).item<double>(), reduce_ref(per, kSum, 1), tol * xv.size()) << name;
    EXPECT_NEAR(loss(xd, td, kMean).item<double>(), reduce_ref(per, kMean, static_cast<double>(xv.size())), tol)
        << name;
  }
  // Transposed operands, and an empty batch (mean of nothing: NaN, as PyTorch).
  expect_close(loss(x.t(), t.t(), kNone), loss(x.t().contiguous(), t.t().contiguous(), kNone), 0, 0,
               name + " transposed");
  const Tensor e = zeros({0, x.size(1)}, TensorOptions(kFloat64));
  EXPECT_EQ(loss(e, e, kNone).sizes(), e.sizes()) << name;
  EXPECT_EQ(loss(e, e, kSum).item<double>(), 0.0) << name;
  EXPECT_TRUE(std::isnan(loss(e, e, kMean).item<double>())) << name;
}

TEST(NnBasicsLosses, PointwiseLossesMatchTheirFormulas) {
  const Tensor p = random_tensor({4, 5}, kFloat64, false, 0.02, 0.98);
  const Tensor y = random_tensor({4, 5}, kFloat64, false, 0.0, 1.0);
  const Tensor w = random_tensor({5}, kFloat64, false, 0.5, 2.0);
  const std::vector<double> wv = w.to_vector<double>();
  expect_pointwise(
      "binary_cross_entropy",
      [](const Tensor& a, const Tensor& b, nn::Reduction r) {
        return F::binary_cross_entropy(a, b, F::BinaryCrossEntropyFuncOptions().reduction(r));
      },
      [](double a, double b) { return -(b * std::log(a) + (1 - b) * std::log(1 - a)); }, p, y);
  const Tensor z = random_tensor({4, 5}, kFloat64, false, -6, 6);
  const Tensor pw = random_tensor({5}, kFloat64, false, 0.5, 3.0);
  const std::vector<double> pwv = pw.to_vector<double>();
  {  // weight and pos_weight vary along the last dim: check per element with the column known
    const Tensor got = F::binary_cross_entropy_with_logits(
        z, y, F::BinaryCrossEntropyWithLogitsFuncOptions().weight(w).pos_weight(pw).reduction(kNone));
    const std::vector<double> zv = z.to_vector<double>(), yv = y.to_vector<double>();
    std::vector<double> expected;
    for (std::size_t i = 0; i < zv.size(); ++i) {
      const double ls = std::log(sigmoid_ref(zv[i])), l1s = std::log(1 - sigmoid_ref(zv[i]));
      expected.push_back(-wv[i % 5] * (pwv[i % 5] * yv[i] * ls + (1 - yv[i]) * l1s));
    }
    expect_close(got, from_vector(expected, z.sizes()), 1e-12, 1e-12, "bce_with_logits weight pos_weight");
    const Tensor bce_w = F::binary_cross_entropy(p, y, F::BinaryCrossEntropyFuncOptions().weight(w).reduction(kNone));
    expect_close(bce_w, F::binary_cross_entropy(p, y, F::BinaryCrossEntropyFuncOptions().reduction(kNone)) * w, 1e-14,
                 0, "bce weight");
  }
  expect_pointwise(
      "binary_cross_entropy_with_logits",
      [](const Tensor& a, const Tensor& b, nn::Reduction r) {
        return F::binary_cross_entropy_with_logits(a, b, F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(r));
      },
      [](double a, double b) { return -(b * std::log(sigmoid_ref(a)) + (1 - b) * std::log(1 - sigmoid_ref(a))); }, z,
      y);
  const Tensor a = random_tensor({4, 5}, kFloat64, false, -3, 3), b = random_tensor({4, 5}, kFloat64, false, -3, 3);
  expect_pointwise(
      "l1_loss", [](const Tensor& u, const Tensor& v, nn::Reduction r) { return F::l1_loss(u, v, r); },
      [](double u, double v) { return std::fabs(u - v); }, a, b);
  for (double beta : {0.0, 0.5, 2.0}) {
    expect_pointwise(
        "smooth_l1_loss beta=" + std::to_string(beta),
        [beta](const Tensor& u, const Tensor& v, nn::Reduction r) {
          return F::smooth_l1_loss(u, v, F::SmoothL1LossFuncOptions(r).beta(beta));
        },
        [beta](double u, double v) {
          const double d = std::fabs(u - v);
          return beta == 0 ? d : d < beta ? 0.5 * d * d / beta : d - 0.5 * beta;
        },
        a, b);
  }
  for (double delta : {0.3, 1.0, 2.5}) {
    expect_pointwise(
        "huber_loss delta=" + std::to_string(delta),
        [delta](const Tensor& u, const Tensor& v, nn::Reduction r) {
          return F::huber_loss(u, v, F::HuberLossFuncOptions(r).delta(delta));
        },
        [delta](double u, double v) {
          const double d = std::fabs(u - v);
          return d < delta ? 0.5 * d * d : delta * (d - 0.5 * delta);
        },
        a, b);
  }
  const Tensor lp = log_softmax(random_tensor({4, 5}), 1), q = softmax(random_tensor({4, 5}), 1);
  expect_pointwise(
      "kl_div",
      [](const Tensor& u, const Tensor& v, nn::Reduction r) { return F::kl_div(u, v, F::KLDivFuncOptions(r)); },
      [](double u, double v) { return v == 0 ? 0.0 : v * (std::log(v) - u); }, lp, q);
  expect_pointwise(
      "kl_div log_target",
      [](const Tensor& u, const Tensor& v, nn::Reduction r) {
        return F::kl_div(u, v, F::KLDivFuncOptions(r).log_target(true));
      },
      [](double u, double v) { return std::exp(v) * (v - u); }, lp, log(q));
  EXPECT_NEAR(F::kl_div(lp, q, F::KLDivFuncOptions(kBatchMean)).item<double>(),
              F::kl_div(lp, q, F::KLDivFuncOptions(kSum)).item<double>() / 4, 1e-14);
  // A zero target contributes zero (xlogy), not NaN.
  const Tensor q0 = q.masked_fill(q.lt(0.15), 0.0);
  const std::vector<double> kl0 = F::kl_div(lp, q0, F::KLDivFuncOptions(kNone)).to_vector<double>();
  for (double v : kl0) EXPECT_TRUE(std::isfinite(v));
}

TEST(NnBasicsLosses, GradcheckEveryOption) {
  const auto check = [](const std::string& name, const Fn& fn, const std::vector<Tensor>& in) {
    EXPECT_TRUE(gradcheck(fn, in)) << name;
  };
  const Tensor p = leaf(random_tensor({3, 4}, kFloat64, false, 0.05, 0.95));
  const Tensor y = leaf(random_tensor({3, 4}, kFloat64, false, 0.0, 1.0));
  const Tensor w = leaf(random_tensor({4}, kFloat64, false, 0.5, 2.0));
  const Tensor pw = leaf(random_tensor({4}, kFloat64, false, 0.5, 2.0));
  const Tensor z = leaf(random_tensor({3, 4}, kFloat64, false, -4, 4));
  for (nn::Reduction r : {kNone, kMean, kSum}) {
    const std::string rs = std::to_string(static_cast<int>(r));
    check("bce " + rs,
          [r](const std::vector<Tensor>& i) {
            return F::binary_cross_entropy(i[0], i[1], F::BinaryCrossEntropyFuncOptions().weight(i[2]).reduction(r));
          },
          {p, y, w});
    check("bce_with_logits " + rs,
          [r](const std::vector<Tensor>& i) {
            return F::binary_cross_entropy_with_logits(
                i[0], i[1], F::BinaryCrossEntropyWithLogitsFuncOptions().weight(i[2]).pos_weight(i[3]).reduction(r));
          },
          {z, y, w, pw});
    const Tensor a = leaf(away_from({3, 4}, {}, -2, 2)), b = away_from({3, 4}, {}, -2, 2);
    // keep |a - b| away from the kinks at 0, beta and delta
    const Tensor d = a.detach() - b;
    const Tensor b2 = leaf(b + where(d.abs().lt(0.05), 0.1, 0.0));
    check("l1 " + rs, [r](const std::vector<Tensor>& i) { return F::l1_loss(i[0], i[1], r); }, {a, b2});
    check("smooth_l1 " + rs,
          [r](const std::vector<Tensor>& i) {
            return F::smooth_l1_loss(i[0], i[1], F::SmoothL1LossFuncOptions(r).beta(0.25));
          },
          {a, b2});
    check(
        "huber " + rs,
        [r](const std::vector<Tensor>& i) { return F::huber_loss(i[0], i[1], F::HuberLossFuncOptions(r).delta(0.75)); },
        {a, b2});
    const Tensor lp = leaf(random_tensor({3, 4}, kFloat64, false, -3, -0.1));
    const Tensor q = leaf(random_tensor({3, 4}, kFloat64, false, 0.05, 1.0));
    check("kl_div " + rs, [r](const std::vector<Tensor>& i) { return F::kl_div(i[0], i[1], F::KLDivFuncOptions(r)); },
          {lp, q});
    check("kl_div log_target " + rs,
          [r](const std::vector<Tensor>& i) { return F::kl_div(i[0], i[1], F::KLDivFuncOptions(r).log_target(true)); },
          {lp, leaf(random_tensor({3, 4}, kFloat64, false, -3, 0))});
    const Tensor logits = leaf(random_tensor({5, 4}, kFloat64, false, -2, 2));
    const Tensor target = from_vector<std::int64_t>({0, 3, 1, 3, 2}, {5});
    const Tensor cw = leaf(random_tensor({4}, kFloat64, false, 0.5, 2.0));
    for (double eps : {0.0, 0.2}) {
      check("cross_entropy weight ignore eps=" + std::to_string(eps) + " " + rs,
            [&, r, eps](const std::vector<Tensor>& i) {
              return F::cross_entropy(
                  i[0], target,
                  F::CrossEntropyFuncOptions().weight(i[1]).ignore_index(3).label_smoothing(eps).reduction(r));
            },
            {logits, cw});
      const Tensor probs = leaf(softmax(random_tensor({5, 4}), 1).detach());
      check("cross_entropy probabilities eps=" + std::to_string(eps) + " " + rs,
            [r, eps](const std::vector<Tensor>& i) {
              return F::cross_entropy(i[0], i[1],
                                      F::CrossEntropyFuncOptions().weight(i[2]).label_smoothing(eps).reduction(r));
            },
            {logits, probs, cw});
    }
    const Tensor logits4 = leaf(random_tensor({2, 3, 2, 2}));
    const Tensor target3 = randint(0, 3, {2, 2, 2}, TensorOptions(kInt64));
    check("cross_entropy (N, C, H, W) " + rs,
          [&, r](const std::vector<Tensor>& i) {
            return F::cross_entropy(i[0], target3, F::CrossEntropyFuncOptions().reduction(r).label_smoothing(0.1));
          },
          {logits4});
  }
}

/// PyTorch's cross entropy written out: per-sample terms from the log-softmax rows, weighted mean over the
/// targets not ignored.
double cross_entropy_ref(const Tensor& logits, const std::vector<std::int64_t>& t, const std::vector<double>& w,
                         std::int64_t ignore, double eps, nn::Reduction r, std::vector<double>* per = nullptr) {
  const std::int64_t n = logits.size(0), c = logits.size(1);
  const std::vector<double> x = logits.to_vector<double>();
  double total = 0, denom = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, s = 0;
    for (std::int64_t k = 0; k < c; ++k) m = std::max(m, x[i * c + k]);
    for (std::int64_t k = 0; k < c; ++k) s += std::exp(x[i * c + k] - m);
    const double lse = m + std::log(s);
    double loss = 0;
    if (t[i] != ignore) {
      const double wt = w.empty() ? 1.0 : w[t[i]];
      double smooth = 0;
      for (std::int64_t k = 0; k < c; ++k) smooth -= (w.empty() ? 1.0 : w[k]) * (x[i * c + k] - lse);
      loss = (1 - eps) * -wt * (x[i * c + t[i]] - lse) + eps / c * smooth;
      denom += wt;
    }
    if (per) per->push_back(loss);
    total += loss;
  }
  return r == kSum ? total : total / denom;
}

TEST(NnBasicsLosses, CrossEntropyOptionsMatchAnElementLoop) {
  const Tensor logits = random_tensor({6, 5}, kFloat64, false, -3, 3);
  const std::vector<std::int64_t> tv = {0, 4, 2, 2, 1, 3};
  const Tensor target = from_vector(tv, {6});
  const Tensor w = random_tensor({5}, kFloat64, false, 0.3, 2.0);
  for (bool weighted : {false, true}) {
    for (std::int64_t ignore : {-100LL, 2LL}) {
      for (double eps : {0.0, 0.3}) {
        auto o = F::CrossEntropyFuncOptions().ignore_index(ignore).label_smoothing(eps);
        if (weighted) o.weight(w);
        const std::vector<double> wv = weighted ? w.to_vector<double>() : std::vector<double>{};
        const std::string what = "weighted=" + std::to_string(weighted) + " ignore=" + std::to_string(ignore) +
                                 " eps=" + std::to_string(eps);
        for (nn::Reduction r : {kMean, kSum}) {
          EXPECT_NEAR(F::cross_entropy(logits, target, o.reduction(r)).item<double>(),
                      cross_entropy_ref(logits, tv, wv, ignore, eps, r), 1e-12)
              << what;
          EXPECT_NEAR(F::cross_entropy(logits.to(kFloat32), target,
                                       F::CrossEntropyFuncOptions(o)
                                           .weight(weighted ? w.to(kFloat32) : Tensor())
                                           .reduction(r))
                          .item<double>(),
                      cross_entropy_ref(logits, tv, wv, ignore, eps, r), 1e-5)
              << what << " float32";
        }
        std::vector<double> per;
        cross_entropy_ref(logits, tv, wv, ignore, eps, kSum, &per);
        expect_close(F::cross_entropy(logits, target, o.reduction(kNone)), from_vector(per, {6}), 1e-12, 1e-12, what);
      }
    }
  }
  // Without options in use, the options form agrees with the fused one.
  expect_close(F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().label_smoothing(0.1)),
               F::cross_entropy(logits, target, kMean, 0.1), 1e-13, 1e-13, "fused vs options");
  // Every target ignored: the mean is 0/0 = NaN, as PyTorch.
  EXPECT_TRUE(std::isnan(
      F::cross_entropy(logits, full({6}, 7, TensorOptions(kInt64)), F::CrossEntropyFuncOptions().ignore_index(7))
          .item<double>()));
  // Ignored targets get no gradient.
  const Tensor x = leaf(logits.clone());
  F::cross_entropy(x, target, F::CrossEntropyFuncOptions().ignore_index(2)).backward();
  EXPECT_EQ(x.grad().select(0, 2).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(x.grad().select(0, 3).abs().sum().item<double>(), 0.0);
  EXPECT_GT(x.grad().select(0, 0).abs().sum().item<double>(), 0.0);
  // (C) and (N, C, d) inputs are the (1, C) and (N*d, C) problems.
  EXPECT_NEAR(
      F::cross_entropy(logits.select(0, 1), target.select(0, 1), F::CrossEntropyFuncOptions()).item<double>(),
      F::cross_entropy(logits.slice(0, 1, 2), target.slice(0, 1, 2), F::CrossEntropyFuncOptions()).item<double>(),
      1e-14);
  const Tensor x3 = random_tensor({2, 5, 3});
  const Tensor t3 = randint(0, 5, {2, 3}, TensorOptions(kInt64));
  expect_close(F::cross_entropy(x3, t3, F::CrossEntropyFuncOptions().reduction(kNone)),
               F::cross_entropy(x3.permute({0, 2, 1}).reshape({6, 5}), t3.reshape({6}),
                                F::CrossEntropyFuncOptions().reduction(kNone))
                   .reshape({2, 3}),
               1e-14, 1e-14, "(N, C, d)");
  // Transposed logits.
  const Tensor xt = random_tensor({5, 6}).t();
  expect_close(F::cross_entropy(xt, target, F::CrossEntropyFuncOptions().weight(w)),
               F::cross_entropy(xt.contiguous(), target, F::CrossEntropyFuncOptions().weight(w)), 0, 0, "transposed");
}

TEST(NnBasicsLosses, CrossEntropyProbabilityTargets) {
  const Tensor logits = random_tensor({4, 3}, kFloat64, false, -2, 2);
  const Tensor q = softmax(random_tensor({4, 3}), 1);
  const Tensor w = random_tensor({3}, kFloat64, false, 0.5, 1.5);
  const std::vector<double> lp = log_softmax(logits, 1).to_vector<double>(), qv = q.to_vector<double>(),
                            wv = w.to_vector<double>();
  for (double eps : {0.0, 0.25}) {
    std::vector<double> per(4, 0.0);
    for (int i = 0; i < 4; ++i) {
      for (int k = 0; k < 3; ++k) per[i] -= wv[k] * (qv[i * 3 + k] * (1 - eps) + eps / 3) * lp[i * 3 + k];
    }
    const auto o = F::CrossEntropyFuncOptions().weight(w).label_smoothing(eps);
    const auto with = [&](nn::Reduction r) { return F::CrossEntropyFuncOptions(o).reduction(r); };
    expect_close(F::cross_entropy(logits, q, with(kNone)), from_vector(per, {4}), 1e-12, 1e-12, "none");
    EXPECT_NEAR(F::cross_entropy(logits, q, o).item<double>(), (per[0] + per[1] + per[2] + per[3]) / 4, 1e-12);
    EXPECT_NEAR(F::cross_entropy(logits, q, with(kSum)).item<double>(), per[0] + per[1] + per[2] + per[3], 1e-12);
  }
  // One-hot probabilities give the class-index loss.
  const Tensor t = from_vector<std::int64_t>({2, 0, 1, 1}, {4});
  EXPECT_NEAR(F::cross_entropy(logits, F::one_hot(t, 3).to(kFloat64), F::CrossEntropyFuncOptions()).item<double>(),
              F::cross_entropy(logits, t).item<double>(), 1e-13);
}

TEST(NnBasicsLosses, ModulesCallTheirFunctionsAndMoveTheirWeights) {
  const Tensor p = random_tensor({3, 4}, kFloat64, false, 0.1, 0.9), y = random_tensor({3, 4}, kFloat64, false, 0, 1);
  const Tensor w = random_tensor({4}, kFloat64, false, 0.5, 2.0);
  nn::BCELoss bce(nn::BCELossOptions().weight(w).reduction(kSum));
  expect_close(bce(p, y), F::binary_cross_entropy(p, y, F::BinaryCrossEntropyFuncOptions().weight(w).reduction(kSum)),
               0, 0, "BCELoss");
  EXPECT_EQ(bce->named_buffers().keys(), std::vector<std::string>{"weight"});
  nn::BCEWithLogitsLoss bcel(nn::BCEWithLogitsLossOptions().pos_weight(w));
  expect_close(bcel(p, y),
               F::binary_cross_entropy_with_logits(p, y, F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(w)), 0,
               0, "BCEWithLogitsLoss");
  expect_close(nn::L1Loss()(p, y), F::l1_loss(p, y), 0, 0, "L1Loss");
  expect_close(nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(0.1))(p, y),
               F::smooth_l1_loss(p, y, F::SmoothL1LossFuncOptions().beta(0.1)), 0, 0, "SmoothL1Loss");
  expect_close(nn::HuberLoss(nn::HuberLossOptions().delta(0.2))(p, y),
               F::huber_loss(p, y, F::HuberLossFuncOptions().delta(0.2)), 0, 0, "HuberLoss");
  expect_close(nn::KLDivLoss(nn::KLDivLossOptions(kBatchMean))(log(p), y),
               F::kl_div(log(p), y, F::KLDivFuncOptions(kBatchMean)), 0, 0, "KLDivLoss");
  const Tensor logits = random_tensor({3, 4});
  const Tensor t = from_vector<std::int64_t>({1, 3, 0}, {3});
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().ignore_index(3).label_smoothing(0.1).weight(w));
  expect_close(ce(logits, t),
               F::cross_entropy(logits, t, F::CrossEntropyFuncOptions().ignore_index(3).label_smoothing(0.1).weight(w)),
               0, 0, "CrossEntropyLoss");
  std::ostringstream os;
  os << ce;
  EXPECT_EQ(os.str(), "CrossEntropyLoss");
}

TEST(NnBasicsLosses, BadInputIsTyped) {
  const Tensor x = random_tensor({3, 4}, kFloat64, false, 0.1, 0.9);
  const Tensor bad = random_tensor({4, 3});
  EXPECT_ERROR(ValueError, F::binary_cross_entropy(x, bad), "binary_cross_entropy", "[4, 3]", "[3, 4]");
  EXPECT_ERROR(ValueError, F::binary_cross_entropy(x * 2.0, x), "binary_cross_entropy", "between 0 and 1");
  EXPECT_ERROR(ValueError, F::binary_cross_entropy(x, x, F::BinaryCrossEntropyFuncOptions().weight(random_tensor({3}))),
               "binary_cross_entropy", "weight", "[3]");
  EXPECT_ERROR(ValueError,
               F::binary_cross_entropy_with_logits(
                   x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(random_tensor({5}))),
               "binary_cross_entropy_with_logits", "pos_weight");
  EXPECT_ERROR(ValueError, F::l1_loss(x, bad), "l1_loss", "shape");
  EXPECT_ERROR(ValueError, F::smooth_l1_loss(x, x, F::SmoothL1LossFuncOptions().beta(-1)), "smooth_l1_loss", "beta");
  EXPECT_ERROR(ValueError, F::huber_loss(x, x, F::HuberLossFuncOptions().delta(0)), "huber_loss", "delta");
  EXPECT_ERROR(ValueError, F::kl_div(x, bad), "kl_div", "shape");
  EXPECT_ERROR(ValueError, F::l1_loss(x, x, kBatchMean), "l1_loss", "kBatchMean");
  EXPECT_ERROR(TypeError, F::l1_loss(x, ones({3, 4}, TensorOptions(kInt64))), "l1_loss", "target");
  const Tensor logits = random_tensor({3, 4});
  const Tensor t = from_vector<std::int64_t>({1, 3, 0}, {3});
  EXPECT_ERROR(ValueError, F::cross_entropy(logits, t, F::CrossEntropyFuncOptions().weight(random_tensor({3}))),
               "cross_entropy", "weight", "4");
  EXPECT_ERROR(ValueError, F::cross_entropy(logits, softmax(logits, 1), F::CrossEntropyFuncOptions().ignore_index(0)),
               "cross_entropy", "ignore_index");
  EXPECT_ERROR(ValueError,
               F::cross_entropy(logits, from_vector<std::int64_t>({1, 2}, {2}), F::CrossEntropyFuncOptions()),
               "cross_entropy", "[3]");
  EXPECT_ERROR(ValueError, F::cross_entropy(logits, random_tensor({3, 5}), F::CrossEntropyFuncOptions()),
               "cross_entropy", "[3, 4]");
  EXPECT_ERROR(IndexError,
               F::cross_entropy(logits, from_vector<std::int64_t>({1, 4, 0}, {3}), F::CrossEntropyFuncOptions()),
               "cross_entropy", "4");
  EXPECT_ERROR(ValueError, F::cross_entropy(logits, t, F::CrossEntropyFuncOptions().label_smoothing(1.5)),
               "cross_entropy", "label_smoothing");
}

// ---- modules: containers, holders, named_parameters, printing ------------------------------------------------

struct NetImpl : nn::Module {
  NetImpl() {
    layers = register_module("layers", nn::ModuleList(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2)));
    heads = register_module("heads", nn::ModuleDict());
    heads->insert("a", nn::Linear(2, 1));
    heads->insert("b", nn::Identity());
    conv = register_module("conv", nn::Conv2d(1, 2, 3));
  }
  nn::ModuleList layers{nullptr};
  nn::ModuleDict heads{nullptr};
  nn::Conv2d conv{nullptr};
};
MINIDL_MODULE(Net);

TEST(NnBasicsModules, ModuleListIndexesIteratesAndExtends) {
  nn::ModuleList list(nn::Linear(2, 3), nn::Tanh());
  EXPECT_EQ(list->size(), 2u);
  EXPECT_EQ(list[0]->name(), "Linear");
  EXPECT_EQ(list->ptr<nn::LinearImpl>(0)->options.out_features(), 3);
  EXPECT_EQ(list->at<nn::LinearImpl>(0).weight.sizes(), (Shape{3, 2}));
  EXPECT_ERROR(TypeError, list->ptr<nn::LinearImpl>(1), "ModuleList", "Tanh");
  EXPECT_ERROR(IndexError, list->ptr(2), "ModuleList", "2");
  list->push_back(nn::Linear(3, 1));
  nn::ModuleList more{nn::Sigmoid()};
  list->extend(*more);
  std::vector<std::string> names;
  for (const auto& m : *list) names.push_back(m->name());
  EXPECT_EQ(names, (std::vector<std::string>{"Linear", "Tanh", "Linear", "Sigmoid"}));
  list->insert(1, nn::ReLU());
  EXPECT_EQ(list->named_children().keys(), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_EQ(list[1]->name(), "ReLU");
  EXPECT_EQ(list->named_parameters().keys(), (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"}));
  Tensor x = random_tensor({5, 2}, kFloat32);
  for (const auto& m : *list) x = m->forward(x);
  EXPECT_EQ(x.sizes(), (Shape{5, 1}));
  EXPECT_ERROR(ValueError, list->forward(x), "ModuleList");
}

TEST(NnBasicsModules, ModuleDictKeepsInsertionOrder) {
  nn::ModuleDict dict(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{{"z", nn::Linear(2, 2).ptr()},
                                                                                       {"a", nn::ReLU().ptr()}});
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"z", "a"}));
  EXPECT_TRUE(dict->contains("a"));
  EXPECT_FALSE(dict->contains("b"));
  EXPECT_EQ(dict["a"]->name(), "ReLU");
  dict->update("a", nn::Linear(2, 5));
  EXPECT_EQ(dict->ptr<nn::LinearImpl>("a")->options.out_features(), 5);
  EXPECT_EQ(dict->named_parameters().keys(), (std::vector<std::string>{"z.weight", "z.bias", "a.weight", "a.bias"}));
  EXPECT_ERROR(ValueError, dict->insert("z", nn::ReLU()), "ModuleDict", "z");
  EXPECT_ERROR(IndexError, dict["missing"], "missing");
  std::vector<std::string> keys;
  for (const auto& item : *dict) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a"}));
}

TEST(NnBasicsModules, EmptyHoldersAreAssignedLater) {
  nn::Conv2d c{nullptr};
  EXPECT_TRUE(c.is_empty());
  EXPECT_FALSE(static_cast<bool>(c));
  EXPECT_ERROR(ValueError, c->forward(Tensor()), "empty");
  EXPECT_ERROR(ValueError, c(random_tensor({1, 1, 3, 3})), "empty");
  c = nn::Conv2d(1, 2, 3);
  EXPECT_FALSE(c.is_empty());
  EXPECT_EQ(c(random_tensor({1, 1, 3, 3}, kFloat32)).sizes(), (Shape{1, 2, 1, 1}));
  nn::Linear l{nullptr};
  struct Holder : nn::Module {};
  Holder h;
  EXPECT_ERROR(ValueError, h.register_module("l", l), "null");
  Net net;
  EXPECT_FALSE(net->conv.is_empty());
}

TEST(NnBasicsModules, NamedParametersIsAnOrderedDict) {
  Net net;
  const auto params = net->named_parameters();
  EXPECT_EQ(params.keys(),
            (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias",
                                      "heads.a.weight", "heads.a.bias", "conv.weight", "conv.bias"}));
  EXPECT_EQ(params.size(), 8u);
  EXPECT_TRUE(params["conv.weight"].is_same(net->conv->weight));
  EXPECT_TRUE(params.find("heads.a.bias") != nullptr);
  EXPECT_TRUE(params.find("nope") == nullptr);
  EXPECT_ERROR(IndexError, params["nope"], "nope");
  std::size_t i = 0;
  for (const auto& item : params) {
    EXPECT_EQ(item.key(), params.keys()[i]);
    EXPECT_TRUE(item.value().is_same(params.values()[i]));
    ++i;
  }
  for (const auto& [name, p] : net->named_parameters()) EXPECT_TRUE(p.requires_grad()) << name;
  EXPECT_EQ(params[0].first, "layers.0.weight");
  EXPECT_EQ(net->named_children().keys(), (std::vector<std::string>{"layers", "heads", "conv"}));
  EXPECT_EQ(net->children().size(), 3u);
}

TEST(NnBasicsModules, PrintingShowsTheTree) {
  Net net;
  std::ostringstream os;
  os << net;
  EXPECT_EQ(os.str(),
            "Net(\n"
            "  (layers): ModuleList(\n"
            "    (0): Linear(in_features=3, out_features=4, bias=true)\n"
            "    (1): ReLU\n"
            "    (2): Linear(in_features=4, out_features=2, bias=true)\n"
            "  )\n"
            "  (heads): ModuleDict(\n"
            "    (a): Linear(in_features=2, out_features=1, bias=true)\n"
            "    (b): Identity\n"
            "  )\n"
            "  (conv): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, "
            "bias=true)\n"
            ")");
  std::ostringstream acts;
  acts << *nn::Sequential(nn::SiLU(), nn::Softplus(nn::SoftplusOptions().beta(2)), nn::ELU(nn::ELUOptions().alpha(0.5)),
                          nn::GELU(nn::GELUOptions().approximate("tanh")), nn::Mish(), nn::Hardswish(),
                          nn::Softmax2d());
  EXPECT_EQ(acts.str(),
            "Sequential(\n  (0): SiLU\n  (1): Softplus(beta=2, threshold=20)\n  (2): ELU(alpha=0.5)\n"
            "  (3): GELU(approximate=tanh)\n  (4): Mish\n  (5): Hardswish\n  (6): Softmax2d\n)");
}

// ---- the GPU against the CPU ---------------------------------------------------------------------------------

TEST(NnBasicsGpu, MatchesTheCpu) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  const Device gpu(kCUDA);
  const auto agree = [&](const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                         const std::vector<Tensor>& cpu_in, double tol) {
    std::vector<Tensor> c, g;
    for (const Tensor& t : cpu_in) {
      c.push_back(is_floating_point(t.dtype()) ? leaf(t.clone()) : t);
      g.push_back(is_floating_point(t.dtype()) ? leaf(t.to(gpu)) : t.to(gpu));
    }
    const Tensor yc = fn(c), yg = fn(g);
    EXPECT_TRUE(yg.is_cuda()) << what;
    expect_close(yg, yc, tol, tol, what + " forward");
    const Tensor up = random_tensor(yc.sizes(), yc.dtype());
    yc.backward(up);
    yg.backward(up.to(gpu));
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (c[i].requires_grad() && c[i].grad().defined()) {
        expect_close(g[i].grad(), c[i].grad(), tol, tol, what + " gradient " + std::to_string(i));
      }
    }
  };
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
    const std::string d = dtype_name(dt);
    for (const Activation& a : activations()) {
      const Tensor x = away_from({33, 17}, a.kinks).to(dt);
      agree(
          a.name + " " + d, [&](const std::vector<Tensor>& i) { return a.op(i[0]); }, {x}, tol);
      agree(
          a.name + " transposed " + d, [&](const std::vector<Tensor>& i) { return a.op(i[0].t()); }, {x}, tol);
    }
    const Tensor w = random_tensor({50, 8}, dt);
    const Tensor ix = indices({6, 7}, 50);
    agree(
        "embedding " + d,
        [&](const std::vector<Tensor>& i) {
          return F::embedding(i[1], i[0], F::EmbeddingFuncOptions().padding_idx(3));
        },
        {w, ix}, tol);
    const Tensor p = random_tensor({6, 5}, dt, false, 0.05, 0.95), y = random_tensor({6, 5}, dt, false, 0, 1);
    const Tensor cw = random_tensor({5}, dt, false, 0.5, 2);
    agree(
        "bce " + d,
        [](const std::vector<Tensor>& i) {
          return F::binary_cross_entropy(i[0], i[1], F::BinaryCrossEntropyFuncOptions().weight(i[2]));
        },
        {p, y, cw}, tol);
    agree(
        "bce_with_logits " + d,
        [](const std::vector<Tensor>& i) {
          return F::binary_cross_entropy_with_logits(i[0], i[1],
                                                     F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(i[2]));
        },
        {p, y, cw}, tol);
    agree(
        "smooth_l1 " + d,
        [](const std::vector<Tensor>& i) {
          return F::smooth_l1_loss(i[0], i[1], F::SmoothL1LossFuncOptions().beta(0.3));
        },
        {p, y}, tol);
    agree(
        "huber " + d, [](const std::vector<Tensor>& i) { return F::huber_loss(i[0], i[1]); }, {p, y}, tol);
    agree(
        "kl_div " + d, [](const std::vector<Tensor>& i) { return F::kl_div(log(i[0]), i[1]); }, {p, y}, tol);
    const Tensor logits = random_tensor({6, 5}, dt);
    const Tensor t = from_vector<std::int64_t>({0, 4, 2, 2, 1, 3}, {6});
    agree(
        "cross_entropy options " + d,
        [&](const std::vector<Tensor>& i) {
          return F::cross_entropy(i[0], i[1],
                                  F::CrossEntropyFuncOptions().weight(i[2]).ignore_index(2).label_smoothing(0.1));
        },
        {logits, t, cw}, tol);
    agree(
        "cross_entropy probabilities " + d,
        [&](const std::vector<Tensor>& i) {
          return F::cross_entropy(i[0], softmax(i[1], 1), F::CrossEntropyFuncOptions().label_smoothing(0.1));
        },
        {logits, random_tensor({6, 5}, dt)}, tol);
  }
  const Tensor cls = indices({4, 5}, 7);
  expect_close(F::one_hot(cls.to(gpu), 7), F::one_hot(cls, 7), 0, 0, "one_hot");
  EXPECT_ERROR(IndexError, F::embedding(from_vector<std::int64_t>({9}, {1}).to(gpu), zeros({5, 2}).to(gpu)),
               "embedding", "9");
}

// ---- PyTorch's values ----------------------------------------------------------------------------------------

const json& golden() {
  static const json g = minidl::testing::read_golden("nn_basics_golden.json");
  return g;
}

Tensor decode(const json& t, Device device) {
  std::vector<double> v;
  for (const json& e : t["values"]) v.push_back(minidl::testing::golden_number(e));
  return from_vector(v, t["shape"].get<Shape>()).to(minidl::testing::dtype_named(t["dtype"])).to(device);
}

nn::Reduction reduction_named(const std::string& s) {
  if (s == "none") return kNone;
  if (s == "sum") return kSum;
  if (s == "batchmean") return kBatchMean;
  return kMean;
}

/// The minidl call of each golden op: inputs in the generator's order, options from its params.
Tensor run_golden(const std::string& op, const std::vector<Tensor>& x, const json& p) {
  const auto opt = [&](const char* k) { return p.contains(k) && !p[k].is_null(); };
  const nn::Reduction r = reduction_named(p.value("reduction", std::string("mean")));
  if (op == "silu") return F::silu(x[0]);
  if (op == "softplus")
    return F::softplus(x[0],
                       F::SoftplusFuncOptions().beta(p["beta"].get<double>()).threshold(p["threshold"].get<double>()));
  if (op == "elu") return F::elu(x[0], F::ELUFuncOptions().alpha(p["alpha"].get<double>()));
  if (op == "mish") return F::mish(x[0]);
  if (op == "hardswish") return F::hardswish(x[0]);
  if (op == "gelu") return F::gelu(x[0], F::GELUFuncOptions().approximate(p["approximate"].get<std::string>()));
  if (op == "logsigmoid") return F::logsigmoid(x[0]);
  if (op == "softmax2d") return F::softmax2d(x[0]);
  if (op == "embedding") {
    F::EmbeddingFuncOptions o;
    if (opt("padding_idx")) o.padding_idx(p["padding_idx"].get<std::int64_t>());
    return F::embedding(x[1], x[0], o);
  }
  if (op == "binary_cross_entropy") {
    return F::binary_cross_entropy(
        x[0], x[1], F::BinaryCrossEntropyFuncOptions().reduction(r).weight(x.size() > 2 ? x[2] : Tensor()));
  }
  if (op == "binary_cross_entropy_with_logits") {
    return F::binary_cross_entropy_with_logits(
        x[0], x[1], F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(r).weight(x[2]).pos_weight(x[3]));
  }
  if (op == "l1_loss") return F::l1_loss(x[0], x[1], r);
  if (op == "smooth_l1_loss")
    return F::smooth_l1_loss(x[0], x[1], F::SmoothL1LossFuncOptions(r).beta(p["beta"].get<double>()));
  if (op == "huber_loss") return F::huber_loss(x[0], x[1], F::HuberLossFuncOptions(r).delta(p["delta"].get<double>()));
  if (op == "kl_div") return F::kl_div(x[0], x[1], F::KLDivFuncOptions(r).log_target(p["log_target"].get<bool>()));
  if (op == "cross_entropy") {
    return F::cross_entropy(x[0], x[1],
                            F::CrossEntropyFuncOptions()
                                .reduction(r)
                                .ignore_index(p["ignore_index"].get<std::int64_t>())
                                .label_smoothing(p["label_smoothing"].get<double>())
                                .weight(x.size() > 2 ? x[2] : Tensor()));
  }
  throw ValueError("unknown golden op " + op);
}

void expect_golden(Device device) {
  int cases = 0, grads = 0;
  for (const json& c : golden()["cases"]) {
    const std::string name = c["name"];
    std::vector<Tensor> in;
    for (const json& t : c["inputs"]) {
      Tensor v = decode(t, device);
      if (is_floating_point(v.dtype())) v = leaf(v);
      in.push_back(v);
    }
    const Tensor out = run_golden(c["op"].get<std::string>(), in, c["params"]);
    const DType dt = out.dtype();
    const double tol = dt == kFloat64 ? 1e-10 : 2e-5;
    expect_close(out, decode(c["output"], device), tol, tol, name + " output");
    ++cases;
    out.backward(decode(c["grad_output"], device));
    for (std::size_t i = 0; i < c["grads"].size(); ++i) {
      if (c["grads"][i].is_null()) continue;
      expect_close(in[i].grad(), decode(c["grads"][i], device), tol * 4, tol * 4,
                   name + " gradient of input " + std::to_string(i));
      ++grads;
    }
  }
  EXPECT_GT(cases, 40);
  EXPECT_GT(grads, 40);
}

#define MINIDL_REQUIRE_NN_BASICS_GOLDEN() \
  MINIDL_REQUIRE_GOLDEN_FILE(golden(), "nn_basics_golden.json", "gen_nn_basics_golden.py")

TEST(NnBasicsGolden, MatchesPyTorchOnTheCpu) {
  MINIDL_REQUIRE_NN_BASICS_GOLDEN();
  expect_golden(Device(kCPU));
}

TEST(NnBasicsGolden, MatchesPyTorchOnTheGpu) {
  MINIDL_REQUIRE_NN_BASICS_GOLDEN();
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  expect_golden(Device(kCUDA));
}

}  // namespace
