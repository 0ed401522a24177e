#pragma once
// Learning-rate schedulers (torch.optim.lr_scheduler names and argument order; ReduceLROnPlateauScheduler as
// LibTorch's). Each sets the learning rate of every parameter group of the optimizer from a closed form of its
// epoch counter and the group's base learning rate (the group's lr when the scheduler is built), PyTorch's
// formulas in closed form, so the sequences match PyTorch's to rounding. Like PyTorch, construction performs
// the initial step: last_epoch becomes 0 and the lrs are set to their values at epoch 0; call step() once per
// epoch (or iteration) after optimizer.step(). The rates reach the optimizer through its groups' options, so
// they also reach a step captured in a CUDA graph.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "minidl/optim/optimizer.h"

namespace minidl {
namespace optim {

class SequentialLR;

class LRScheduler {
 public:
  /// Takes each group's lr as its base learning rate. Keeps a reference: the optimizer must outlive it.
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler();
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances the epoch counter by one and sets every group's learning rate (ValueError, changing nothing, when
  /// the optimizer's number of groups changed or a rate would be invalid).
  void step();
  /// The learning rate this scheduler set last in the first group, and in every group.
  double get_last_lr() const { return last_lrs_[0]; }
  const std::vector<double>& get_last_lrs() const { return last_lrs_; }
  std::int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lrs_[0]; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return optimizer_; }

  /// "last_epoch", "base_lr" and "last_lr" (the first group's), "base_lr.g" and "last_lr.g" for each further
  /// group g.
  std::map<std::string, double> state_dict() const;
  /// Restores a state_dict() (ValueError on missing, unknown or invalid entries, changing nothing) and sets the
  /// groups' learning rates to the restored last_lr.
  void load_state_dict(const std::map<std::string, double>& state);

 protected:
  LRScheduler(Optimizer& optimizer, std::vector<double> base_lrs);
  /// The learning rate of group `group` at `epoch` (>= 0) for its base learning rate `base_lr`.
  virtual double lr_at(std::size_t group, double base_lr, std::int64_t epoch) const = 0;
  /// Sets the other options the scheduler drives at `epoch` (OneCycleLR's momentum); called after the rates.
  virtual void set_options_at(std::int64_t /*epoch*/) {}

 private:
  friend class SequentialLR;  // evaluates its children's lr_at
  void set_lrs(const std::vector<double>& lrs);
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::int64_t last_epoch_ = -1;
  std::vector<double> last_lrs_;
};

/// lr = base_lr * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(std::size_t group, double base_lr, std::int64_t epoch) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (PyTorch's closed form).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0.0);

 protected:
  double lr_at(std::size_t group, double base_lr, std::int64_t epoch) const override;

 private:
  std::int64_t T_max_;
  double eta_min_;
};

/// lr = base_lr * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters):
/// a linear warm-up from start_factor * base_lr to end_factor * base_lr.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0,
           std::int64_t total_iters = 5);

 protected:
  double lr_at(std::size_t group, double base_lr, std::int64_t epoch) const override;

 private:
  double start_factor_, end_factor_;
  std::int64_t total_iters_;
};

/// Follows schedulers[k] from epoch milestones[k-1] on, restarting its epoch count at 0 there, as PyTorch's
/// SequentialLR: e.g. {LinearLR warm-up, CosineAnnealingLR} with milestones {warm-up length}. The children
/// serve as formulas, evaluated with the first child's base learning rates; their own epoch counters are not
/// advanced. All of them must drive `optimizer`; milestones must increase strictly and number one fewer.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<std::int64_t> milestones);

 protected:
  double lr_at(std::size_t group, double base_lr, std::int64_t epoch) const override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

/// PyTorch's OneCycleLR (the 1cycle policy, Smith & Topin): the lr rises from initial_lr = max_lr / div_factor
/// to max_lr over the first pct_start * total_steps steps, then falls to min_lr = initial_lr / final_div_factor
/// at step total_steps - 1 (three_phase: rises, falls back to initial_lr symmetrically, then anneals to
/// min_lr), annealed by cosine ("cos") or linearly ("linear"). With cycle_momentum the momentum (SGD's
/// momentum, Adam's and AdamW's beta1) moves inversely between max_momentum and base_momentum; other optimizers
/// are then a ValueError, as PyTorch. max_lr: one value, or one per group. Call step() once per batch: the
/// step to epoch total_steps extrapolates the last phase (a negative rate there, PyTorch's with linear
/// annealing, is 0 here); stepping further throws ValueError, as PyTorch.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lr, std::int64_t total_steps, double pct_start = 0.3,
             const std::string& anneal_strategy = "cos", bool cycle_momentum = true, double base_momentum = 0.85,
             double max_momentum = 0.95, double div_factor = 25.0, double final_div_factor = 1e4,
             bool three_phase = false);
  OneCycleLR(Optimizer& optimizer, double max_lr, std::int64_t total_steps, double pct_start = 0.3,
             const std::string& anneal_strategy = "cos", bool cycle_momentum = true, double base_momentum = 0.85,
             double max_momentum = 0.95, double div_factor = 25.0, double final_div_factor = 1e4,
             bool three_phase = false);

  std::int64_t total_steps() const { return total_steps_; }

 protected:
  double lr_at(std::size_t group, double base_lr, std::int64_t epoch) const override;
  void set_options_at(std::int64_t epoch) override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;  // 0: initial_lr, 1: max_lr, 2: min_lr
    double start_momentum, end_momentum;
  };
  /// The phase of `epoch` and the fraction of it done (PyTorch's pct); ValueError past total_steps.
  std::pair<const Phase*, double> phase_at(std::int64_t epoch) const;
  double anneal(double start, double end, double pct) const;

  std::int64_t total_steps_;
  bool cosine_, cycle_momentum_;
  std::vector<std::vector<double>> lrs_;  // lrs_[group]: initial_lr, max_lr, min_lr
  std::vector<Phase> phases_;
};

/// LibTorch's ReduceLROnPlateauScheduler with PyTorch's ReduceLROnPlateau semantics: step(metric) counts the
/// epochs without improvement of the metric (mode min: a decrease, max: an increase, by more than threshold,
/// relative (rel) or absolute (abs)); after more than `patience` of them, every group's lr becomes
/// max(lr * factor, min_lr) (unless that changes it by eps or less), and `cooldown` epochs follow in which bad
/// epochs are not counted. min_lr: empty (0), one value, or one per group.
class ReduceLROnPlateauScheduler {
 public:
  enum SchedulerMode { min, max };
  enum ThresholdMode { rel, abs };

  ReduceLROnPlateauScheduler(Optimizer& optimizer, SchedulerMode mode = min, double factor = 0.1,
                             std::int64_t patience = 10, double threshold = 1e-4, ThresholdMode threshold_mode = rel,
                             std::int64_t cooldown = 0, const std::vector<double>& min_lr = {}, double eps = 1e-8);

  void step(double metric);
  const std::vector<double>& get_last_lrs() const { return last_lrs_; }
  double get_last_lr() const { return last_lrs_[0]; }
  std::int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  std::int64_t num_bad_epochs() const { return num_bad_epochs_; }
  std::int64_t cooldown_counter() const { return cooldown_counter_; }

 private:
  bool is_better(double a) const;

  Optimizer& optimizer_;
  SchedulerMode mode_;
  double factor_;
  std::int64_t patience_;
  double threshold_;
  ThresholdMode threshold_mode_;
  std::int64_t cooldown_;
  std::vector<double> min_lrs_;
  double eps_;
  double best_;
  std::int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
  std::vector<double> last_lrs_;
};

using ReduceLROnPlateau = ReduceLROnPlateauScheduler;

}  // namespace optim
}  // namespace minidl
