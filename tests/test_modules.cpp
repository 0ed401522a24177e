// The nn::Module API (parameter and buffer names, train/eval, zero_grad, dtype conversion, printing), the
// LibTorch-like spelling of models, default initialisation statistics, batch-norm running statistics, dropout
// statistics, numerically hard losses, and the errors layers raise for bad inputs. CPU only.
#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;
using minidl::testing::expect_close;
using minidl::testing::expect_error;
using minidl::testing::random_tensor;

namespace {

/// A LibTorch-style custom model: submodules held by ModuleHolder members and registered under their names.
struct Net : nn::Module {
  Net()
      : nn::Module("Net"),
        conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 8, 3).stride(2).padding(1)))),
        bn1(nn::BatchNorm2dOptions(8)),
        head(nn::Linear(32, 16), nn::ReLU(), nn::Linear(16, 3)) {
    register_module("bn1", bn1);
    register_module("head", head);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = F::relu(bn1(conv1(x)));
    h = F::max_pool2d(h, 2).flatten(1);
    return head(h);
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Sequential head;
};

template <class V>
std::vector<std::string> names_of(const OrderedDict<std::string, V>& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

std::vector<double> values(const Tensor& t) { return t.detach().cpu().to(kFloat64).to_vector<double>(); }

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};
Moments moments(const Tensor& t) {
  const std::vector<double> v = values(t);
  Moments m;
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  for (double x : v) m.mean += x / static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean) / static_cast<double>(v.size());
  return m;
}

// ---- names, order, registration ------------------------------------------------------------------------------

TEST(Modules, NamedParametersAndBuffersAreDotted) {
  Net net;
  const std::vector<std::string> params{"conv1.weight", "conv1.bias",    "bn1.weight",    "bn1.bias",
                                        "head.0.weight", "head.0.bias", "head.2.weight", "head.2.bias"};
  EXPECT_EQ(names_of(net.named_parameters()), params);
  EXPECT_EQ(names_of(net.named_buffers()),
            (std::vector<std::string>{"bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"}));
  EXPECT_TRUE(net.named_parameters(/*recurse=*/false).empty());
  EXPECT_EQ(names_of(net.bn1->named_parameters(false)), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(names_of(net.named_children()), (std::vector<std::string>{"conv1", "bn1", "head"}));

  nn::Sequential seq(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  EXPECT_EQ(names_of(seq->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(seq->size(), 3u);
}

TEST(Modules, ParametersAreTheRegisteredTensorsInOrder) {
  Net net;
  const std::vector<Tensor> ps = net.parameters();
  const std::vector<Tensor> expected{net.conv1->weight, net.conv1->bias, net.bn1->weight, net.bn1->bias};
  ASSERT_EQ(ps.size(), 8u);
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_TRUE(ps[i].is_same(expected[i])) << "parameter " << i;
  const auto named = net.named_parameters();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    EXPECT_TRUE(ps[i].is_same(named[i].second)) << named[i].first;
    EXPECT_TRUE(ps[i].requires_grad()) << named[i].first;
    EXPECT_TRUE(ps[i].is_leaf()) << named[i].first;
  }
  for (const Tensor& b : net.buffers()) EXPECT_FALSE(b.requires_grad());
  // A layer without bias registers no bias.
  nn::Linear nobias(nn::LinearOptions(3, 2).bias(false));
  EXPECT_EQ(names_of(nobias->named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_FALSE(nobias->bias.defined());
}

TEST(Modules, DuplicateOrInvalidNamesAreRejected) {
  nn::Module m("Custom");
  m.register_parameter("w", zeros({2}));
  m.register_buffer("b", zeros({2}));
  m.register_module("child", nn::Linear(2, 2));
  expect_error<ValueError>([&] { m.register_parameter("w", zeros({3})); }, {"Custom", "\"w\"", "already exists"},
                           "duplicate parameter");
  expect_error<ValueError>([&] { m.register_buffer("b", zeros({3})); }, {"Custom", "\"b\"", "already exists"},
                           "duplicate buffer");
  expect_error<ValueError>([&] { m.register_module("child", nn::ReLU()); }, {"Custom", "\"child\"", "already exists"},
                           "duplicate module");
  expect_error<ValueError>([&] { m.register_parameter("a.b", zeros({1})); }, {"a.b"}, "dotted name");
  expect_error<ValueError>([&] { m.register_buffer("", zeros({1})); }, {"name"}, "empty name");
  expect_error<ValueError>([&] { m.register_parameter("u", Tensor()); }, {"undefined"}, "undefined tensor");
  EXPECT_EQ(m.parameters().size(), 3u);  // w, child.weight, child.bias: the failed calls added nothing
}

// ---- train / eval, zero_grad, dtype ----------------------------------------------------------------------------

TEST(Modules, ReluInplaceOptionOverwritesTheInputAsLibTorch) {
  namespace F = nn::functional;
  const Tensor x = random_tensor({3, 7});
  const Tensor expected = F::relu(x);
  Tensor a = x.clone();
  const Tensor ra = F::relu(a, F::ReLUFuncOptions().inplace(true));
  expect_close(ra, expected, 0, 0, "F::relu inplace");
  expect_close(a, expected, 0, 0, "F::relu inplace overwrote its input");
  Tensor b = x.clone();
  nn::ReLU relu_inplace(nn::ReLUOptions().inplace(true));
  const Tensor rb = relu_inplace(b);
  expect_close(b, expected, 0, 0, "nn::ReLU(inplace) overwrote its input");
  expect_close(rb, expected, 0, 0, "nn::ReLU(inplace) result");
  Tensor c = x.clone();
  nn::ReLU plain;
  expect_close(plain(c), expected, 0, 0, "nn::ReLU");
  expect_close(c, x, 0, 0, "nn::ReLU left its input alone");
  std::ostringstream os;
  os << *relu_inplace;
  EXPECT_EQ(os.str(), "ReLU(inplace=true)");
}

TEST(Modules, TrainEvalPropagate) {
  Net net;
  std::function<void(const nn::Module&, bool)> all = [&](const nn::Module& m, bool expected) {
    EXPECT_EQ(m.is_training(), expected) << m.name();
    for (const auto& [n, c] : m.named_children()) all(*c, expected);
  };
  all(net, true);
  net.eval();
  all(net, false);
  net.train();
  all(net, true);
  net.train(false);
  all(net, false);
}

TEST(Modules, ZeroGradBothModes) {
  Net net;
  const Tensor x = random_tensor({2, 1, 8, 8}, kFloat32);
  F::cross_entropy(net.forward(x), from_vector<std::int64_t>({0, 2}, {2})).backward();
  for (const auto& [n, p] : net.named_parameters()) ASSERT_TRUE(p.grad().defined()) << n;
  net.zero_grad(/*set_to_none=*/false);
  for (const auto& [n, p] : net.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_EQ(p.grad().sizes(), p.sizes()) << n;
    for (double v : values(p.grad())) ASSERT_EQ(v, 0.0) << n;
  }
  // Gradients accumulate into the zeroed buffers as into fresh ones.
  F::cross_entropy(net.forward(x), from_vector<std::int64_t>({0, 2}, {2})).backward();
  for (const auto& [n, p] : net.named_parameters()) EXPECT_GT(moments(p.grad()).max - moments(p.grad()).min, 0.0) << n;
  net.zero_grad();
  for (const auto& [n, p] : net.named_parameters()) EXPECT_FALSE(p.grad().defined()) << n;
}

TEST(Modules, ToDTypeConvertsInPlace) {
  Net net;
  const Tensor w = net.conv1->weight;  // handles taken before the conversion
  const Tensor rm = net.bn1->running_mean;
  const std::vector<double> before = values(w);
  net.to(kFloat64);
  EXPECT_EQ(w.dtype(), kFloat64);
  EXPECT_EQ(rm.dtype(), kFloat64);
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(values(w), before);  // float32 -> float64 is exact
  for (const auto& [n, p] : net.named_parameters()) EXPECT_EQ(p.dtype(), kFloat64) << n;
  for (const auto& [n, b] : net.named_buffers()) {
    EXPECT_EQ(b.dtype(), n == "bn1.num_batches_tracked" ? kInt64 : kFloat64) << n;
  }
  // The model now runs and trains in float64.
  const Tensor out = net.forward(random_tensor({2, 1, 8, 8}, kFloat64));
  EXPECT_EQ(out.dtype(), kFloat64);
  out.sum().backward();
  EXPECT_EQ(w.grad().dtype(), kFloat64);
  // Converting back keeps the handles too, and converts existing gradients.
  net.to(kFloat32);
  EXPECT_EQ(w.dtype(), kFloat32);
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(values(w), before);
}

// A user's module declared the LibTorch way, without a name of its own: it prints under its class name.
struct TinyNetImpl : nn::Module {
  TinyNetImpl() : conv1(nn::Conv2dOptions(1, 4, 3)), fc(4, 2) {
    register_module("conv1", conv1);
    register_module("fc", fc);
  }
  nn::Conv2d conv1;
  nn::Linear fc;
};
MINIDL_MODULE(TinyNet);

TEST(Modules, PrintingAHolderShowsTheTreeWithClassNames) {
  TinyNet net;
  std::ostringstream holder, module;
  holder << net;  // the holder itself, as `std::cout << model` in LibTorch code
  module << *net;
  EXPECT_EQ(holder.str(), module.str());
  EXPECT_EQ(holder.str(),
            "TinyNet(\n"
            "  (conv1): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, "
            "bias=true)\n"
            "  (fc): Linear(in_features=4, out_features=2, bias=true)\n"
            ")");
  std::ostringstream layer;
  layer << net->fc;  // a holder member prints its own line
  EXPECT_EQ(layer.str(), "Linear(in_features=4, out_features=2, bias=true)");
  EXPECT_EQ(net->name(), "TinyNet");
  // Errors name the class too.
  try {
    net->register_module("fc", nn::Linear(1, 1));
    ADD_FAILURE() << "registering a second submodule named fc did not throw";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("TinyNet.register_module"), std::string::npos) << e.what();
  }
}

TEST(Modules, PrintShowsEveryLayerConfig) {
  Net net;
  std::ostringstream os;
  os << net;
  const std::string s = os.str();
  for (const std::string& part :
       {std::string("Net(\n"),
        std::string("  (conv1): Conv2d(1, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1), "
                    "groups=1, bias=true)\n"),
        std::string("  (bn1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)\n"),
        std::string("  (head): Sequential(\n"), std::string("    (0): Linear(in_features=32, out_features=16, bias=true)\n"),
        std::string("    (1): ReLU\n"), std::string("    (2): Linear(in_features=16, out_features=3, bias=true)\n")}) {
    EXPECT_NE(s.find(part), std::string::npos) << "missing \"" << part << "\" in:\n" << s;
  }
  std::ostringstream os2;
  os2 << *nn::Sequential(nn::MaxPool2d(nn::MaxPool2dOptions(2)), nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1)),
                         nn::AdaptiveAvgPool2d(1), nn::Dropout(0.25), nn::Dropout2d(0.5), nn::BatchNorm1d(nn::BatchNormOptions(4)
                         .affine(false)), nn::Flatten(), nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)), nn::Softmax(1), nn::LogSoftmax(-1), nn::GELU());
  const std::string s2 = os2.str();
  for (const char* part : {"(0): MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))",
                           "(1): AvgPool2d(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))",
                           "(2): AdaptiveAvgPool2d(output_size=(1, 1))", "(3): Dropout(p=0.25)", "(4): Dropout2d(p=0.5)",
                           "(5): BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=false, track_running_stats=true)",
                           "(6): Flatten(start_dim=1, end_dim=-1)", "(7): LeakyReLU(negative_slope=0.2)",
                           "(8): Softmax(dim=1)", "(9): LogSoftmax(dim=-1)", "(10): GELU\n"}) {
    EXPECT_NE(s2.find(part), std::string::npos) << "missing \"" << part << "\" in:\n" << s2;
  }
}

// ---- LibTorch-like spelling ---------------------------------------------------------------------------------

TEST(Modules, LibTorchLikeUsageCompilesAndRuns) {
  const Tensor x = random_tensor({3, 4}, kFloat32);
  nn::Linear fc(4, 2);
  const Tensor y = fc(x);
  EXPECT_EQ(y.sizes(), (Shape{3, 2}));
  EXPECT_EQ(fc->weight.sizes(), (Shape{2, 4}));
  EXPECT_EQ(fc->bias.sizes(), (Shape{2}));
  expect_close(fc->forward(x), y, 0, 0, "fc->forward vs fc()");

  nn::Conv2d c(nn::Conv2dOptions(1, 8, 3).stride(2).padding(1));
  EXPECT_EQ(c(random_tensor({2, 1, 7, 5}, kFloat32)).sizes(), (Shape{2, 8, 4, 3}));
  EXPECT_EQ(c->options.stride(), nn::ExpandingArray2(2));

  nn::Sequential seq(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  EXPECT_EQ(seq(x).sizes(), (Shape{3, 2}));
  // Sequential is the composition of its layers.
  const Tensor manual = (*seq)[2]->forward((*seq)[1]->forward((*seq)[0]->forward(x)));
  expect_close(seq(x), manual, 0, 0, "Sequential vs layers in order");

  auto net = std::make_shared<Net>();
  EXPECT_EQ(net->forward(random_tensor({2, 1, 8, 8}, kFloat32)).sizes(), (Shape{2, 3}));
  std::shared_ptr<nn::Module> as_module = net;
  EXPECT_EQ(as_module->parameters().size(), 8u);
}

// ---- initialisation -----------------------------------------------------------------------------------------

/// U(-b, b): every value within ±b, the extremes near ±b (the gap to the bound is about 2b/n), variance b²/3
/// within 10% (or 5 standard errors for small n), mean near 0 (5 standard errors).
void expect_uniform(const Tensor& t, double bound, const std::string& what) {
  const Moments m = moments(t);
  const double n = static_cast<double>(t.numel());
  EXPECT_LE(m.max, bound) << what;
  EXPECT_GE(m.min, -bound) << what;
  EXPECT_GT(m.max, (1.0 - 20.0 / n) * bound) << what;
  EXPECT_LT(m.min, -(1.0 - 20.0 / n) * bound) << what;
  const double var = bound * bound / 3.0;
  EXPECT_NEAR(m.var, var, std::max(0.1, 5.0 * std::sqrt(0.8 / n)) * var) << what;
  EXPECT_NEAR(m.mean, 0.0, 5.0 * std::sqrt(var / n)) << what;
}

TEST(Init, LinearAndConvDefaults) {
  manual_seed(11);
  nn::Linear fc(256, 400);
  expect_uniform(fc->weight, 1.0 / std::sqrt(256.0), "Linear(256, 400).weight");
  expect_uniform(fc->bias, 1.0 / std::sqrt(256.0), "Linear(256, 400).bias");
  nn::Conv2d conv(nn::Conv2dOptions(16, 32, 3));
  expect_uniform(conv->weight, 1.0 / std::sqrt(16.0 * 9.0), "Conv2d(16, 32, 3).weight");
  nn::Conv2d grouped(nn::Conv2dOptions(16, 256, {3, 2}).groups(4));  // fan_in = 16/4 * 3 * 2 = 24
  expect_uniform(grouped->weight, 1.0 / std::sqrt(24.0), "Conv2d(16, 256, 3x2, groups 4).weight");
  expect_uniform(grouped->bias, 1.0 / std::sqrt(24.0), "Conv2d(16, 256, 3x2, groups 4).bias");
  nn::BatchNorm2d bn(nn::BatchNormOptions(5));
  expect_close(bn->weight, ones({5}), 0, 0, "BatchNorm weight");
  expect_close(bn->bias, zeros({5}), 0, 0, "BatchNorm bias");
  expect_close(bn->running_mean, zeros({5}), 0, 0, "BatchNorm running_mean");
  expect_close(bn->running_var, ones({5}), 0, 0, "BatchNorm running_var");
}

TEST(Init, FansAndGains) {
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({8, 3, 5, 2})), (std::pair<std::int64_t, std::int64_t>(30, 80)));
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({7, 4})), (std::pair<std::int64_t, std::int64_t>(4, 7)));
  EXPECT_THROW(nn::init::calculate_fan_in_and_fan_out(empty({7})), ValueError);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(nn::init::Nonlinearity::ReLU), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(nn::init::Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(nn::init::Nonlinearity::LeakyReLU, 0.2), std::sqrt(2.0 / 1.04));
}

TEST(Init, KaimingNormalVariance) {
  manual_seed(12);
  Tensor w = empty({200, 500}, kFloat64);
  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::FanIn, nn::init::Nonlinearity::ReLU);
  const Moments m = moments(w);
  const double var = 2.0 / 500.0;
  EXPECT_NEAR(m.var, var, 0.05 * var);
  EXPECT_NEAR(m.mean, 0.0, 0.02 * std::sqrt(var));
  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
  EXPECT_NEAR(moments(w).var, 2.0 / 200.0, 0.05 * 2.0 / 200.0);
}

TEST(Init, XavierUniformVariance) {
  manual_seed(13);
  Tensor w = empty({300, 200});
  nn::init::xavier_uniform_(w);
  const double bound = std::sqrt(6.0 / 500.0);
  expect_uniform(w, bound, "xavier_uniform_ (300, 200)");
  nn::init::xavier_uniform_(w, 2.0);
  expect_uniform(w, 2.0 * bound, "xavier_uniform_ gain 2");
  nn::init::xavier_normal_(w);
  EXPECT_NEAR(moments(w).var, 2.0 / 500.0, 0.05 * 2.0 / 500.0);
}

// ---- batch norm ----------------------------------------------------------------------------------------------

/// Per-channel mean and biased variance of an (N, C, ...) tensor, by hand.
void channel_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  const std::int64_t N = x.size(0), C = x.size(1), L = x.numel() / (N * C);
  const std::vector<double> v = values(x);
  mean.assign(static_cast<std::size_t>(C), 0.0);
  var.assign(static_cast<std::size_t>(C), 0.0);
  const double M = static_cast<double>(N * L);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t l = 0; l < L; ++l) mean[c] += v[(n * C + c) * L + l] / M;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t l = 0; l < L; ++l) var[c] += std::pow(v[(n * C + c) * L + l] - mean[c], 2) / M;
}

/// y = (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c], by hand.
Tensor normalise(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                 const std::vector<double>& w, const std::vector<double>& b, double eps) {
  const std::int64_t N = x.size(0), C = x.size(1), L = x.numel() / (N * C);
  std::vector<double> v = values(x);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t l = 0; l < L; ++l) {
        double& e = v[(n * C + c) * L + l];
        e = (e - mean[c]) / std::sqrt(var[c] + eps) * w[c] + b[c];
      }
  return from_vector(v, x.sizes());
}

TEST(BatchNormStats, RunningStatisticsFollowTheFormula) {
  for (const Shape& shape : {Shape{4, 3, 2, 3}, Shape{6, 3}, Shape{2, 3, 5}}) {
    std::shared_ptr<nn::BatchNormImplBase> bn;
    if (shape.size() == 4) {
      bn = nn::BatchNorm2d(nn::BatchNormOptions(3)).ptr();
    } else {
      bn = nn::BatchNorm1d(nn::BatchNormOptions(3)).ptr();
    }
    bn->to(kFloat64);
    nn::init::uniform_(bn->weight, 0.5, 1.5);
    nn::init::uniform_(bn->bias, -0.5, 0.5);
    const std::vector<double> w = values(bn->weight), b = values(bn->bias);
    std::vector<double> rm(3, 0.0), rv(3, 1.0);
    const double M = static_cast<double>(shape_numel(shape) / 3);
    for (int step = 1; step <= 3; ++step) {
      const Tensor x = random_tensor(shape, kFloat64, false, -2.0, 3.0);
      std::vector<double> mean, var;
      channel_stats(x, mean, var);
      const Tensor y = bn->forward(x);
      expect_close(y, normalise(x, mean, var, w, b, 1e-5), 1e-12, 1e-12, "train output " + shape_str(shape));
      for (std::size_t c = 0; c < 3; ++c) {
        rm[c] = 0.9 * rm[c] + 0.1 * mean[c];
        rv[c] = 0.9 * rv[c] + 0.1 * var[c] * M / (M - 1.0);  // unbiased variance
      }
      expect_close(bn->running_mean, from_vector(rm, {3}), 1e-12, 1e-12, "running_mean " + shape_str(shape));
      expect_close(bn->running_var, from_vector(rv, {3}), 1e-12, 1e-12, "running_var " + shape_str(shape));
      EXPECT_EQ(bn->num_batches_tracked.item<std::int64_t>(), step);
    }
    // Eval mode normalises with the running statistics and leaves them alone.
    bn->eval();
    const Tensor x = random_tensor(shape, kFloat64, false, -2.0, 3.0);
    const Tensor rm_before = bn->running_mean.clone(), rv_before = bn->running_var.clone();
    expect_close(bn->forward(x), normalise(x, rm, rv, w, b, 1e-5), 1e-12, 1e-12, "eval output " + shape_str(shape));
    expect_close(bn->running_mean, rm_before, 0, 0, "running_mean after eval");
    expect_close(bn->running_var, rv_before, 0, 0, "running_var after eval");
    EXPECT_EQ(bn->num_batches_tracked.item<std::int64_t>(), 3);
  }
}

TEST(BatchNormStats, MomentumAndEpsOptions) {
  nn::BatchNorm1d bn(nn::BatchNormOptions(2).momentum(0.25).eps(0.5).affine(false));
  bn->to(kFloat64);
  const Tensor x = random_tensor({5, 2}, kFloat64);
  std::vector<double> mean, var;
  channel_stats(x, mean, var);
  expect_close(bn(x), normalise(x, mean, var, {1, 1}, {0, 0}, 0.5), 1e-12, 1e-12, "output with eps 0.5");
  std::vector<double> rm(2), rv(2);
  for (std::size_t c = 0; c < 2; ++c) {
    rm[c] = 0.25 * mean[c];
    rv[c] = 0.75 + 0.25 * var[c] * 5.0 / 4.0;
  }
  expect_close(bn->running_mean, from_vector(rm, {2}), 1e-12, 1e-12, "running_mean, momentum 0.25");
  expect_close(bn->running_var, from_vector(rv, {2}), 1e-12, 1e-12, "running_var, momentum 0.25");
}

// ---- dropout ---------------------------------------------------------------------------------------------------

TEST(DropoutStats, KeepRateAndScale) {
  manual_seed(21);
  const std::int64_t n = 100000;
  for (double p : {0.1, 0.5, 0.8}) {
    const Tensor x = random_tensor({n}, kFloat64, false, 0.5, 1.5);  // never zero
    const std::vector<double> xv = values(x), yv = values(F::dropout(x, p, true));
    const double scale = 1.0 / (1.0 - p);
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (yv[i] == 0.0) continue;
      ++kept;
      ASSERT_EQ(yv[i], xv[i] * scale) << "element " << i << " with p=" << p;
    }
    const double expected = static_cast<double>(n) * (1.0 - p), sigma = std::sqrt(n * p * (1.0 - p));
    EXPECT_NEAR(static_cast<double>(kept), expected, 5.0 * sigma) << "p=" << p;
  }
}

TEST(DropoutStats, Dropout2dDropsWholeChannels) {
  manual_seed(22);
  const std::int64_t N = 200, C = 50, H = 2, W = 3, planes = N * C;
  const double p = 0.3, scale = 1.0 / (1.0 - p);
  const Tensor x = random_tensor({N, C, H, W}, kFloat64, false, 0.5, 1.5);
  const std::vector<double> xv = values(x), yv = values(F::dropout2d(x, p, true));
  std::int64_t kept = 0;
  for (std::int64_t pl = 0; pl < planes; ++pl) {
    const bool plane_kept = yv[pl * H * W] != 0.0;
    kept += plane_kept;
    for (std::int64_t i = pl * H * W; i < (pl + 1) * H * W; ++i) {
      ASSERT_EQ(yv[i], plane_kept ? xv[i] * scale : 0.0) << "plane " << pl << " element " << i;
    }
  }
  EXPECT_NEAR(static_cast<double>(kept), planes * (1.0 - p), 5.0 * std::sqrt(planes * p * (1.0 - p)));
}

TEST(DropoutStats, EdgeRatesSeedsAndEvalMode) {
  const Tensor x = random_tensor({4, 5}, kFloat32, false, 0.5, 1.5);
  expect_close(F::dropout(x, 0.0, true), x, 0, 0, "p = 0");
  expect_close(F::dropout(x, 1.0, true), zeros({4, 5}), 0, 0, "p = 1");
  manual_seed(5);
  const Tensor a = F::dropout(x, 0.5, true);
  const Tensor b = F::dropout(x, 0.5, true);
  manual_seed(5);
  expect_close(F::dropout(x, 0.5, true), a, 0, 0, "same seed, same mask");
  EXPECT_NE(values(a), values(b)) << "consecutive calls draw fresh masks";

  nn::Dropout drop(0.5);
  nn::Dropout2d drop2(0.5);
  drop->eval();
  drop2->eval();
  const Tensor x4 = random_tensor({2, 3, 2, 2}, kFloat32);
  expect_close(drop(x), x, 0, 0, "eval Dropout is the identity");
  expect_close(drop2(x4), x4, 0, 0, "eval Dropout2d is the identity");
  expect_close(F::dropout(x, 0.5, false), x, 0, 0, "dropout(training=false)");
  EXPECT_THROW(nn::Dropout(1.5), ValueError);
  EXPECT_THROW(nn::Dropout2d(-0.1), ValueError);
  EXPECT_THROW(F::dropout(x, 2.0, true), ValueError);
}

// ---- losses --------------------------------------------------------------------------------------------------

TEST(Losses, CrossEntropyWithHugeLogitsIsFinite) {
  Tensor logits = from_vector<double>({1000, -1000, 0, -1000, 1000, -1000}, {2, 3});
  logits.requires_grad_(true);
  const Tensor target = from_vector<std::int64_t>({1, 1}, {2});
  const Tensor loss = F::cross_entropy(logits, target);
  EXPECT_NEAR(loss.item<double>(), 1000.0, 1e-9);  // sample 0: 2000, sample 1: 0
  loss.backward();
  // d/dlogits = (softmax - onehot) / N.
  expect_close(logits.grad(), from_vector<double>({0.5, -0.5, 0, 0, 0, 0}, {2, 3}), 0, 1e-12, "gradient");
  Tensor f32 = from_vector<float>({1000, -1000, 0, -1000, 1000, -1000}, {2, 3});
  EXPECT_TRUE(std::isfinite(F::cross_entropy(f32, target, nn::Reduction::Sum, 0.1).item<float>()));
}

TEST(Losses, CrossEntropyMatchesHandFormula) {
  const std::int64_t N = 4, C = 5;
  const Tensor x = random_tensor({N, C}, kFloat64, false, -3.0, 3.0);
  const std::vector<std::int64_t> t{4, 0, 2, 2};
  const Tensor target = from_vector(t, {N});
  const std::vector<double> xv = values(x);
  for (double eps : {0.0, 0.1, 0.35}) {
    std::vector<double> expected(N);
    for (std::int64_t i = 0; i < N; ++i) {
      double lse = 0;
      for (std::int64_t c = 0; c < C; ++c) lse += std::exp(xv[i * C + c]);
      lse = std::log(lse);
      double sum_nll = 0;
      for (std::int64_t c = 0; c < C; ++c) sum_nll += lse - xv[i * C + c];
      expected[i] = (1.0 - eps) * (lse - xv[i * C + t[i]]) + eps / C * sum_nll;
    }
    const std::string w = detail::str("label_smoothing ", eps);
    expect_close(F::cross_entropy(x, target, nn::Reduction::None, eps), from_vector(expected, {N}), 1e-12, 1e-12, w);
    double total = 0;
    for (double e : expected) total += e;
    EXPECT_NEAR(F::cross_entropy(x, target, nn::Reduction::Sum, eps).item<double>(), total, 1e-12) << w;
    EXPECT_NEAR(F::cross_entropy(x, target, nn::Reduction::Mean, eps).item<double>(), total / N, 1e-12) << w;
    if (eps == 0.0) {
      expect_close(F::nll_loss(F::log_softmax(x, 1), target, nn::Reduction::None), from_vector(expected, {N}), 1e-12,
                   1e-12, "nll_loss(log_softmax)");
    }
  }
  const Tensor y = random_tensor({N, C}, kFloat64);
  EXPECT_NEAR(F::mse_loss(x, y).item<double>(), ((x - y) * (x - y)).mean().item<double>(), 1e-12);
  EXPECT_NEAR(F::mse_loss(x, y, nn::Reduction::Sum).item<double>(), ((x - y) * (x - y)).sum().item<double>(), 1e-12);
}

// ---- errors -----------------------------------------------------------------------------------------------------

TEST(LayerErrors, WrongShapesNameTheLayerAndShapes) {
  const Tensor x2 = random_tensor({3, 5}, kFloat32);
  nn::Linear fc(4, 2);
  expect_error<ValueError>([&] { fc(x2); }, {"linear", "[3, 5]", "4"}, "Linear features");

  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3));
  expect_error<ValueError>([&] { conv(random_tensor({2, 4, 8, 8}, kFloat32)); }, {"conv2d", "[2, 4, 8, 8]", "[8, 3, 3, 3]"},
                           "Conv2d channels");
  expect_error<ValueError>([&] { conv(random_tensor({3, 8, 8}, kFloat32)); }, {"conv2d", "[3, 8, 8]"}, "Conv2d rank");
  expect_error<ValueError>([&] { conv(random_tensor({1, 3, 2, 8}, kFloat32)); }, {"conv2d", "kernel", "larger"},
                           "Conv2d kernel larger than input");
  nn::Conv2d grouped(nn::Conv2dOptions(4, 4, 1).groups(2));
  expect_error<ValueError>([&] { grouped(random_tensor({1, 3, 4, 4}, kFloat32)); }, {"conv2d", "groups", "[1, 3, 4, 4]"},
                           "Conv2d groups");

  nn::BatchNorm2d bn(nn::BatchNormOptions(3));
  expect_error<ValueError>([&] { bn(random_tensor({4, 3}, kFloat32)); }, {"BatchNorm2d", "[4, 3]"}, "BatchNorm2d rank");
  expect_error<ValueError>([&] { bn(random_tensor({2, 4, 3, 3}, kFloat32)); }, {"BatchNorm2d", "[2, 4, 3, 3]", "3"},
                           "BatchNorm2d channels");
  nn::BatchNorm1d bn1(nn::BatchNormOptions(3));
  expect_error<ValueError>([&] { bn1(random_tensor({2, 3, 2, 2}, kFloat32)); }, {"BatchNorm1d", "[2, 3, 2, 2]"},
                           "BatchNorm1d rank");
  expect_error<ValueError>([&] { bn1(random_tensor({1, 3}, kFloat32)); }, {"batch_norm", "[1, 3]"},
                           "BatchNorm1d training with one value per channel");

  nn::MaxPool2d pool(nn::MaxPool2dOptions(2));
  expect_error<ValueError>([&] { pool(random_tensor({3, 8, 8}, kFloat32)); }, {"max_pool2d", "[3, 8, 8]"}, "MaxPool2d rank");
  expect_error<ValueError>([&] { F::max_pool2d(random_tensor({1, 1, 3, 3}, kFloat32), 4); }, {"max_pool2d", "kernel"},
                           "MaxPool2d kernel larger than input");
  expect_error<ValueError>([&] { F::avg_pool2d(random_tensor({1, 8, 8}, kFloat32), 2); }, {"avg_pool2d", "[1, 8, 8]"},
                           "AvgPool2d rank");
  expect_error<ValueError>([&] { F::adaptive_avg_pool2d(random_tensor({1, 1, 7, 5}, kFloat32), 2); },
                           {"adaptive_avg_pool2d", "7x5"}, "AdaptiveAvgPool2d non-dividing");
  expect_error<ValueError>([&] { F::dropout2d(random_tensor({3, 4}, kFloat32)); }, {"dropout2d", "[3, 4]"},
                           "Dropout2d rank");

  const Tensor logits = random_tensor({3, 4}, kFloat32);
  expect_error<ValueError>([&] { F::cross_entropy(random_tensor({3, 4, 2}, kFloat32), from_vector<std::int64_t>({0, 1, 2}, {3})); },
                           {"cross_entropy", "[3, 4, 2]"}, "cross_entropy rank");
  expect_error<ValueError>([&] { F::cross_entropy(logits, from_vector<std::int64_t>({0, 1}, {2})); },
                           {"cross_entropy", "[2]", "3"}, "cross_entropy target shape");
  expect_error<TypeError>([&] { F::cross_entropy(logits, from_vector<float>({0, 1, 2}, {3})); },
                          {"cross_entropy", "int64"}, "cross_entropy float target");
  expect_error<ValueError>([&] { F::mse_loss(logits, random_tensor({4, 3}, kFloat32)); }, {"mse_loss", "[3, 4]", "[4, 3]"},
                           "mse_loss shapes");
  expect_error<TypeError>([&] { fc(random_tensor({3, 4}, kFloat64)); }, {"linear"}, "Linear dtype mismatch");
}

TEST(LayerErrors, BadConstructorArguments) {
  expect_error<ValueError>([] { nn::Linear(0, 3); }, {"Linear", "in_features"}, "Linear(0, 3)");
  expect_error<ValueError>([] { nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)); }, {"Conv2d", "groups"},
                           "Conv2d groups not dividing");
  expect_error<ValueError>([] { nn::BatchNorm2d(nn::BatchNormOptions(0)); }, {"BatchNorm2d", "num_features"},
                           "BatchNorm2d(0)");
  nn::Module plain("Plain");
  expect_error<ValueError>([&] { plain.forward(random_tensor({2}, kFloat32)); }, {"Plain", "forward"},
                           "base Module forward");
}

TEST(LayerErrors, TargetOutOfRangeIsIndexError) {
  const Tensor logits = random_tensor({3, 4}, kFloat32);
  expect_error<IndexError>([&] { F::cross_entropy(logits, from_vector<std::int64_t>({0, 4, 1}, {3})); },
                           {"cross_entropy", "target[1] = 4", "4 classes"}, "cross_entropy target 4 of 4 classes");
  expect_error<IndexError>([&] { F::cross_entropy(logits, from_vector<std::int64_t>({0, 1, -1}, {3})); },
                           {"target[2] = -1"}, "cross_entropy negative target");
  expect_error<IndexError>([&] { F::nll_loss(F::log_softmax(logits, 1), from_vector<std::int64_t>({7, 0, 0}, {3})); },
                           {"target[0] = 7"}, "nll_loss target out of range");
}

}  // namespace
