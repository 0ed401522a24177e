#pragma once
// Learning-rate schedulers (torch.optim.lr_scheduler names and argument order). Each sets the optimizer's
// learning rate from a closed form of its epoch counter and the base learning rate (the optimizer's lr when
// the scheduler is built). Like PyTorch, construction performs the initial step: last_epoch becomes 0 and the
// lr is set to its value at epoch 0; call step() once per epoch (or iteration) after optimizer.step().
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "minidl/optim/optimizer.h"

namespace minidl {
namespace optim {

class SequentialLR;

class LRScheduler {
 public:
  /// Takes optimizer.lr() as the base learning rate. Keeps a reference: the optimizer must outlive it.
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler();
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances the epoch counter by one and sets the optimizer's learning rate.
  void step();
  /// The learning rate this scheduler set last.
  double get_last_lr() const { return last_lr_; }
  std::int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lr_; }
  Optimizer& optimizer() const { return optimizer_; }

  /// "last_epoch", "base_lr" and "last_lr".
  std::map<std::string, double> state_dict() const;
  /// Restores a state_dict() (ValueError on missing, unknown or invalid entries, changing nothing) and sets the
  /// optimizer's learning rate to the restored last_lr.
  void load_state_dict(const std::map<std::string, double>& state);

 protected:
  LRScheduler(Optimizer& optimizer, double base_lr);
  /// The learning rate at `epoch` (>= 0) for the base learning rate `base_lr`.
  virtual double lr_at(double base_lr, std::int64_t epoch) const = 0;

 private:
  friend class SequentialLR;  // evaluates its children's lr_at
  Optimizer& optimizer_;
  double base_lr_;
  std::int64_t last_epoch_ = -1;
  double last_lr_;
};

/// lr = base_lr * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(double base_lr, std::int64_t epoch) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (PyTorch's closed form).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0.0);

 protected:
  double lr_at(double base_lr, std::int64_t epoch) const override;

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
  double lr_at(double base_lr, std::int64_t epoch) const override;

 private:
  double start_factor_, end_factor_;
  std::int64_t total_iters_;
};

/// Follows schedulers[k] from epoch milestones[k-1] on, restarting its epoch count at 0 there, as PyTorch's
/// SequentialLR: e.g. {LinearLR warm-up, CosineAnnealingLR} with milestones {warm-up length}. The children
/// serve as formulas, evaluated with the first child's base learning rate; their own epoch counters are not
/// advanced. All of them must drive `optimizer`; milestones must increase strictly and number one fewer.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<std::int64_t> milestones);

 protected:
  double lr_at(double base_lr, std::int64_t epoch) const override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

}  // namespace optim
}  // namespace minidl
