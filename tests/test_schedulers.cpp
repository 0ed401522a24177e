// The schedulers added for training loops (OneCycleLR, ReduceLROnPlateau) and all schedulers over several
// parameter groups: closed-form checks written from PyTorch's definitions, momentum cycling, bad arguments, and,
// when tests/golden/schedulers_golden.json exists (written by tests/golden/gen_schedulers_golden.py with
// PyTorch), every configuration's learning-rate (and momentum) sequence against PyTorch's.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden_file.h"
#include "minidl/minidl.h"
#include "test_util.h"

namespace minidl {
namespace {

using optim::OptimizerParamGroup;

/// An SGD over two groups with learning rates lr0 and lr1.
struct TwoGroups {
  Tensor a = testing::random_tensor({3}, kFloat64, true), b = testing::random_tensor({2}, kFloat64, true);
  std::unique_ptr<optim::SGD> opt;
  TwoGroups(double lr0, double lr1, double momentum = 0.0) {
    std::vector<OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{a});
    groups.emplace_back(std::vector<Tensor>{b},
                        std::make_unique<optim::SGDOptions>(optim::SGDOptions(lr1).momentum(momentum)));
    opt = std::make_unique<optim::SGD>(groups, optim::SGDOptions(lr0).momentum(momentum));
  }
  double lr(std::size_t g) const { return opt->param_groups()[g].options().get_lr(); }
  double momentum(std::size_t g) const {
    return static_cast<const optim::SGDOptions&>(opt->param_groups()[g].options()).momentum();
  }
};

TEST(Schedulers, ClosedFormsActOnEveryGroup) {
  TwoGroups f(0.1, 0.4);
  optim::LinearLR s(*f.opt, 0.25, 1.0, 4);
  for (int e = 0; e <= 6; ++e) {
    if (e > 0) s.step();
    for (std::size_t g = 0; g < 2; ++g) {
      const double base = g == 0 ? 0.1 : 0.4;
      EXPECT_NEAR(f.lr(g), base * (0.25 + 0.75 * std::min(e, 4) / 4.0), 1e-15) << "epoch " << e << " group " << g;
      EXPECT_EQ(s.get_last_lrs()[g], f.lr(g));
    }
  }
  const auto saved = s.state_dict();
  EXPECT_EQ(saved.at("base_lr.1"), 0.4);
  TwoGroups h(0.1, 0.4);
  optim::LinearLR t(*h.opt, 0.25, 1.0, 4);
  t.load_state_dict(saved);
  EXPECT_EQ(h.lr(1), f.lr(1));
}

/// PyTorch's OneCycleLR.get_lr, transcribed: the value at `step` of an anneal from the phases' endpoints.
double one_cycle_reference(int step, int total, double pct_start, bool cosine, bool three_phase,
                           const std::vector<double>& values /* initial, max, min or momenta by phase */,
                           const std::vector<std::pair<int, int>>& phase_ends) {
  std::vector<double> ends = {pct_start * total - 1.0};
  if (three_phase) ends.push_back(2.0 * pct_start * total - 2.0);
  ends.push_back(total - 1.0);
  double start = 0.0;
  for (std::size_t i = 0; i < ends.size(); ++i) {
    if (step <= ends[i] || i + 1 == ends.size()) {
      const double pct = (step - start) / (ends[i] - start);
      const double a = values[phase_ends[i].first], b = values[phase_ends[i].second];
      return cosine ? b + (a - b) / 2.0 * (std::cos(M_PI * pct) + 1.0) : (b - a) * pct + a;
    }
    start = ends[i];
  }
  return NAN;
}

TEST(Schedulers, OneCycleLR) {
  for (const bool three_phase : {false, true}) {
    for (const std::string strategy : {"cos", "linear"}) {
      SCOPED_TRACE(strategy + (three_phase ? " three-phase" : ""));
      const int total = 20;
      TwoGroups f(0.5, 0.5, 0.9);
      optim::OneCycleLR s(*f.opt, std::vector<double>{1.0, 0.2}, total, 0.25, strategy, true, 0.8, 0.9, 10.0, 100.0,
                          three_phase);
      const std::vector<std::pair<int, int>> lr_phases =
          three_phase ? std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {0, 2}}
                      : std::vector<std::pair<int, int>>{{0, 1}, {1, 2}};
      const std::vector<std::pair<int, int>> m_phases =
          three_phase ? std::vector<std::pair<int, int>>{{1, 0}, {0, 1}, {1, 1}}
                      : std::vector<std::pair<int, int>>{{1, 0}, {0, 1}};
      for (int e = 0; e < total; ++e) {
        if (e > 0) s.step();
        for (std::size_t g = 0; g < 2; ++g) {
          const double max_lr = g == 0 ? 1.0 : 0.2;
          const std::vector<double> lrs = {max_lr / 10.0, max_lr, max_lr / 10.0 / 100.0};
          EXPECT_NEAR(f.lr(g), one_cycle_reference(e, total, 0.25, strategy == "cos", three_phase, lrs, lr_phases),
                      1e-15)
              << "epoch " << e << " group " << g;
          EXPECT_NEAR(f.momentum(g), one_cycle_reference(e, total, 0.25, strategy == "cos", three_phase, {0.8, 0.9},
                                                         m_phases),
                      1e-15)
              << "epoch " << e;
        }
        // Landmarks: the start, the peak at the end of the first phase, the floor at the last step.
        if (e == 0) EXPECT_NEAR(f.lr(0), 0.1, 1e-15);
        if (e == 4) EXPECT_NEAR(f.lr(0), 1.0, 1e-15);
        if (e == 4) EXPECT_NEAR(f.momentum(0), 0.8, 1e-15);
        if (e == total - 1) EXPECT_NEAR(f.lr(0), 1e-3, 1e-15);
      }
      s.step();  // to epoch total_steps: allowed, as PyTorch
      EXPECT_GE(f.lr(0), 0.0);
      EXPECT_ERROR(ValueError, s.step(), "OneCycleLR", "21", "20");
      EXPECT_EQ(s.last_epoch(), total) << "the failed step changed nothing";
    }
  }
}

TEST(Schedulers, OneCycleLRCyclesAdamBeta1) {
  Tensor p = testing::random_tensor({3}, kFloat64, true);
  optim::Adam opt(std::vector<Tensor>{p}, optim::AdamOptions(0.01).betas({0.9, 0.99}));
  optim::OneCycleLR s(opt, 0.1, 10);
  auto beta = [&](int k) {
    const auto& o = static_cast<const optim::AdamOptions&>(opt.param_groups()[0].options());
    return k == 0 ? std::get<0>(o.betas()) : std::get<1>(o.betas());
  };
  EXPECT_NEAR(beta(0), 0.95, 1e-15);
  EXPECT_EQ(beta(1), 0.99);
  for (int e = 0; e < 2; ++e) s.step();
  EXPECT_NEAR(beta(0), 0.85 + (0.95 - 0.85) / 2.0 * (std::cos(M_PI * 1.0) + 1.0), 1e-15);  // end of phase 1
  EXPECT_NEAR(opt.lr(), 0.1, 1e-15);
}

TEST(Schedulers, ReduceLROnPlateau) {
  // Constant metric, patience 2, cooldown 1: the first epoch sets the best; epochs 2-4 are bad and the third
  // of them (more than patience) halves the lr; the cooldown epoch 5 resets the count; 6-8 bad: halved again.
  TwoGroups f(0.1, 0.8);
  optim::ReduceLROnPlateauScheduler s(*f.opt, optim::ReduceLROnPlateauScheduler::min, 0.5, 2, 1e-4,
                                      optim::ReduceLROnPlateauScheduler::rel, 1, {0.0, 0.3});
  const std::vector<double> expected0 = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025};
  const std::vector<double> expected1 = {0.8, 0.8, 0.8, 0.4, 0.4, 0.4, 0.4, 0.3};  // min_lr 0.3
  for (std::size_t e = 0; e < expected0.size(); ++e) {
    s.step(1.0);
    EXPECT_EQ(f.lr(0), expected0[e]) << "epoch " << e + 1;
    EXPECT_EQ(f.lr(1), expected1[e]) << "epoch " << e + 1;
    EXPECT_EQ(s.get_last_lrs()[1], f.lr(1));
  }
  EXPECT_EQ(s.last_epoch(), 8);

  // Mode max, absolute threshold: an increase by less than the threshold is not an improvement.
  TwoGroups g(1.0, 1.0);
  optim::ReduceLROnPlateauScheduler m(*g.opt, optim::ReduceLROnPlateauScheduler::max, 0.1, 0, 0.5,
                                      optim::ReduceLROnPlateauScheduler::abs);
  m.step(1.0);  // best 1
  EXPECT_EQ(g.lr(0), 1.0);
  m.step(1.6);  // better by more than 0.5
  EXPECT_EQ(g.lr(0), 1.0);
  EXPECT_EQ(m.best(), 1.6);
  m.step(2.0);  // not better by 0.5: patience 0 reduces at once
  EXPECT_NEAR(g.lr(0), 0.1, 1e-16);
  EXPECT_EQ(m.best(), 1.6);

  // A reduction smaller than eps is skipped.
  TwoGroups h(1e-9, 1e-9);
  optim::ReduceLROnPlateauScheduler e(*h.opt, optim::ReduceLROnPlateauScheduler::min, 0.5, 0);
  e.step(1.0);
  e.step(1.0);
  EXPECT_EQ(h.lr(0), 1e-9);
}

TEST(Schedulers, BadArgumentsOfTheNewSchedulers) {
  TwoGroups f(0.1, 0.2, 0.9);
  EXPECT_ERROR(ValueError, optim::OneCycleLR(*f.opt, 1.0, 0), "OneCycleLR", "total_steps");
  EXPECT_ERROR(ValueError, optim::OneCycleLR(*f.opt, 1.0, 10, 1.5), "OneCycleLR", "pct_start", "1.5");
  EXPECT_ERROR(ValueError, optim::OneCycleLR(*f.opt, 1.0, 10, -0.1), "OneCycleLR", "pct_start");
  EXPECT_ERROR(ValueError, optim::OneCycleLR(*f.opt, 1.0, 10, 0.3, "exp"), "OneCycleLR", "anneal_strategy", "exp");
  EXPECT_ERROR(ValueError, optim::OneCycleLR(*f.opt, std::vector<double>{1.0, 2.0, 3.0}, 10), "OneCycleLR", "max_lr",
               "3");
  EXPECT_ERROR(ValueError, optim::OneCycleLR(*f.opt, -1.0, 10), "OneCycleLR", "max_lr");
  Tensor p = testing::random_tensor({2}, kFloat64, true);
  optim::Adadelta ada(std::vector<Tensor>{p});
  EXPECT_ERROR(ValueError, optim::OneCycleLR(ada, 1.0, 10), "OneCycleLR", "momentum");
  optim::OneCycleLR fine(ada, 1.0, 10, 0.3, "cos", /*cycle_momentum=*/false);
  EXPECT_NEAR(ada.lr(), 1.0 / 25.0, 1e-15);
  using R = optim::ReduceLROnPlateauScheduler;
  EXPECT_ERROR(ValueError, R(*f.opt, R::min, 1.0), "ReduceLROnPlateau", "factor", "1");
  EXPECT_ERROR(ValueError, R(*f.opt, R::min, 0.1, -1), "ReduceLROnPlateau", "patience");
  EXPECT_ERROR(ValueError, R(*f.opt, R::min, 0.1, 10, -1e-4), "ReduceLROnPlateau", "threshold");
  EXPECT_ERROR(ValueError, R(*f.opt, R::min, 0.1, 10, 1e-4, R::rel, -1), "ReduceLROnPlateau", "cooldown");
  EXPECT_ERROR(ValueError, R(*f.opt, R::min, 0.1, 10, 1e-4, R::rel, 0, {0.1, 0.2, 0.3}), "ReduceLROnPlateau",
               "min_lr");
  auto s1 = std::make_shared<optim::StepLR>(*f.opt, 2);
  auto s2 = std::make_shared<optim::StepLR>(*f.opt, 3);
  EXPECT_ERROR(ValueError, optim::SequentialLR(*f.opt, {s1, s2}, {}), "SequentialLR", "milestones");
}

// ---- PyTorch golden values ---------------------------------------------------------------------------------

#define MINIDL_REQUIRE_SCHEDULERS_GOLDEN(g) \
  MINIDL_REQUIRE_GOLDEN_FILE(g, "schedulers_golden.json", "gen_schedulers_golden.py")

TEST(SchedulersGolden, MatchPyTorch) {
  const nlohmann::json golden = minidl::testing::read_golden("schedulers_golden.json");
  MINIDL_REQUIRE_SCHEDULERS_GOLDEN(golden);
  ASSERT_FALSE(golden.at("cases").empty());
  for (const auto& c : golden.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::vector<double> lrs0 = c.at("base_lrs");
    const std::string optimizer = c.at("optimizer");
    const double momentum = c.value("momentum", 0.0);
    std::vector<OptimizerParamGroup> groups;
    std::vector<Tensor> params;
    for (const double lr : lrs0) {
      params.push_back(testing::random_tensor({2}, kFloat64, true));
      if (optimizer == "SGD") {
        groups.emplace_back(std::vector<Tensor>{params.back()},
                            std::make_unique<optim::SGDOptions>(optim::SGDOptions(lr).momentum(momentum)));
      } else {
        groups.emplace_back(std::vector<Tensor>{params.back()},
                            std::make_unique<optim::AdamOptions>(optim::AdamOptions(lr).betas({0.9, 0.999})));
      }
    }
    std::unique_ptr<optim::Optimizer> opt;
    if (optimizer == "SGD") {
      opt = std::make_unique<optim::SGD>(groups, optim::SGDOptions(lrs0[0]));
    } else {
      opt = std::make_unique<optim::Adam>(groups, optim::AdamOptions(lrs0[0]));
    }
    const nlohmann::json& spec = c.at("spec");
    const std::string type = spec.at("type");
    const std::vector<std::vector<double>> expected = c.at("lrs");  // [epoch][group]
    auto check = [&](std::size_t e) {
      for (std::size_t g = 0; g < lrs0.size(); ++g) {
        const double lr = opt->param_groups()[g].options().get_lr();
        EXPECT_NEAR(lr, expected[e][g], 1e-12 * std::max(1.0, std::fabs(expected[e][g]))) << "epoch " << e;
      }
      if (c.contains("momenta")) {
        for (std::size_t g = 0; g < lrs0.size(); ++g) {
          const optim::OptimizerOptions& o = opt->param_groups()[g].options();
          const double m = optimizer == "SGD" ? static_cast<const optim::SGDOptions&>(o).momentum()
                                              : std::get<0>(static_cast<const optim::AdamOptions&>(o).betas());
          EXPECT_NEAR(m, c.at("momenta")[e][g].get<double>(), 1e-12) << "momentum, epoch " << e;
        }
      }
    };
    if (type == "ReduceLROnPlateau") {
      using R = optim::ReduceLROnPlateauScheduler;
      R s(*opt, spec.at("mode") == "min" ? R::min : R::max, spec.at("factor"), spec.at("patience"),
          spec.at("threshold"), spec.at("threshold_mode") == "rel" ? R::rel : R::abs, spec.at("cooldown"),
          spec.at("min_lr").get<std::vector<double>>(), spec.at("eps"));
      const std::vector<double> metrics = c.at("metrics");
      for (std::size_t e = 0; e < metrics.size(); ++e) {
        s.step(metrics[e]);
        check(e);
      }
      continue;
    }
    std::shared_ptr<optim::LRScheduler> s;
    if (type == "OneCycleLR") {
      s = std::make_shared<optim::OneCycleLR>(
          *opt, spec.at("max_lr").get<std::vector<double>>(), spec.at("total_steps"), spec.at("pct_start"),
          spec.at("anneal_strategy"), spec.at("cycle_momentum"), spec.at("base_momentum"), spec.at("max_momentum"),
          spec.at("div_factor"), spec.at("final_div_factor"), spec.at("three_phase"));
    } else if (type == "LinearLR") {
      s = std::make_shared<optim::LinearLR>(*opt, spec.at("start_factor"), spec.at("end_factor"),
                                            spec.at("total_iters"));
    } else if (type == "SequentialLR") {
      const auto& w = spec.at("warmup");
      auto warmup = std::make_shared<optim::LinearLR>(*opt, w.at("start_factor"), w.at("end_factor"),
                                                      w.at("total_iters"));
      const auto& d = spec.at("decay");
      auto decay = std::make_shared<optim::CosineAnnealingLR>(*opt, d.at("T_max"), d.at("eta_min"));
      s = std::make_shared<optim::SequentialLR>(*opt, std::vector<std::shared_ptr<optim::LRScheduler>>{warmup, decay},
                                                spec.at("milestones").get<std::vector<std::int64_t>>());
    } else {
      FAIL() << "unknown scheduler " << type;
    }
    for (std::size_t e = 0; e < expected.size(); ++e) {
      if (e > 0) s->step();
      check(e);
    }
  }
}

}  // namespace
}  // namespace minidl
