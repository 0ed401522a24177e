// Learning-rate schedulers: closed forms of the epoch, PyTorch's formulas.
#include "minidl/optim/schedulers.h"

#include <algorithm>
#include <cmath>

#include "optim/option_checks.h"

namespace minidl {
namespace optim {
namespace {

const double kPi = std::acos(-1.0);

double first_base_lr(const std::vector<std::shared_ptr<LRScheduler>>& schedulers) {
  MINIDL_CHECK(!schedulers.empty(), ValueError, "SequentialLR: expected at least one scheduler");
  for (std::size_t k = 0; k < schedulers.size(); ++k) {
    MINIDL_CHECK(schedulers[k] != nullptr, ValueError, "SequentialLR: scheduler ", k, " is null");
  }
  return schedulers[0]->base_lr();
}

double get_entry(const std::map<std::string, double>& state, const char* key) {
  const auto it = state.find(key);
  MINIDL_CHECK(it != state.end(), ValueError, "scheduler load_state_dict: missing key '", key, "'");
  return it->second;
}

}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer) : LRScheduler(optimizer, optimizer.lr()) {}

LRScheduler::LRScheduler(Optimizer& optimizer, double base_lr)
    : optimizer_(optimizer), base_lr_(base_lr), last_lr_(base_lr) {}

LRScheduler::~LRScheduler() = default;

void LRScheduler::step() {
  const double lr = lr_at(base_lr_, last_epoch_ + 1);
  optimizer_.set_lr(lr);  // validates lr before the counters move
  ++last_epoch_;
  last_lr_ = lr;
}

std::map<std::string, double> LRScheduler::state_dict() const {
  return {{"last_epoch", static_cast<double>(last_epoch_)}, {"base_lr", base_lr_}, {"last_lr", last_lr_}};
}

void LRScheduler::load_state_dict(const std::map<std::string, double>& state) {
  for (const auto& entry : state) {
    MINIDL_CHECK(entry.first == "last_epoch" || entry.first == "base_lr" || entry.first == "last_lr", ValueError,
                 "scheduler load_state_dict: unexpected key '", entry.first,
                 "' (expected last_epoch, base_lr, last_lr)");
  }
  const double epoch = get_entry(state, "last_epoch");
  const double base_lr = get_entry(state, "base_lr");
  const double last_lr = get_entry(state, "last_lr");
  check_option(epoch >= 0.0 && epoch <= 9007199254740992.0 && epoch == std::floor(epoch), "scheduler load_state_dict",
               "last_epoch", epoch, "a whole number >= 0");
  check_non_negative("scheduler load_state_dict", "base_lr", base_lr);
  check_non_negative("scheduler load_state_dict", "last_lr", last_lr);
  optimizer_.set_lr(last_lr);
  last_epoch_ = static_cast<std::int64_t>(epoch);
  base_lr_ = base_lr;
  last_lr_ = last_lr;
}

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  check_option(step_size > 0, "StepLR", "step_size", static_cast<double>(step_size), "a value > 0");
  check_non_negative("StepLR", "gamma", gamma);
  step();
}

double StepLR::lr_at(double base_lr, std::int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  check_option(T_max > 0, "CosineAnnealingLR", "T_max", static_cast<double>(T_max), "a value > 0");
  check_non_negative("CosineAnnealingLR", "eta_min", eta_min);
  step();
}

double CosineAnnealingLR::lr_at(double base_lr, std::int64_t epoch) const {
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

double LinearLR::lr_at(double base_lr, std::int64_t epoch) const {
  const double progress = static_cast<double>(std::min(epoch, total_iters_)) / static_cast<double>(total_iters_);
  return base_lr * (start_factor_ + (end_factor_ - start_factor_) * progress);
}

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<std::int64_t> milestones)
    : LRScheduler(optimizer, first_base_lr(schedulers)),
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

double SequentialLR::lr_at(double base_lr, std::int64_t epoch) const {
  const std::size_t k = static_cast<std::size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin());
  return schedulers_[k]->lr_at(base_lr, k == 0 ? epoch : epoch - milestones_[k - 1]);
}

}  // namespace optim
}  // namespace minidl
