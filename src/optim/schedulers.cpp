// Learning-rate schedulers: closed forms of the epoch, PyTorch's formulas, applied to every parameter group.
#include "minidl/optim/schedulers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "minidl/optim/adam.h"
#include "minidl/optim/adamw.h"
#include "minidl/optim/sgd.h"
#include "optim/option_checks.h"

namespace minidl {
namespace optim {
namespace {

const double kPi = std::acos(-1.0);

std::vector<double> first_base_lrs(const std::vector<std::shared_ptr<LRScheduler>>& schedulers) {
  MINIDL_CHECK(!schedulers.empty(), ValueError, "SequentialLR: expected at least one scheduler");
  for (std::size_t k = 0; k < schedulers.size(); ++k) {
    MINIDL_CHECK(schedulers[k] != nullptr, ValueError, "SequentialLR: scheduler ", k, " is null");
  }
  return schedulers[0]->base_lrs();
}

std::vector<double> group_lrs(const Optimizer& optimizer) {
  std::vector<double> lrs;
  for (const OptimizerParamGroup& g : optimizer.param_groups()) lrs.push_back(g.options().get_lr());
  return lrs;
}

/// Key `name` of group g in a scheduler's state_dict: the first group's has no suffix.
std::string group_key(const char* name, std::size_t g) {
  return g == 0 ? std::string(name) : std::string(name) + "." + std::to_string(g);
}

/// One value per group from `values`: one for all, or one each.
std::vector<double> per_group(const char* owner, const char* option, const std::vector<double>& values,
                              std::size_t groups) {
  MINIDL_CHECK(values.size() == 1 || values.size() == groups, ValueError, owner, ": expected one ", option,
               " or one per parameter group (", groups, "), found ", values.size());
  return values.size() == 1 ? std::vector<double>(groups, values[0]) : values;
}

double get_entry(const std::map<std::string, double>& state, const std::string& key) {
  const auto it = state.find(key);
  MINIDL_CHECK(it != state.end(), ValueError, "scheduler load_state_dict: missing key '", key, "'");
  return it->second;
}

}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer) : LRScheduler(optimizer, group_lrs(optimizer)) {}

LRScheduler::LRScheduler(Optimizer& optimizer, std::vector<double> base_lrs)
    : optimizer_(optimizer), base_lrs_(std::move(base_lrs)), last_lrs_(base_lrs_) {}

LRScheduler::~LRScheduler() = default;

void LRScheduler::set_lrs(const std::vector<double>& lrs) {
  for (std::size_t g = 0; g < lrs.size(); ++g) {
    check_non_negative("scheduler", "learning rate", lrs[g]);
  }
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer_.param_groups()[g].options().set_lr(lrs[g]);
}

void LRScheduler::step() {
  MINIDL_CHECK(optimizer_.param_groups().size() == base_lrs_.size(), ValueError, "scheduler: the optimizer has ",
               optimizer_.param_groups().size(), " parameter groups, the scheduler was built for ", base_lrs_.size());
  std::vector<double> lrs(base_lrs_.size());
  for (std::size_t g = 0; g < lrs.size(); ++g) lrs[g] = lr_at(g, base_lrs_[g], last_epoch_ + 1);
  set_lrs(lrs);  // validates the rates before the counters move
  ++last_epoch_;
  last_lrs_ = lrs;
  set_options_at(last_epoch_);
}

std::map<std::string, double> LRScheduler::state_dict() const {
  std::map<std::string, double> out{{"last_epoch", static_cast<double>(last_epoch_)}};
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) {
    out[group_key("base_lr", g)] = base_lrs_[g];
    out[group_key("last_lr", g)] = last_lrs_[g];
  }
  return out;
}

void LRScheduler::load_state_dict(const std::map<std::string, double>& state) {
  const std::size_t groups = base_lrs_.size();
  MINIDL_CHECK(optimizer_.param_groups().size() == groups, ValueError, "scheduler load_state_dict: the optimizer has ",
               optimizer_.param_groups().size(), " parameter groups, the scheduler was built for ", groups);
  for (const auto& entry : state) {
    bool known = entry.first == "last_epoch";
    for (std::size_t g = 0; g < groups; ++g) {
      known = known || entry.first == group_key("base_lr", g) || entry.first == group_key("last_lr", g);
    }
    MINIDL_CHECK(known, ValueError, "scheduler load_state_dict: unexpected key '", entry.first,
                 "' (expected last_epoch, base_lr, last_lr and base_lr.<group>, last_lr.<group> for ", groups,
                 " groups)");
  }
  const double epoch = get_entry(state, "last_epoch");
  check_option(epoch >= 0.0 && epoch <= 9007199254740992.0 && epoch == std::floor(epoch), "scheduler load_state_dict",
               "last_epoch", epoch, "a whole number >= 0");
  std::vector<double> base_lrs(groups), last_lrs(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    base_lrs[g] = get_entry(state, group_key("base_lr", g));
    last_lrs[g] = get_entry(state, group_key("last_lr", g));
    check_non_negative("scheduler load_state_dict", "base_lr", base_lrs[g]);
    check_non_negative("scheduler load_state_dict", "last_lr", last_lrs[g]);
  }
  set_lrs(last_lrs);
  last_epoch_ = static_cast<std::int64_t>(epoch);
  base_lrs_ = base_lrs;
  last_lrs_ = last_lrs;
  set_options_at(last_epoch_);
}

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  check_option(step_size > 0, "StepLR", "step_size", static_cast<double>(step_size), "a value > 0");
  check_non_negative("StepLR", "gamma", gamma);
  step();
}

double StepLR::lr_at(std::size_t /*group*/, double base_lr, std::int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  check_option(T_max > 0, "CosineAnnealingLR", "T_max", static_cast<double>(T_max), "a value > 0");
  check_non_negative("CosineAnnealingLR", "eta_min", eta_min);
  step();
}

double CosineAnnealingLR::lr_at(std::size_t /*group*/, double base_lr, std::int64_t epoch) const {
  return eta_min_ + (base_lr - eta_min_) *
                        (1.0 + std::cos(kPi * static_cast<double>(epoch) / static_cast<double>(T_max_))) / 2.0;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  check_option(start_factor > 0.0 && start_factor <= 1.0, "LinearLR", "start_factor", start_factor,
               "a value in (0, 1]");
  check_option(end_factor >= 0.0 && end_factor <= 1.0, "LinearLR", "end_factor", end_factor, "a value in [0, 1]");
  check_option(total_iters > 0, "LinearLR", "total_iters", static_cast<double>(total_iters), "a value > 0");
  step();
}

double LinearLR::lr_at(std::size_t /*group*/, double base_lr, std::int64_t epoch) const {
  const double progress = static_cast<double>(std::min(epoch, total_iters_)) / static_cast<double>(total_iters_);
  return base_lr * (start_factor_ + (end_factor_ - start_factor_) * progress);
}

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<std::int64_t> milestones)
    : LRScheduler(optimizer, first_base_lrs(schedulers)),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  for (std::size_t k = 0; k < schedulers_.size(); ++k) {
    MINIDL_CHECK(&schedulers_[k]->optimizer() == &optimizer, ValueError, "SequentialLR: scheduler ", k,
                 " drives a different optimizer than the one given");
  }
  MINIDL_CHECK(milestones_.size() + 1 == schedulers_.size(), ValueError, "SequentialLR: expected ",
               schedulers_.size() - 1, " milestones for ", schedulers_.size(), " schedulers, found ",
               milestones_.size());
  for (std::size_t k = 0; k < milestones_.size(); ++k) {
    MINIDL_CHECK(milestones_[k] > (k == 0 ? 0 : milestones_[k - 1]), ValueError, "SequentialLR: milestones must be "
                 "positive and strictly increasing; milestone ", k, " is ", milestones_[k]);
  }
  step();
}

double SequentialLR::lr_at(std::size_t group, double base_lr, std::int64_t epoch) const {
  const std::size_t k = static_cast<std::size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin());
  return schedulers_[k]->lr_at(group, base_lr, k == 0 ? epoch : epoch - milestones_[k - 1]);
}

// ---- OneCycleLR ----------------------------------------------------------------------------------------------

namespace {

/// The options whose first momentum OneCycleLR cycles: SGD's momentum, Adam's and AdamW's beta1.
void set_momentum(OptimizerOptions& options, double momentum) {
  if (auto* sgd = dynamic_cast<SGDOptions*>(&options)) {
    sgd->momentum(momentum);
  } else if (auto* adam = dynamic_cast<AdamOptions*>(&options)) {
    adam->betas({momentum, std::get<1>(adam->betas())});
  } else if (auto* adamw = dynamic_cast<AdamWOptions*>(&options)) {
    adamw->betas({momentum, std::get<1>(adamw->betas())});
  }
}

bool has_momentum(const OptimizerOptions& options) {
  return dynamic_cast<const SGDOptions*>(&options) != nullptr ||
         dynamic_cast<const AdamOptions*>(&options) != nullptr ||
         dynamic_cast<const AdamWOptions*>(&options) != nullptr;
}

/// Checks OneCycleLR's arguments and returns each group's initial learning rate (its base learning rate).
std::vector<double> one_cycle_initial_lrs(Optimizer& optimizer, const std::vector<double>& max_lr,
                                          std::int64_t total_steps, double pct_start, const std::string& strategy,
                                          bool cycle_momentum, double div_factor, double final_div_factor) {
  const char* owner = "OneCycleLR";
  check_option(total_steps > 0, owner, "total_steps", static_cast<double>(total_steps), "a value > 0");
  check_option(pct_start >= 0.0 && pct_start <= 1.0, owner, "pct_start", pct_start, "a value in [0, 1]");
  MINIDL_CHECK(strategy == "cos" || strategy == "linear", ValueError, "OneCycleLR: anneal_strategy must be 'cos' or "
               "'linear', found '", strategy, "'");
  check_option(std::isfinite(div_factor) && div_factor > 0.0, owner, "div_factor", div_factor, "a finite value > 0");
  check_option(std::isfinite(final_div_factor) && final_div_factor > 0.0, owner, "final_div_factor", final_div_factor,
               "a finite value > 0");
  MINIDL_CHECK(!cycle_momentum || has_momentum(optimizer.defaults()), ValueError, "OneCycleLR: the optimizer must "
               "have momentum (SGD) or betas (Adam, AdamW) with cycle_momentum enabled");
  std::vector<double> lrs = per_group(owner, "max_lr", max_lr, optimizer.param_groups().size());
  for (double& lr : lrs) {
    check_non_negative(owner, "max_lr", lr);
    lr = lr / div_factor;
  }
  return lrs;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lr, std::int64_t total_steps, double pct_start,
                       const std::string& anneal_strategy, bool cycle_momentum, double base_momentum,
                       double max_momentum, double div_factor, double final_div_factor, bool three_phase)
    : LRScheduler(optimizer, one_cycle_initial_lrs(optimizer, max_lr, total_steps, pct_start, anneal_strategy,
                                                   cycle_momentum, div_factor, final_div_factor)),
      total_steps_(total_steps),
      cosine_(anneal_strategy == "cos"),
      cycle_momentum_(cycle_momentum) {
  if (cycle_momentum) {
    check_non_negative("OneCycleLR", "base_momentum", base_momentum);
    check_non_negative("OneCycleLR", "max_momentum", max_momentum);
  }
  const std::vector<double> max_lrs = per_group("OneCycleLR", "max_lr", max_lr, base_lrs().size());
  for (std::size_t g = 0; g < max_lrs.size(); ++g) {
    lrs_.push_back({base_lrs()[g], max_lrs[g], base_lrs()[g] / final_div_factor});
  }
  const double steps = static_cast<double>(total_steps);
  if (three_phase) {
    phases_ = {{pct_start * steps - 1.0, 0, 1, max_momentum, base_momentum},
               {2.0 * pct_start * steps - 2.0, 1, 0, base_momentum, max_momentum},
               {steps - 1.0, 0, 2, max_momentum, max_momentum}};
  } else {
    phases_ = {{pct_start * steps - 1.0, 0, 1, max_momentum, base_momentum},
               {steps - 1.0, 1, 2, base_momentum, max_momentum}};
  }
  step();
}

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, std::int64_t total_steps, double pct_start,
                       const std::string& anneal_strategy, bool cycle_momentum, double base_momentum,
                       double max_momentum, double div_factor, double final_div_factor, bool three_phase)
    : OneCycleLR(optimizer, std::vector<double>{max_lr}, total_steps, pct_start, anneal_strategy, cycle_momentum,
                 base_momentum, max_momentum, div_factor, final_div_factor, three_phase) {}

std::pair<const OneCycleLR::Phase*, double> OneCycleLR::phase_at(std::int64_t epoch) const {
  MINIDL_CHECK(epoch <= total_steps_, ValueError, "OneCycleLR: tried to step ", epoch, " times; the specified number "
               "of total steps is ", total_steps_);
  const double step = static_cast<double>(epoch);
  double start = 0.0;
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    const Phase& phase = phases_[i];
    if (step <= phase.end_step || i + 1 == phases_.size()) {
      return {&phase, (step - start) / (phase.end_step - start)};
    }
    start = phase.end_step;
  }
  return {&phases_.back(), 1.0};  // not reached: the last phase takes every step
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (cosine_) return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1.0);
  return (end - start) * pct + start;
}

double OneCycleLR::lr_at(std::size_t group, double /*base_lr*/, std::int64_t epoch) const {
  const auto [phase, pct] = phase_at(epoch);
  const std::vector<double>& lrs = lrs_[group];
  // The step to epoch total_steps, past the last phase, extrapolates; a linear anneal can go below 0 there, which
  // PyTorch sets (no optimizer step uses it) and an optimizer here rejects: 0 instead.
  return std::max(0.0, anneal(lrs[static_cast<std::size_t>(phase->start_lr)],
                              lrs[static_cast<std::size_t>(phase->end_lr)], pct));
}

void OneCycleLR::set_options_at(std::int64_t epoch) {
  if (!cycle_momentum_) return;
  const auto [phase, pct] = phase_at(epoch);
  const double momentum = anneal(phase->start_momentum, phase->end_momentum, pct);
  for (OptimizerParamGroup& g : optimizer().param_groups()) set_momentum(g.options(), momentum);
}

// ---- ReduceLROnPlateau ---------------------------------------------------------------------------------------

ReduceLROnPlateauScheduler::ReduceLROnPlateauScheduler(Optimizer& optimizer, SchedulerMode mode, double factor,
                                                       std::int64_t patience, double threshold,
                                                       ThresholdMode threshold_mode, std::int64_t cooldown,
                                                       const std::vector<double>& min_lr, double eps)
    : optimizer_(optimizer),
      mode_(mode),
      factor_(factor),
      patience_(patience),
      threshold_(threshold),
      threshold_mode_(threshold_mode),
      cooldown_(cooldown),
      eps_(eps),
      last_lrs_(group_lrs(optimizer)) {
  const char* owner = "ReduceLROnPlateau";
  check_option(mode == min || mode == max, owner, "mode", static_cast<double>(mode), "min or max");
  check_option(threshold_mode == rel || threshold_mode == abs, owner, "threshold_mode",
               static_cast<double>(threshold_mode), "rel or abs");
  check_option(factor >= 0.0 && factor < 1.0, owner, "factor", factor, "a value in [0, 1)");
  check_option(patience >= 0, owner, "patience", static_cast<double>(patience), "a value >= 0");
  check_option(cooldown >= 0, owner, "cooldown", static_cast<double>(cooldown), "a value >= 0");
  check_non_negative(owner, "threshold", threshold);
  check_non_negative(owner, "eps", eps);
  min_lrs_ = min_lr.empty() ? std::vector<double>(last_lrs_.size(), 0.0)
                            : per_group(owner, "min_lr", min_lr, last_lrs_.size());
  for (const double m : min_lrs_) check_non_negative(owner, "min_lr", m);
  best_ = mode == min ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateauScheduler::is_better(double a) const {
  if (mode_ == min) return threshold_mode_ == rel ? a < best_ * (1.0 - threshold_) : a < best_ - threshold_;
  return threshold_mode_ == rel ? a > best_ * (threshold_ + 1.0) : a > best_ + threshold_;
}

void ReduceLROnPlateauScheduler::step(double metric) {
  MINIDL_CHECK(optimizer_.param_groups().size() == min_lrs_.size(), ValueError, "ReduceLROnPlateau: the optimizer has ",
               optimizer_.param_groups().size(), " parameter groups, the scheduler was built for ", min_lrs_.size());
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  std::vector<OptimizerParamGroup>& groups = optimizer_.param_groups();
  if (num_bad_epochs_ > patience_) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const double old_lr = groups[g].options().get_lr();
      const double new_lr = std::max(old_lr * factor_, min_lrs_[g]);
      if (old_lr - new_lr > eps_) groups[g].options().set_lr(new_lr);
    }
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
  }
  for (std::size_t g = 0; g < groups.size(); ++g) last_lrs_[g] = groups[g].options().get_lr();
}

}  // namespace optim
}  // namespace minidl
