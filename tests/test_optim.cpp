// Optimizers and learning-rate schedulers. Every optimizer configuration runs 10 steps on random float64
// parameters and gradients (some gradients absent, the learning rate changed half way) and is compared, element by
// element and state buffer by state buffer, with a plain double-precision reimplementation of PyTorch's formulas
// written below. On a GPU, float32 CUDA runs are compared with float32 CPU runs. When
// tests/golden/optim_golden.json exists (written by tests/golden/gen_optim_golden.py with PyTorch), the
// parameters after 10 steps and the schedulers' learning rates are compared with PyTorch's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "golden_file.h"
#include "minidl/config.h"
#include "minidl/minidl.h"
#include "test_util.h"
#if MINIDL_CUDA_ENABLED
#include <cuda_runtime.h>

#include "cuda/context.h"
#endif

namespace minidl {
namespace {

using optim::Optimizer;
using testing::expect_close;
using testing::expect_error;

// ---- configurations and the reference implementation ------------------------------------------------------

enum class Algo { Sgd, Adam, AdamW, Adadelta };

struct Config {
  std::string name;
  Algo algo = Algo::Sgd;
  double lr = 0.1;
  double momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool amsgrad = false;
  double rho = 0.9;
};

std::ostream& operator<<(std::ostream& os, const Config& c) { return os << c.name; }

Config sgd(std::string name, double lr, double momentum, double dampening, double wd, bool nesterov) {
  Config c;
  c.name = std::move(name);
  c.algo = Algo::Sgd;
  c.lr = lr;
  c.momentum = momentum;
  c.dampening = dampening;
  c.weight_decay = wd;
  c.nesterov = nesterov;
  return c;
}

Config adam(std::string name, Algo algo, double lr, double b1, double b2, double eps, double wd, bool amsgrad) {
  Config c;
  c.name = std::move(name);
  c.algo = algo;
  c.lr = lr;
  c.beta1 = b1;
  c.beta2 = b2;
  c.eps = eps;
  c.weight_decay = wd;
  c.amsgrad = amsgrad;
  return c;
}

Config adadelta(std::string name, double lr, double rho, double eps, double wd) {
  Config c;
  c.name = std::move(name);
  c.algo = Algo::Adadelta;
  c.lr = lr;
  c.rho = rho;
  c.eps = eps;
  c.weight_decay = wd;
  return c;
}

std::vector<Config> all_configs() {
  return {
      sgd("sgd", 0.1, 0.0, 0.0, 0.0, false),
      sgd("sgd_wd", 0.1, 0.0, 0.0, 0.05, false),
      sgd("sgd_momentum", 0.1, 0.9, 0.0, 0.0, false),
      sgd("sgd_momentum_dampening", 0.1, 0.9, 0.3, 0.0, false),
      sgd("sgd_momentum_dampening_wd", 0.05, 0.8, 0.2, 0.01, false),
      sgd("sgd_momentum_wd", 0.05, 0.9, 0.0, 0.1, false),
      sgd("sgd_nesterov", 0.1, 0.9, 0.0, 0.0, true),
      sgd("sgd_nesterov_wd", 0.05, 0.7, 0.0, 0.1, true),
      adam("adam", Algo::Adam, 0.01, 0.9, 0.999, 1e-8, 0.0, false),
      adam("adam_wd", Algo::Adam, 0.01, 0.8, 0.99, 1e-6, 0.1, false),
      adam("adam_amsgrad", Algo::Adam, 0.01, 0.9, 0.999, 1e-8, 0.0, true),
      // beta1 = 0.3 takes the other branch of PyTorch's lerp (weight 1 - beta1 >= 0.5).
      adam("adam_amsgrad_wd_low_beta1", Algo::Adam, 0.02, 0.3, 0.9, 1e-8, 0.05, true),
      adam("adamw", Algo::AdamW, 0.01, 0.9, 0.999, 1e-8, 1e-2, false),
      adam("adamw_strong_wd", Algo::AdamW, 0.01, 0.85, 0.995, 1e-7, 0.5, false),
      adam("adamw_amsgrad", Algo::AdamW, 0.01, 0.9, 0.999, 1e-8, 0.1, true),
      adam("adamw_no_wd", Algo::AdamW, 0.01, 0.9, 0.999, 1e-8, 0.0, false),
      adadelta("adadelta", 1.0, 0.9, 1e-6, 0.0),
      adadelta("adadelta_wd", 0.5, 0.8, 1e-5, 0.1),
  };
}

std::unique_ptr<Optimizer> make_optimizer(const Config& c, std::vector<Tensor> params) {
  switch (c.algo) {
    case Algo::Sgd:
      return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions(c.lr)
                                                                 .momentum(c.momentum)
                                                                 .dampening(c.dampening)
                                                                 .weight_decay(c.weight_decay)
                                                                 .nesterov(c.nesterov));
    case Algo::Adam:
      return std::make_unique<optim::Adam>(std::move(params), optim::AdamOptions(c.lr)
                                                                  .betas({c.beta1, c.beta2})
                                                                  .eps(c.eps)
                                                                  .weight_decay(c.weight_decay)
                                                                  .amsgrad(c.amsgrad));
    case Algo::AdamW:
      return std::make_unique<optim::AdamW>(std::move(params), optim::AdamWOptions(c.lr)
                                                                   .betas({c.beta1, c.beta2})
                                                                   .eps(c.eps)
                                                                   .weight_decay(c.weight_decay)
                                                                   .amsgrad(c.amsgrad));
    case Algo::Adadelta:
      return std::make_unique<optim::Adadelta>(
          std::move(params), optim::AdadeltaOptions(c.lr).rho(c.rho).eps(c.eps).weight_decay(c.weight_decay));
  }
  return nullptr;
}

using Grad = std::optional<std::vector<double>>;  // absent: the parameter has no gradient in that step

/// PyTorch's single-tensor update formulas, written out plainly in double.
class Reference {
 public:
  Reference(Config c, const std::vector<std::vector<double>>& params) : c_(std::move(c)), lr_(c_.lr) {
    for (const auto& p : params) {
      Slot s;
      s.p = p;
      s.buf = s.m = s.v = s.vmax = s.sq = s.acc = std::vector<double>(p.size(), 0.0);
      slots_.push_back(std::move(s));
    }
  }

  void set_lr(double lr) { lr_ = lr; }

  void step(const std::vector<Grad>& grads) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (!grads[i]) continue;
      Slot& s = slots_[i];
      const std::vector<double>& g = *grads[i];
      ++s.t;
      const double t = s.t;
      for (std::size_t j = 0; j < s.p.size(); ++j) {
        double& p = s.p[j];
        switch (c_.algo) {
          case Algo::Sgd: {
            double d = g[j] + c_.weight_decay * p;
            if (c_.momentum != 0.0) {
              s.buf[j] = s.t == 1 ? d : c_.momentum * s.buf[j] + (1.0 - c_.dampening) * d;
              d = c_.nesterov ? d + c_.momentum * s.buf[j] : s.buf[j];
            }
            p -= lr_ * d;
            break;
          }
          case Algo::Adam:
          case Algo::AdamW: {
            double grad = g[j];
            if (c_.algo == Algo::AdamW) {
              p *= 1.0 - lr_ * c_.weight_decay;
            } else {
              grad += c_.weight_decay * p;
            }
            s.m[j] = c_.beta1 * s.m[j] + (1.0 - c_.beta1) * grad;
            s.v[j] = c_.beta2 * s.v[j] + (1.0 - c_.beta2) * grad * grad;
            double v = s.v[j];
            if (c_.amsgrad) {
              s.vmax[j] = std::max(s.vmax[j], s.v[j]);
              v = s.vmax[j];
            }
            const double denom = std::sqrt(v) / std::sqrt(1.0 - std::pow(c_.beta2, t)) + c_.eps;
            p -= lr_ / (1.0 - std::pow(c_.beta1, t)) * s.m[j] / denom;
            break;
          }
          case Algo::Adadelta: {
            const double grad = g[j] + c_.weight_decay * p;
            s.sq[j] = c_.rho * s.sq[j] + (1.0 - c_.rho) * grad * grad;
            const double delta = std::sqrt(s.acc[j] + c_.eps) / std::sqrt(s.sq[j] + c_.eps) * grad;
            s.acc[j] = c_.rho * s.acc[j] + (1.0 - c_.rho) * delta * delta;
            p -= lr_ * delta;
            break;
          }
        }
      }
    }
  }

  const std::vector<double>& param(std::size_t i) const { return slots_[i].p; }
  int steps(std::size_t i) const { return slots_[i].t; }

  /// State buffers of parameter i under PyTorch's names.
  std::map<std::string, std::vector<double>> state(std::size_t i) const {
    const Slot& s = slots_[i];
    switch (c_.algo) {
      case Algo::Sgd:
        if (c_.momentum == 0.0) return {};
        return {{"momentum_buffer", s.buf}};
      case Algo::Adam:
      case Algo::AdamW:
        if (c_.amsgrad) return {{"exp_avg", s.m}, {"exp_avg_sq", s.v}, {"max_exp_avg_sq", s.vmax}};
        return {{"exp_avg", s.m}, {"exp_avg_sq", s.v}};
      case Algo::Adadelta:
        return {{"square_avg", s.sq}, {"acc_delta", s.acc}};
    }
    return {};
  }

 private:
  struct Slot {
    std::vector<double> p, buf, m, v, vmax, sq, acc;
    int t = 0;
  };
  Config c_;
  double lr_;
  std::vector<Slot> slots_;
};

// ---- scenarios: parameters and gradients -------------------------------------------------------------------

struct Scenario {
  std::vector<Shape> shapes;
  std::vector<std::vector<double>> init;  // per parameter
  std::vector<std::vector<Grad>> grads;   // [step][parameter]
};

constexpr int kSteps = 10;
constexpr int kLrChangeStep = 5;  // the learning rate is halved before this step (as a scheduler would)

/// Random values in [-1, 1); (parameter, step) pairs in `absent` get no gradient.
Scenario make_scenario(std::uint32_t seed, const std::set<std::pair<int, int>>& absent, int steps = kSteps,
                       std::vector<Shape> shapes = {{3, 4}, {7}, {2, 3, 2}, {1}}) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  auto values = [&](const Shape& s) {
    std::vector<double> v(static_cast<std::size_t>(shape_numel(s)));
    for (double& e : v) e = dist(rng);
    return v;
  };
  Scenario sc;
  sc.shapes = std::move(shapes);
  for (const Shape& s : sc.shapes) sc.init.push_back(values(s));
  for (int step = 0; step < steps; ++step) {
    std::vector<Grad> g;
    for (std::size_t i = 0; i < sc.shapes.size(); ++i) {
      if (absent.count({static_cast<int>(i), step})) {
        g.emplace_back(std::nullopt);
      } else {
        g.emplace_back(values(sc.shapes[i]));
      }
    }
    sc.grads.push_back(std::move(g));
  }
  return sc;
}

/// Parameter 1 has no gradient in the first two steps, parameter 3 none in step 5.
const std::set<std::pair<int, int>> kAbsent = {{1, 0}, {1, 1}, {3, 5}};

std::vector<Tensor> make_params(const Scenario& sc, DType dtype, Device device) {
  std::vector<Tensor> params;
  for (std::size_t i = 0; i < sc.shapes.size(); ++i) {
    params.push_back(from_vector(sc.init[i], sc.shapes[i], TensorOptions(dtype).device(device)).requires_grad_(true));
  }
  return params;
}

/// All gradients on the device up front, so that the training loop allocates nothing.
std::vector<std::vector<Tensor>> make_grads(const Scenario& sc, const std::vector<DType>& dtypes, Device device) {
  std::vector<std::vector<Tensor>> out;
  for (const auto& step : sc.grads) {
    std::vector<Tensor> g;
    for (std::size_t i = 0; i < step.size(); ++i) {
      g.push_back(step[i] ? from_vector(*step[i], sc.shapes[i], TensorOptions(dtypes[i]).device(device)) : Tensor());
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<double> values_of(const Tensor& t) { return t.detach().cpu().to(kFloat64).to_vector<double>(); }

struct Trained {
  std::vector<Tensor> params;
  std::unique_ptr<Optimizer> opt;
};

/// Trains with the scenario's gradients for steps [first, last); halves the lr before kLrChangeStep.
void train(Trained& run, const Config& c, const std::vector<std::vector<Tensor>>& grads, int first, int last,
           const std::function<void(int)>& after_step = {}) {
  for (int s = first; s < last; ++s) {
    if (s == kLrChangeStep) run.opt->set_lr(c.lr * 0.5);
    for (std::size_t i = 0; i < run.params.size(); ++i) run.params[i].mutable_grad() = grads[s][i];
    run.opt->step();
    if (after_step) after_step(s);
  }
}

Trained start(const Config& c, const Scenario& sc, DType dtype, Device device) {
  Trained run;
  run.params = make_params(sc, dtype, device);
  run.opt = make_optimizer(c, run.params);
  return run;
}

Reference reference_after(const Config& c, const Scenario& sc, int steps) {
  Reference ref(c, sc.init);
  for (int s = 0; s < steps; ++s) {
    if (s == kLrChangeStep) ref.set_lr(c.lr * 0.5);
    ref.step(sc.grads[s]);
  }
  return ref;
}

std::uint32_t seed_of(const std::string& name) { return static_cast<std::uint32_t>(std::hash<std::string>{}(name)); }

// ---- every configuration against the reference -------------------------------------------------------------

class OptimConfigTest : public ::testing::TestWithParam<Config> {};

TEST_P(OptimConfigTest, MatchesReferenceFloat64) {
  const Config& c = GetParam();
  const Scenario sc = make_scenario(seed_of(c.name), kAbsent);
  Trained run = start(c, sc, kFloat64, Device(kCPU));
  train(run, c, make_grads(sc, std::vector<DType>(sc.shapes.size(), kFloat64), Device(kCPU)), 0, kSteps);
  const Reference ref = reference_after(c, sc, kSteps);
  EXPECT_EQ(run.opt->lr(), c.lr * 0.5);

  const std::map<std::string, Tensor> state = run.opt->state_dict();
  std::size_t expected_keys = 1;  // "lr"
  for (std::size_t i = 0; i < sc.shapes.size(); ++i) {
    const std::string prefix = std::to_string(i) + ".";
    expect_close(run.params[i], from_vector(ref.param(i), sc.shapes[i]), 1e-12, 1e-13, prefix + "param");
    ASSERT_TRUE(state.count(prefix + "step")) << prefix << "step";
    EXPECT_EQ(state.at(prefix + "step").item<double>(), ref.steps(i)) << prefix << "step";
    ++expected_keys;
    for (const auto& [name, values] : ref.state(i)) {
      ASSERT_TRUE(state.count(prefix + name)) << "missing " << prefix << name;
      expect_close(state.at(prefix + name), from_vector(values, sc.shapes[i]), 1e-12, 1e-13, prefix + name);
      ++expected_keys;
    }
  }
  EXPECT_EQ(state.size(), expected_keys) << "unexpected entries in the state dict";
  EXPECT_EQ(state.at("lr").item<double>(), c.lr * 0.5);
}

TEST_P(OptimConfigTest, StateDictRoundTripContinuesIdentically) {
  const Config& c = GetParam();
  // Parameter 3 gets its first gradient only after the checkpoint, so it has no state in it.
  std::set<std::pair<int, int>> absent = {{1, 0}};
  for (int s = 0; s < 6; ++s) absent.insert({3, s});
  const Scenario sc = make_scenario(seed_of(c.name) + 1, absent);
  const auto grads = make_grads(sc, std::vector<DType>(sc.shapes.size(), kFloat64), Device(kCPU));
  constexpr int kSaveAt = 4;

  Trained a = start(c, sc, kFloat64, Device(kCPU));
  train(a, c, grads, 0, kSaveAt);
  const std::map<std::string, Tensor> saved = a.opt->state_dict();
  EXPECT_EQ(saved.count("3.step"), 0u);
  EXPECT_EQ(saved.count("1.step"), 1u);
  std::map<std::string, std::vector<double>> saved_values;
  for (const auto& [key, t] : saved) saved_values[key] = values_of(t);

  // A fresh optimizer over copies of the current parameters, with the state loaded.
  Trained b;
  for (const Tensor& p : a.params) b.params.push_back(p.detach().clone().requires_grad_(true));
  b.opt = make_optimizer(c, b.params);
  b.opt->load_state_dict(saved);
  EXPECT_EQ(b.opt->lr(), a.opt->lr());

  train(a, c, grads, kSaveAt, kSteps);
  train(b, c, grads, kSaveAt, kSteps);
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_EQ(values_of(a.params[i]), values_of(b.params[i])) << "parameter " << i << " differs after reload";
  }
  const auto sa = a.opt->state_dict(), sb = b.opt->state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [key, t] : sa) {
    ASSERT_TRUE(sb.count(key)) << key;
    EXPECT_EQ(values_of(t), values_of(sb.at(key))) << key;
  }
  // state_dict() is a snapshot: later steps did not change it.
  for (const auto& [key, t] : saved) EXPECT_EQ(values_of(t), saved_values.at(key)) << key;
}

std::string config_name(const ::testing::TestParamInfo<Config>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(All, OptimConfigTest, ::testing::ValuesIn(all_configs()), config_name);

// ---- behaviour shared by all optimizers --------------------------------------------------------------------

Tensor random_param(const Shape& shape, DType dtype = kFloat64) {
  return testing::random_tensor(shape, dtype, /*requires_grad=*/true);
}

TEST(Optimizer, ParameterWithoutGradIsSkipped) {
  Tensor a = random_param({4, 3}), b = random_param({5});
  optim::Adam opt({a, b}, optim::AdamOptions(0.1));
  const std::vector<double> b0 = values_of(b);
  const std::uint64_t va = a.version(), vb = b.version();
  for (int s = 0; s < 3; ++s) {
    a.mutable_grad() = testing::random_tensor({4, 3});
    opt.step();
  }
  EXPECT_EQ(values_of(b), b0);
  EXPECT_EQ(b.version(), vb) << "an untouched parameter's version must not change";
  EXPECT_GT(a.version(), va) << "the update is in place and must bump the version";
  const auto state = opt.state_dict();
  EXPECT_EQ(state.at("0.step").item<double>(), 3.0);
  EXPECT_EQ(state.count("1.step"), 0u);
  EXPECT_EQ(state.count("1.exp_avg"), 0u);
}

TEST(Optimizer, StepWithoutAnyGradChangesNothing) {
  Tensor a = random_param({6});
  optim::SGD opt({a}, optim::SGDOptions(0.1).momentum(0.9));
  const std::vector<double> a0 = values_of(a);
  opt.step();
  EXPECT_EQ(values_of(a), a0);
  EXPECT_EQ(opt.state_dict().size(), 1u);  // only "lr"
}

TEST(Optimizer, UpdateInvalidatesSavedTensors) {
  Tensor p = random_param({3});
  Tensor y = (p * p).sum();
  optim::SGD opt({p}, 0.1);
  p.mutable_grad() = testing::random_tensor({3});
  opt.step();
  EXPECT_THROW(y.backward(), AutogradError);
}

TEST(Optimizer, ZeroGradSetToNone) {
  Tensor a = random_param({2, 3}), b = random_param({4});
  optim::SGD opt({a, b}, 0.1);
  a.mutable_grad() = testing::random_tensor({2, 3});
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

TEST(Optimizer, ZeroGradInPlaceKeepsTheBuffers) {
  Tensor a = random_param({2, 3}), b = random_param({4});
  optim::SGD opt({a, b}, 0.1);
  a.mutable_grad() = testing::random_tensor({2, 3}, kFloat64, false, 0.5, 1.0);
  const void* ptr = a.grad().data_ptr();
  opt.zero_grad(false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().data_ptr(), ptr);
  EXPECT_EQ(values_of(a.grad()), std::vector<double>(6, 0.0));
  EXPECT_FALSE(b.grad().defined()) << "a missing gradient stays missing";
}

TEST(Optimizer, LibTorchDefaults) {
  EXPECT_EQ(optim::SGDOptions(0.5).lr(), 0.5);
  EXPECT_EQ(optim::SGDOptions(0.5).momentum(), 0.0);
  EXPECT_EQ(optim::SGDOptions(0.5).dampening(), 0.0);
  EXPECT_EQ(optim::SGDOptions(0.5).weight_decay(), 0.0);
  EXPECT_FALSE(optim::SGDOptions(0.5).nesterov());
  const optim::AdamOptions a;
  EXPECT_EQ(a.lr(), 1e-3);
  EXPECT_EQ(std::get<0>(a.betas()), 0.9);
  EXPECT_EQ(std::get<1>(a.betas()), 0.999);
  EXPECT_EQ(a.eps(), 1e-8);
  EXPECT_EQ(a.weight_decay(), 0.0);
  EXPECT_FALSE(a.amsgrad());
  const optim::AdamWOptions w;
  EXPECT_EQ(w.lr(), 1e-3);
  EXPECT_EQ(w.weight_decay(), 1e-2);
  EXPECT_EQ(w.eps(), 1e-8);
  const optim::AdadeltaOptions d;
  EXPECT_EQ(d.lr(), 1.0);
  EXPECT_EQ(d.rho(), 0.9);
  EXPECT_EQ(d.eps(), 1e-6);
  EXPECT_EQ(d.weight_decay(), 0.0);
  Tensor p = random_param({2});
  optim::Adam opt({p});
  EXPECT_EQ(opt.lr(), 1e-3);
}

TEST(Optimizer, BadOptionsAreRejected) {
  const std::vector<Tensor> ps = {random_param({3})};
  using optim::AdadeltaOptions;
  using optim::AdamOptions;
  using optim::AdamWOptions;
  using optim::SGDOptions;
  expect_error<ValueError>([&] { optim::SGD(ps, SGDOptions(-0.1)); }, {"SGD", "lr", "-0.1"});
  expect_error<ValueError>([&] { optim::SGD(ps, SGDOptions(NAN)); }, {"SGD", "lr"});
  expect_error<ValueError>([&] { optim::SGD(ps, SGDOptions(0.1).momentum(-0.5)); }, {"SGD", "momentum"});
  expect_error<ValueError>([&] { optim::SGD(ps, SGDOptions(0.1).weight_decay(-1)); }, {"SGD", "weight_decay"});
  expect_error<ValueError>([&] { optim::SGD(ps, SGDOptions(0.1).nesterov(true)); }, {"SGD", "nesterov", "momentum"});
  expect_error<ValueError>([&] { optim::SGD(ps, SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)); },
                           {"SGD", "nesterov", "dampening"});
  expect_error<ValueError>([&] { optim::Adam(ps, AdamOptions(-1e-3)); }, {"Adam", "lr"});
  expect_error<ValueError>([&] { optim::Adam(ps, AdamOptions().betas({1.0, 0.999})); }, {"Adam", "betas[0]", "1"});
  expect_error<ValueError>([&] { optim::Adam(ps, AdamOptions().betas({0.9, -0.1})); }, {"Adam", "betas[1]"});
  expect_error<ValueError>([&] { optim::Adam(ps, AdamOptions().eps(-1e-8)); }, {"Adam", "eps"});
  expect_error<ValueError>([&] { optim::Adam(ps, AdamOptions().weight_decay(-0.1)); }, {"Adam", "weight_decay"});
  expect_error<ValueError>([&] { optim::AdamW(ps, AdamWOptions().weight_decay(-0.1)); }, {"AdamW", "weight_decay"});
  expect_error<ValueError>([&] { optim::AdamW(ps, AdamWOptions().betas({0.9, 1.5})); }, {"AdamW", "betas[1]"});
  expect_error<ValueError>([&] { optim::Adadelta(ps, AdadeltaOptions().rho(1.5)); }, {"Adadelta", "rho"});
  expect_error<ValueError>([&] { optim::Adadelta(ps, AdadeltaOptions().eps(-1)); }, {"Adadelta", "eps"});
  expect_error<ValueError>([&] { optim::Adadelta(ps, AdadeltaOptions(-1.0)); }, {"Adadelta", "lr"});
  optim::SGD opt(ps, 0.1);
  expect_error<ValueError>([&] { opt.set_lr(-0.5); }, {"set_lr", "-0.5"});
  EXPECT_EQ(opt.lr(), 0.1);
}

TEST(Optimizer, BadParametersAreRejected) {
  expect_error<ValueError>([] { optim::SGD(std::vector<Tensor>{}, 0.1); }, {"empty"});
  expect_error<ValueError>([] { optim::SGD({random_param({2}), Tensor()}, 0.1); }, {"parameter 1", "undefined"});
  expect_error<TypeError>(
      [] {
        optim::SGD({random_param({2}), arange(4.0, TensorOptions(kInt64))}, 0.1);
      },
      {"parameter 1", "int64"});
  Tensor p = random_param({2});
  expect_error<ValueError>([&] { optim::SGD({p, p}, 0.1); }, {"parameter 1", "more than once"});
  expect_error<ValueError>([&] { optim::SGD({random_param({3}), p * 2.0}, 0.1); }, {"parameter 1", "leaf"});
}

TEST(Optimizer, BadGradientsAreRejected) {
  Tensor a = random_param({2, 3}), b = random_param({4});
  optim::Adam opt({a, b});
  b.mutable_grad() = testing::random_tensor({5});
  expect_error<ValueError>([&] { opt.step(); }, {"parameter 1", "[5]", "[4]"});
  b.mutable_grad() = testing::random_tensor({4}, kFloat32);
  expect_error<TypeError>([&] { opt.step(); }, {"parameter 1", "float32"});
}

TEST(Optimizer, BadStateDictsAreRejectedWithoutChange) {
  Tensor a = random_param({2, 3}), b = random_param({4});
  optim::Adam opt({a, b}, optim::AdamOptions(0.01).amsgrad(true));
  a.mutable_grad() = testing::random_tensor({2, 3});
  b.mutable_grad() = testing::random_tensor({4});
  opt.step();
  opt.step();
  const auto good = opt.state_dict();
  auto with = [&](const std::function<void(std::map<std::string, Tensor>&)>& edit) {
    auto s = good;
    edit(s);
    return s;
  };
  const std::vector<std::pair<std::map<std::string, Tensor>, std::string>> bad = {
      {with([](auto& s) {
         s["0.bogus"] = testing::random_tensor({2, 3});
       }),
       "0.bogus"},
      {with([](auto& s) { s["2.step"] = full({}, 1.0, TensorOptions(kFloat64)); }), "2.step"},
      {with([](auto& s) {
         s["01.exp_avg"] = testing::random_tensor({2, 3});
       }),
       "01.exp_avg"},
      {with([](auto& s) { s["1.exp_avg"] = testing::random_tensor({5}); }), "[5]"},
      {with([](auto& s) { s.erase("1.max_exp_avg_sq"); }), "1.max_exp_avg_sq"},
      {with([](auto& s) { s.erase("0.step"); }), "0.step"},
      {with([](auto& s) { s["0.step"] = full({}, 1.5, TensorOptions(kFloat64)); }), "0.step"},
      {with([](auto& s) { s.erase("lr"); }), "lr"},
      {with([](auto& s) { s["lr"] = full({}, -1.0, TensorOptions(kFloat64)); }), "lr"},
  };
  for (const auto& [state, key] : bad) {
    SCOPED_TRACE(key);
    expect_error<ValueError>([&] { opt.load_state_dict(state); }, {key});
    const auto now = opt.state_dict();
    ASSERT_EQ(now.size(), good.size());
    for (const auto& [k, t] : good) EXPECT_EQ(values_of(now.at(k)), values_of(t)) << k;
  }
}

// ---- schedulers --------------------------------------------------------------------------------------------

struct SchedulerFixture {
  Tensor p = random_param({2});
  optim::SGD opt{{p}, 0.1};
};

/// Steps the scheduler `epochs` times; expects get_last_lr() and the optimizer's lr to follow `expected`.
void expect_lrs(optim::LRScheduler& s, Optimizer& opt, int epochs, const std::function<double(int)>& expected) {
  for (int e = 0; e <= epochs; ++e) {
    if (e > 0) s.step();
    EXPECT_EQ(s.last_epoch(), e);
    EXPECT_NEAR(s.get_last_lr(), expected(e), 1e-15) << "epoch " << e;
    EXPECT_EQ(opt.lr(), s.get_last_lr()) << "epoch " << e;
  }
}

TEST(Schedulers, StepLR) {
  SchedulerFixture f;
  optim::StepLR s(f.opt, 3, 0.5);
  expect_lrs(s, f.opt, 12, [](int e) { return 0.1 * std::pow(0.5, e / 3); });
  SchedulerFixture g;
  optim::StepLR d(g.opt, 2);  // gamma defaults to 0.1
  expect_lrs(d, g.opt, 6, [](int e) { return 0.1 * std::pow(0.1, e / 2); });
}

TEST(Schedulers, CosineAnnealingLR) {
  SchedulerFixture f;
  optim::CosineAnnealingLR s(f.opt, 10, 0.001);
  expect_lrs(s, f.opt, 25, [](int e) { return 0.001 + (0.1 - 0.001) * (1.0 + std::cos(M_PI * e / 10.0)) / 2.0; });
}

TEST(Schedulers, LinearLR) {
  SchedulerFixture f;
  optim::LinearLR s(f.opt, 0.25, 1.0, 4);
  expect_lrs(s, f.opt, 8, [](int e) { return 0.1 * (0.25 + 0.75 * std::min(e, 4) / 4.0); });
  SchedulerFixture g;
  optim::LinearLR d(g.opt);  // 1/3 -> 1 over 5 iterations
  expect_lrs(d, g.opt, 8, [](int e) { return 0.1 * (1.0 / 3.0 + (2.0 / 3.0) * std::min(e, 5) / 5.0); });
}

TEST(Schedulers, SequentialWarmupThenCosine) {
  SchedulerFixture f;
  auto warmup = std::make_shared<optim::LinearLR>(f.opt, 0.1, 1.0, 3);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(f.opt, 8, 0.0);
  optim::SequentialLR s(f.opt, {warmup, cosine}, {3});
  expect_lrs(s, f.opt, 15, [](int e) {
    if (e < 3) return 0.1 * (0.1 + 0.9 * e / 3.0);
    return 0.1 * (1.0 + std::cos(M_PI * (e - 3) / 8.0)) / 2.0;
  });
}

TEST(Schedulers, StateDictRoundTrip) {
  SchedulerFixture f, g;
  auto make = [](Optimizer& opt) {
    auto warmup = std::make_shared<optim::LinearLR>(opt, 0.2, 1.0, 4);
    auto decay = std::make_shared<optim::StepLR>(opt, 3, 0.5);
    return std::make_unique<optim::SequentialLR>(opt, std::vector<std::shared_ptr<optim::LRScheduler>>{warmup, decay},
                                                 std::vector<std::int64_t>{4});
  };
  auto a = make(f.opt);
  for (int e = 0; e < 6; ++e) a->step();
  const auto saved = a->state_dict();
  auto b = make(g.opt);
  b->load_state_dict(saved);
  EXPECT_EQ(g.opt.lr(), f.opt.lr());
  for (int e = 0; e < 8; ++e) {
    a->step();
    b->step();
    EXPECT_EQ(b->last_epoch(), a->last_epoch());
    EXPECT_EQ(b->get_last_lr(), a->get_last_lr());
    EXPECT_EQ(g.opt.lr(), f.opt.lr());
  }
  auto bad = saved;
  bad["last_epoch"] = -2;
  expect_error<ValueError>([&] { b->load_state_dict(bad); }, {"last_epoch"});
  bad = saved;
  bad.erase("base_lr");
  expect_error<ValueError>([&] { b->load_state_dict(bad); }, {"base_lr"});
  bad = saved;
  bad["gamma"] = 0.5;
  expect_error<ValueError>([&] { b->load_state_dict(bad); }, {"gamma"});
}

TEST(Schedulers, BadArgumentsAreRejected) {
  SchedulerFixture f, other;
  expect_error<ValueError>([&] { optim::StepLR(f.opt, 0); }, {"StepLR", "step_size"});
  expect_error<ValueError>([&] { optim::StepLR(f.opt, 2, -0.5); }, {"StepLR", "gamma"});
  expect_error<ValueError>([&] { optim::CosineAnnealingLR(f.opt, 0); }, {"CosineAnnealingLR", "T_max"});
  expect_error<ValueError>([&] { optim::CosineAnnealingLR(f.opt, 5, -1.0); }, {"CosineAnnealingLR", "eta_min"});
  expect_error<ValueError>([&] { optim::LinearLR(f.opt, 0.0); }, {"LinearLR", "start_factor"});
  expect_error<ValueError>([&] { optim::LinearLR(f.opt, 0.5, 1.5); }, {"LinearLR", "end_factor"});
  expect_error<ValueError>([&] { optim::LinearLR(f.opt, 0.5, 1.0, 0); }, {"LinearLR", "total_iters"});
  auto s1 = std::make_shared<optim::StepLR>(f.opt, 2);
  auto s2 = std::make_shared<optim::StepLR>(f.opt, 3);
  auto foreign = std::make_shared<optim::StepLR>(other.opt, 3);
  expect_error<ValueError>([&] { optim::SequentialLR(f.opt, {}, {}); }, {"SequentialLR", "at least one"});
  expect_error<ValueError>([&] { optim::SequentialLR(f.opt, {s1, s2}, {}); }, {"SequentialLR", "milestones"});
  expect_error<ValueError>([&] { optim::SequentialLR(f.opt, {s1, s2, s1}, {3, 3}); }, {"SequentialLR", "increasing"});
  expect_error<ValueError>([&] { optim::SequentialLR(f.opt, {s1, foreign}, {3}); }, {"SequentialLR", "scheduler 1"});
}

TEST(Schedulers, DriveTheOptimizerUpdate) {
  // SGD without momentum moves p by exactly -lr * g: the step must use the scheduler's current lr.
  Tensor p = random_param({5});
  optim::SGD opt({p}, 0.1);
  optim::StepLR sched(opt, 1, 0.5);
  for (int e = 0; e < 4; ++e) {
    const std::vector<double> before = values_of(p);
    const Tensor g = testing::random_tensor({5});
    p.mutable_grad() = g;
    opt.step();
    const std::vector<double> after = values_of(p), gv = values_of(g);
    for (std::size_t j = 0; j < after.size(); ++j) {
      // DOUBLE_EQ (4 ulps): a build with -march=native may fuse the multiply-add into one rounding.
      EXPECT_DOUBLE_EQ(after[j], before[j] + (-(0.1 * std::pow(0.5, e))) * gv[j]) << "epoch " << e << ", element " << j;
    }
    sched.step();
  }
}

// ---- PyTorch golden values ---------------------------------------------------------------------------------

nlohmann::json load_golden() { return minidl::testing::read_golden("optim_golden.json"); }

#define MINIDL_REQUIRE_GOLDEN(g) MINIDL_REQUIRE_GOLDEN_FILE(g, "optim_golden.json", "gen_optim_golden.py")

Config config_from_json(const nlohmann::json& j) {
  const std::string type = j.at("optimizer");
  const nlohmann::json& o = j.at("options");
  Config c;
  c.name = j.at("name");
  c.lr = o.at("lr");
  c.weight_decay = o.at("weight_decay");
  if (type == "SGD") {
    c.algo = Algo::Sgd;
    c.momentum = o.at("momentum");
    c.dampening = o.at("dampening");
    c.nesterov = o.at("nesterov");
  } else if (type == "Adam" || type == "AdamW") {
    c.algo = type == "Adam" ? Algo::Adam : Algo::AdamW;
    c.beta1 = o.at("betas").at(0);
    c.beta2 = o.at("betas").at(1);
    c.eps = o.at("eps");
    c.amsgrad = o.at("amsgrad");
  } else if (type == "Adadelta") {
    c.algo = Algo::Adadelta;
    c.rho = o.at("rho");
    c.eps = o.at("eps");
  } else {
    throw ValueError("optim_golden.json: unknown optimizer " + type);
  }
  return c;
}

std::shared_ptr<optim::LRScheduler> scheduler_from_json(Optimizer& opt, const nlohmann::json& spec) {
  const std::string type = spec.at("type");
  if (type == "StepLR") {
    return std::make_shared<optim::StepLR>(opt, spec.at("step_size").get<std::int64_t>(),
                                           spec.at("gamma").get<double>());
  }
  if (type == "CosineAnnealingLR") {
    return std::make_shared<optim::CosineAnnealingLR>(opt, spec.at("T_max").get<std::int64_t>(),
                                                      spec.at("eta_min").get<double>());
  }
  if (type == "LinearLR") {
    return std::make_shared<optim::LinearLR>(opt, spec.at("start_factor").get<double>(),
                                             spec.at("end_factor").get<double>(),
                                             spec.at("total_iters").get<std::int64_t>());
  }
  if (type == "SequentialLR") {
    std::vector<std::shared_ptr<optim::LRScheduler>> children;
    for (const auto& child : spec.at("schedulers")) children.push_back(scheduler_from_json(opt, child));
    return std::make_shared<optim::SequentialLR>(opt, children, spec.at("milestones").get<std::vector<std::int64_t>>());
  }
  throw ValueError("optim_golden.json: unknown scheduler " + type);
}

TEST(OptimGolden, OptimizersMatchPyTorch) {
  const auto golden = load_golden();
  MINIDL_REQUIRE_GOLDEN(golden);
  ASSERT_FALSE(golden.at("optimizers").empty());
  for (const auto& jc : golden.at("optimizers")) {
    const Config c = config_from_json(jc);
    SCOPED_TRACE(c.name);
    std::vector<Tensor> params;
    std::vector<Shape> shapes;
    for (std::size_t i = 0; i < jc.at("shapes").size(); ++i) {
      shapes.push_back(jc.at("shapes").at(i).get<Shape>());
      params.push_back(from_vector(jc.at("params").at(i).get<std::vector<double>>(), shapes[i]).requires_grad_(true));
    }
    const auto opt = make_optimizer(c, params);
    for (const auto& step : jc.at("grads")) {
      for (std::size_t i = 0; i < params.size(); ++i) {
        params[i].mutable_grad() =
            step.at(i).is_null() ? Tensor() : from_vector(step.at(i).get<std::vector<double>>(), shapes[i]);
      }
      opt->step();
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      expect_close(params[i], from_vector(jc.at("expected").at(i).get<std::vector<double>>(), shapes[i]), 1e-10, 1e-10,
                   c.name + " parameter " + std::to_string(i));
    }
  }
}

TEST(OptimGolden, SchedulersMatchPyTorch) {
  const auto golden = load_golden();
  MINIDL_REQUIRE_GOLDEN(golden);
  ASSERT_FALSE(golden.at("schedulers").empty());
  for (const auto& js : golden.at("schedulers")) {
    SCOPED_TRACE(js.at("name").get<std::string>());
    Tensor p = random_param({1});
    optim::SGD opt({p}, js.at("base_lr").get<double>());
    const auto sched = scheduler_from_json(opt, js.at("spec"));
    const std::vector<double> lrs = js.at("lrs");
    for (std::size_t e = 0; e < lrs.size(); ++e) {
      if (e > 0) sched->step();
      EXPECT_NEAR(sched->get_last_lr(), lrs[e], 1e-10 * std::max(1.0, std::fabs(lrs[e]))) << "epoch " << e;
    }
  }
}

// ---- CUDA --------------------------------------------------------------------------------------------------
#if MINIDL_CUDA_ENABLED

class OptimGpuTest : public ::testing::TestWithParam<Config> {};

TEST_P(OptimGpuTest, Float32MatchesCpuWithoutAllocating) {
  MINIDL_REQUIRE_GPU();
  const Config& c = GetParam();
  const Scenario sc = make_scenario(seed_of(c.name) + 2, kAbsent);
  const std::vector<DType> dtypes(sc.shapes.size(), kFloat32);

  Trained cpu_run = start(c, sc, kFloat32, Device(kCPU));
  train(cpu_run, c, make_grads(sc, dtypes, Device(kCPU)), 0, kSteps);

  Trained gpu_run = start(c, sc, kFloat32, Device(kCUDA, 0));
  const auto grads = make_grads(sc, dtypes, Device(kCUDA, 0));
  std::size_t allocs_after_step2 = 0;
  train(gpu_run, c, grads, 0, kSteps, [&](int s) {
    if (s == 1) allocs_after_step2 = cuda::memory_stats(0).num_device_allocs;
  });
  if (cuda::allocator_caching()) {  // without the cache (MINIDL_CUDA_NO_CACHE=1) every allocation is a cudaMalloc
    EXPECT_EQ(cuda::memory_stats(0).num_device_allocs, allocs_after_step2) << "steps 3..10 allocated device memory";
  }

  for (std::size_t i = 0; i < sc.shapes.size(); ++i) {
    expect_close(gpu_run.params[i], cpu_run.params[i], 1e-5, 1e-6, "parameter " + std::to_string(i));
  }
  const auto gs = gpu_run.opt->state_dict(), cs = cpu_run.opt->state_dict();
  ASSERT_EQ(gs.size(), cs.size());
  for (const auto& [key, t] : cs) {
    ASSERT_TRUE(gs.count(key)) << key;
    expect_close(gs.at(key), t, 1e-5, 1e-6, key);
  }
}

INSTANTIATE_TEST_SUITE_P(All, OptimGpuTest, ::testing::ValuesIn(all_configs()), config_name);

TEST(OptimGpu, ManyParametersOfBothDtypes) {
  MINIDL_REQUIRE_GPU();
  // More parameters than one kernel launch takes, float32 and float64 interleaved, sizes from 1 to 5003, and
  // one larger than a launch's threads per tensor (so its grid-stride loop wraps).
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (int i = 0; i < 75; ++i) {
    shapes.push_back({i == 0 ? 300001 : 1 + (i * 937) % 5003});
    dtypes.push_back(i % 3 == 0 ? kFloat64 : kFloat32);
  }
  std::set<std::pair<int, int>> absent = {{5, 0}, {40, 3}, {70, 7}};
  const Scenario sc = make_scenario(77, absent, kSteps, shapes);
  for (const Config& c : {adam("adam_amsgrad", Algo::Adam, 0.01, 0.9, 0.999, 1e-8, 0.01, true),
                          sgd("sgd_nesterov_wd", 0.05, 0.7, 0.0, 0.1, true)}) {
    SCOPED_TRACE(c.name);
    Trained runs[2];
    const Device devices[2] = {Device(kCPU), Device(kCUDA, 0)};
    for (int r = 0; r < 2; ++r) {
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        runs[r].params.push_back(
            from_vector(sc.init[i], shapes[i], TensorOptions(dtypes[i]).device(devices[r])).requires_grad_(true));
      }
      runs[r].opt = make_optimizer(c, runs[r].params);
      train(runs[r], c, make_grads(sc, dtypes, devices[r]), 0, kSteps);
    }
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const bool f64 = dtypes[i] == kFloat64;
      expect_close(runs[1].params[i], runs[0].params[i], f64 ? 1e-12 : 1e-5, f64 ? 1e-13 : 1e-6,
                   "parameter " + std::to_string(i));
    }
  }
}

TEST(OptimGpu, StateDictRoundTrip) {
  MINIDL_REQUIRE_GPU();
  const Config c = adam("adamw_amsgrad", Algo::AdamW, 0.01, 0.9, 0.999, 1e-8, 0.1, true);
  const Scenario sc = make_scenario(91, kAbsent);
  const auto grads = make_grads(sc, std::vector<DType>(sc.shapes.size(), kFloat32), Device(kCUDA, 0));
  Trained a = start(c, sc, kFloat32, Device(kCUDA, 0));
  train(a, c, grads, 0, 4);
  Trained b;
  for (const Tensor& p : a.params) b.params.push_back(p.detach().clone().requires_grad_(true));
  b.opt = make_optimizer(c, b.params);
  b.opt->load_state_dict(a.opt->state_dict());
  train(a, c, grads, 4, kSteps);
  train(b, c, grads, 4, kSteps);
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_EQ(values_of(a.params[i]), values_of(b.params[i])) << "parameter " << i;
  }
}

TEST(OptimGpu, StepCapturedInACudaGraph) {
  MINIDL_REQUIRE_GPU();
  const Config c = adam("adam_amsgrad_wd", Algo::Adam, 0.01, 0.9, 0.999, 1e-8, 0.01, true);
  // One set of gradients for every step: a graph replays the same pointers.
  const Scenario sc = make_scenario(123, {}, 1);
  const std::vector<DType> dtypes(sc.shapes.size(), kFloat32);
  Trained cpu_run = start(c, sc, kFloat32, Device(kCPU));
  Trained gpu_run = start(c, sc, kFloat32, Device(kCUDA, 0));
  const std::vector<Tensor> cpu_grads = make_grads(sc, dtypes, Device(kCPU))[0];
  const std::vector<Tensor> gpu_grads = make_grads(sc, dtypes, Device(kCUDA, 0))[0];
  for (std::size_t i = 0; i < sc.shapes.size(); ++i) {
    cpu_run.params[i].mutable_grad() = cpu_grads[i];
    gpu_run.params[i].mutable_grad() = gpu_grads[i];
  }
  cpu_run.opt->step();  // the warm-up step, outside the graph
  gpu_run.opt->step();

  // Global mode: any unsafe call inside the step (an allocation, a synchronisation) fails the capture.
  const cudaStream_t stream = gpu::stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  MINIDL_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  gpu_run.opt->step();
  MINIDL_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  MINIDL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 6; ++r) {
    if (r == 3) {  // a scheduler's change between replays reaches the captured update
      cpu_run.opt->set_lr(0.003);
      gpu_run.opt->set_lr(0.003);
    }
    MINIDL_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    cpu_run.opt->step();
  }
  cuda::synchronize();
  MINIDL_CUDA_CHECK(cudaGraphExecDestroy(exec));
  MINIDL_CUDA_CHECK(cudaGraphDestroy(graph));

  for (std::size_t i = 0; i < sc.shapes.size(); ++i) {
    expect_close(gpu_run.params[i], cpu_run.params[i], 1e-5, 1e-6, "parameter " + std::to_string(i));
  }
  const auto gs = gpu_run.opt->state_dict(), cs = cpu_run.opt->state_dict();
  EXPECT_EQ(gs.at("0.step").item<double>(), 7.0) << "each replay advances the device-side step count";
  for (const auto& [key, t] : cs) expect_close(gs.at(key), t, 1e-5, 1e-6, key);
}

TEST(OptimGpu, ZeroGradInPlaceKeepsTheBuffers) {
  MINIDL_REQUIRE_GPU();
  Tensor p = random_param({3, 3}).cuda().detach().requires_grad_(true);
  optim::SGD opt({p}, 0.1);
  p.mutable_grad() = testing::random_tensor({3, 3}).cuda();
  const void* ptr = p.grad().data_ptr();
  opt.zero_grad(false);
  EXPECT_EQ(p.grad().data_ptr(), ptr);
  EXPECT_EQ(values_of(p.grad()), std::vector<double>(9, 0.0));
}

TEST(OptimGpu, MixedDevicesAreRejected) {
  MINIDL_REQUIRE_GPU();
  Tensor a = random_param({2});
  Tensor b = random_param({2}).cuda().detach().requires_grad_(true);
  expect_error<ValueError>([&] { optim::Adam({a, b}); }, {"parameter 1", "cuda"});
}

#endif  // MINIDL_CUDA_ENABLED

}  // namespace
}  // namespace minidl
