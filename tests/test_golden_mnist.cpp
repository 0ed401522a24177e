// The example MNIST CNN against PyTorch: tests/golden/mnist_cnn_golden.json, written by
// tests/golden/gen_mnist_golden.py (see its header for how to run it and what it stores). Both sides build the
// same weights, inputs and labels from the same integer generator (splitmix64), so only results are stored.
// Compared: logits, loss (cross_entropy and nll_loss of log_softmax), every parameter gradient, and the losses
// and final weights of 10 SGD (momentum) and 10 Adam steps.
//
// CPU: float64, tolerance 1e-8 (both sides compute in double; only summation order differs), and float32.
// GPU: float32 with TF32 off. Float32 tolerance 1e-4 (the CPU float32 run agrees to 1e-5). Elements compare with tol *
// (1 + |expected|); sums are relative: a signed sum against tol times the sum of magnitudes, the sum of magnitudes and
// of squares against themselves. Without the JSON file the tests skip and say how to make it. MINIDL_GOLDEN_DIR
// overrides its directory.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden_file.h"
#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;
using json = nlohmann::json;

namespace {

/// splitmix64, as in gen_mnist_golden.py.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  std::uint64_t state_;
};

/// examples/mnist's CNN without dropout; parameter names and order as the PyTorch model's.
struct GoldenNet : nn::Module {
  GoldenNet()
      : nn::Module("GoldenNet"), conv1(register_module("conv1", nn::Conv2d(1, 32, 3))),
        conv2(register_module("conv2", nn::Conv2d(32, 64, 3))), fc1(register_module("fc1", nn::Linear(9216, 128))),
        fc2(register_module("fc2", nn::Linear(128, 10))) {}
  Tensor forward(const Tensor& input) override {
    Tensor x = F::relu(conv1(input));
    x = F::relu(conv2(x));
    x = F::max_pool2d(x, 2).flatten(1);
    x = F::relu(fc1(x));
    return fc2(x);
  }
  nn::Conv2d conv1, conv2;
  nn::Linear fc1, fc2;
};

/// Loads the golden file; null when it is absent.
json load_golden() { return minidl::testing::read_golden("mnist_cnn_golden.json"); }

#define MINIDL_REQUIRE_GOLDEN(g) MINIDL_REQUIRE_GOLDEN_FILE(g, "mnist_cnn_golden.json", "gen_mnist_golden.py")

/// The formula weights of gen_mnist_golden.py (float64, on the CPU).
std::shared_ptr<GoldenNet> formula_net(const json& g) {
  auto net = std::make_shared<GoldenNet>();
  const std::uint64_t base = g["seeds"]["param_base"].get<std::uint64_t>();
  NoGradGuard no_grad;
  net->to(kFloat64);
  std::uint64_t k = 0;
  for (auto& [name, p] : net->named_parameters()) {
    SplitMix64 rng(base + k++);
    const std::string layer = name.substr(0, name.find('.'));
    const std::int64_t fan_in = layer == "conv1" ? 9 : layer == "conv2" ? 32 * 9 : layer == "fc1" ? 9216 : 128;
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    std::vector<double> v(static_cast<std::size_t>(p.numel()));
    for (double& e : v) e = bound * (2.0 * rng.uniform() - 1.0);
    p.copy_(from_vector(v, p.sizes()));
  }
  return net;
}

Tensor formula_input(const json& g) {
  SplitMix64 rng(g["seeds"]["input"].get<std::uint64_t>());
  const std::int64_t n = g["batch"].get<std::int64_t>();
  std::vector<double> v(static_cast<std::size_t>(n * 28 * 28));
  for (double& e : v) e = rng.uniform();
  return from_vector(v, {n, 1, 28, 28});
}

Tensor formula_labels(const json& g) {
  SplitMix64 rng(g["seeds"]["labels"].get<std::uint64_t>());
  const std::int64_t n = g["batch"].get<std::int64_t>();
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t& e : v) e = static_cast<std::int64_t>(rng.next() % 10);
  return from_vector(v, {n});
}

std::vector<double> host(const Tensor& t) { return t.detach().cpu().to(kFloat64).to_vector<double>(); }

class Checker {
 public:
  explicit Checker(double tol) : tol_(tol) {}

  void value(double got, double want, const std::string& what) const {
    EXPECT_LE(std::fabs(got - want), tol_ * (1.0 + std::fabs(want)))
        << what << ": got " << got << ", expected " << want;
  }

  void values(const std::vector<double>& got, const json& want, const std::string& what) const {
    ASSERT_EQ(got.size(), want.size()) << what;
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double w = want[i].get<double>();
      if (!(std::fabs(got[i] - w) <= tol_ * (1.0 + std::fabs(w))) && bad++ < 5) {
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", expected " << w;
      }
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
  }

  /// A tensor against a summary of gen_mnist_golden.py (sums, sampled elements, optionally all elements).
  void summary(const Tensor& t, const json& s, const std::string& what) const {
    ASSERT_TRUE(t.defined()) << what << " is undefined";
    ASSERT_EQ(t.sizes(), s["shape"].get<Shape>()) << what;
    const std::vector<double> v = host(t);
    double sum = 0, abs_sum = 0, sum_sq = 0;
    for (double e : v) {
      sum += e;
      abs_sum += std::fabs(e);
      sum_sq += e * e;
    }
    const double want_abs = s["abs_sum"].get<double>(), want_sq = s["sum_sq"].get<double>();
    EXPECT_LE(std::fabs(sum - s["sum"].get<double>()), tol_ * want_abs)
        << what << ": sum " << sum << ", expected " << s["sum"].get<double>();
    EXPECT_LE(std::fabs(abs_sum - want_abs), tol_ * want_abs)
        << what << ": sum of |.| " << abs_sum << ", expected " << want_abs;
    EXPECT_LE(std::fabs(sum_sq - want_sq), tol_ * want_sq)
        << what << ": sum of squares " << sum_sq << ", expected " << want_sq;
    const json& idx = s["indices"];
    std::vector<double> sampled;
    for (const json& i : idx) sampled.push_back(v.at(i.get<std::size_t>()));
    values(sampled, s["values"], what + " (sampled)");
    if (s.contains("full")) values(v, s["full"], what + " (all elements)");
  }

 private:
  double tol_;
};

/// Runs the whole comparison with the model and data on `device` in `dtype`.
void run_golden(const json& g, Device device, DType dtype, double tol) {
  const Checker check(tol);
  const Tensor x = formula_input(g).to(dtype).to(device);
  const Tensor y = formula_labels(g).to(device);
  EXPECT_NEAR(formula_input(g).sum().item<double>(), g["input_sum"].get<double>(), 1e-9) << "input formula";
  EXPECT_EQ(formula_labels(g).to_vector<std::int64_t>(), g["labels"].get<std::vector<std::int64_t>>()) << "labels";

  const auto make = [&] {
    std::shared_ptr<GoldenNet> net = formula_net(g);
    net->to(dtype);
    net->to(device);
    return net;
  };
  std::shared_ptr<GoldenNet> net = make();
  for (const auto& [name, p] : net->named_parameters()) check.summary(p, g["init"][name], "initial " + name);

  const Tensor logits = net->forward(x);
  check.values(host(logits), g["logits"], "logits");
  const Tensor loss = F::cross_entropy(logits, y);
  check.value(loss.item<double>(), g["loss"].get<double>(), "cross_entropy loss");
  check.value(F::nll_loss(F::log_softmax(logits, 1), y).item<double>(), g["loss"].get<double>(),
              "nll_loss(log_softmax)");
  loss.backward();
  for (const auto& [name, p] : net->named_parameters())
    check.summary(p.grad(), g["grads"][name], "gradient of " + name);

  const auto train = [&](const std::string& key, optim::Optimizer& opt, GoldenNet& model) {
    const json& want = g[key];
    std::vector<double> losses;
    for (int step = 0; step < want["steps"].get<int>(); ++step) {
      opt.zero_grad();
      const Tensor l = F::cross_entropy(model.forward(x), y);
      losses.push_back(l.item<double>());
      l.backward();
      opt.step();
    }
    check.values(losses, want["losses"], key + " losses");
    {
      NoGradGuard no_grad;
      check.value(F::cross_entropy(model.forward(x), y).item<double>(), want["final_loss"].get<double>(),
                  key + " final loss");
    }
    for (const auto& [name, p] : model.named_parameters())
      check.summary(p, want["weights"][name], key + " final " + name);
  };
  {
    std::shared_ptr<GoldenNet> model = make();
    optim::SGD sgd(model->parameters(),
                   optim::SGDOptions(g["sgd"]["lr"].get<double>()).momentum(g["sgd"]["momentum"].get<double>()));
    train("sgd", sgd, *model);
  }
  {
    std::shared_ptr<GoldenNet> model = make();
    optim::Adam adam(model->parameters(), optim::AdamOptions(g["adam"]["lr"].get<double>()));
    train("adam", adam, *model);
  }
}

TEST(GoldenMnist, CpuFloat64MatchesPyTorch) {
  const json g = load_golden();
  MINIDL_REQUIRE_GOLDEN(g);
  run_golden(g, Device(kCPU), kFloat64, 1e-8);
}

TEST(GoldenMnist, CpuFloat32MatchesPyTorch) {
  const json g = load_golden();
  MINIDL_REQUIRE_GOLDEN(g);
  run_golden(g, Device(kCPU), kFloat32, 1e-4);
}

TEST(GoldenMnist, GpuFloat32MatchesPyTorch) {
  MINIDL_REQUIRE_GPU();
  const json g = load_golden();
  MINIDL_REQUIRE_GOLDEN(g);
  cuda::set_allow_tf32(false, false);
  run_golden(g, Device(kCUDA), kFloat32, 1e-4);
}

}  // namespace
