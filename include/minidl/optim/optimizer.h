#pragma once
// Base class of the optimizers, with LibTorch's parameter groups (torch::optim names and argument order).
//
// The parameters come in groups (OptimizerParamGroup), each with its own options (lr, weight decay, betas, ...);
// a group given without options takes a copy of the optimizer's defaults. An optimizer owns, on its
// parameters' device, one state buffer per parameter for each state its groups need, a float64 step counter
// per parameter and a float64 block per group holding that group's numeric options. On CUDA, step() is a fixed
// sequence of kernel launches on gpu::stream() (one update launch per group and dtype, for up to a few dozen
// parameters each) that reads the options and step counts from those tensors: no allocation, no host copy, no
// synchronisation, so a whole training step can be captured in a CUDA graph: each replay advances the step
// counters, and an option changed between replays (set_lr(), a scheduler, param_groups()[i].options().set_lr(x),
// any option's setter) reaches the captured update, since every setter of an optimizer's options uploads the
// group's values at once. The set of parameters that have a gradient is the one at capture time. Step counts
// are per parameter, as PyTorch's state["step"]: a parameter first updated late starts its own bias correction
// (Adam) or momentum buffer (SGD) then.
#include <array>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "minidl/tensor.h"

/// Declares an option `name` of type T with a chainable setter and a getter, LibTorch style; follow it with
/// `= default_value;` to initialise it: MINIDL_OPTIM_ARG(double, momentum) = 0;. The setter of options that
/// belong to an optimizer's group validates them and uploads the group's values (restoring the old value and
/// throwing ValueError when the new one is invalid).
#define MINIDL_OPTIM_ARG(T, name)             \
 public:                                      \
  auto& name(const T& value) {                \
    const T old = name##_;                    \
    name##_ = value;                          \
    try {                                     \
      this->changed();                        \
    } catch (...) {                           \
      name##_ = old;                          \
      throw;                                  \
    }                                         \
    return *this;                             \
  }                                           \
  const T& name() const { return name##_; }   \
                                              \
 private:                                     \
  T name##_

namespace minidl {
namespace kernels { struct OptimHyper; }

namespace optim {

class Optimizer;

/// LibTorch's OptimizerOptions: the options of one optimizer kind (SGDOptions, AdamOptions, ...), as the
/// defaults of an optimizer or the options of one parameter group. A copy is a detached value.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(const double lr) = 0;
  /// Throws ValueError naming the optimizer and the option when an option is out of PyTorch's range.
  virtual void validate() const = 0;

 protected:
  OptimizerOptions() = default;
  OptimizerOptions(const OptimizerOptions&) {}
  OptimizerOptions& operator=(const OptimizerOptions&) { return *this; }  // keeps its own group, if any
  /// Called by every setter: the options of an optimizer's group are validated and uploaded to its device.
  void changed();

 private:
  friend class Optimizer;
  /// The names of the state buffers the optimizer kind keeps, in the order its update rule receives them.
  virtual std::vector<std::string> state_names() const = 0;
  /// How many of state_names() (a prefix) this configuration needs.
  virtual std::size_t states_needed() const = 0;
  /// The update rule and its flags, and the numeric options in the kernels' layout (kernels::OptimValue).
  virtual void describe(kernels::OptimHyper& flags, double* values) const = 0;

  Optimizer* owner_ = nullptr;
  std::size_t group_ = 0;
};

/// Gives `Derived` (an options struct) its clone(), as LibTorch's OptimizerCloneableOptions.
template <class Derived>
class OptimizerCloneableOptions : public OptimizerOptions {
 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
};

/// Parameters with their own options (LibTorch's OptimizerParamGroup); without options, the optimizer's
/// defaults apply. Copies clone the options.
class OptimizerParamGroup {
 public:
  OptimizerParamGroup(std::vector<Tensor> params);  // NOLINT: implicit, as LibTorch
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options);
  OptimizerParamGroup(const OptimizerParamGroup& other);
  OptimizerParamGroup& operator=(const OptimizerParamGroup& other);
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) = default;

  bool has_options() const { return options_ != nullptr; }
  /// The group's options; of an optimizer's group, static_cast them to the optimizer's options type to reach
  /// every option (their setters take effect from the next step, also in a captured CUDA graph).
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options);
  /// The group's parameters (of an optimizer's group: read them, do not change the list).
  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

class Optimizer {
 public:
  /// Takes the parameter groups (leaf tensors of float32 or float64, all on one device, each listed once in all
  /// groups, at least one in all) and the default options (validated, as every group's options); throws
  /// ValueError / TypeError naming the offending parameter index (counted over all groups, in order).
  Optimizer(std::vector<OptimizerParamGroup> param_groups, std::unique_ptr<OptimizerOptions> defaults);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Updates every parameter that has a gradient (the others, and their state, are left alone, as PyTorch).
  virtual void step();
  /// The step amp::GradScaler takes (PyTorch's fused optimizers' grad_scale and found_inf attributes): as step(),
  /// but the gradients are read divided by `grad_scale` (a float32 one-element tensor on the parameters' device;
  /// undefined: read as they are), and when `found_inf` (the same kind of tensor) is nonzero when the step runs,
  /// nothing changes: no parameter, no state buffer, no step count. Decided on the device, no synchronisation:
  /// a captured step skips or applies each replay's update by that replay's found_inf.
  void scaled_step(const Tensor& grad_scale, const Tensor& found_inf);
  /// Drops the gradients (set_to_none), or zeroes them in place, keeping their memory (for CUDA graphs).
  void zero_grad(bool set_to_none = true);

  /// Adds a group (checked as the constructor's; options of another optimizer kind are a TypeError).
  void add_param_group(const OptimizerParamGroup& param_group);
  std::vector<OptimizerParamGroup>& param_groups() noexcept { return groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const noexcept { return groups_; }
  OptimizerOptions& defaults() noexcept { return *defaults_; }
  const OptimizerOptions& defaults() const noexcept { return *defaults_; }

  /// Every parameter, group after group.
  const std::vector<Tensor>& parameters() const { return params_; }
  Device device() const { return device_; }
  /// The learning rate of the first group.
  double lr() const;
  /// Sets the learning rate of every group from the next step on (a finite value >= 0, else ValueError).
  void set_lr(double lr);

  /// A snapshot (copies) of the state, PyTorch's names with the parameter's index as prefix: "lr" (the first
  /// group's), "param_groups.g.lr" for every further group g, and for each parameter i that has taken a step
  /// "i.step" (a float64 scalar) and its buffers, e.g. "i.exp_avg".
  virtual std::map<std::string, Tensor> state_dict() const;
  /// Restores a state_dict() of an optimizer of the same kind and configuration over parameters of the same
  /// shapes, copying into the existing buffers; parameters without an "i.step" start afresh. Unknown keys,
  /// wrong shapes, missing buffers or bad step counts throw ValueError and leave the state unchanged.
  virtual void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  friend class OptimizerOptions;
  /// Validates group g's options; uploads their values when they differ from the device's, and allocates the
  /// state buffers they need that do not exist yet.
  void sync_group(std::size_t g);
  /// Allocates state buffers 0..count-1 that are missing, for every parameter.
  void ensure_states(std::size_t count);
  /// step() and scaled_step(): the update of every parameter with a gradient, under GradScaler's pointers (null
  /// for a plain step).
  void run_step(const float* grad_scale, const float* found_inf);
  /// The group's numeric options as the kernels read them.
  using GroupValues = std::array<double, 8>;

  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<OptimizerParamGroup> groups_;
  std::vector<Tensor> params_;
  std::vector<std::size_t> group_of_;  // group_of_[i]: the group of parameter i
  Device device_;
  Tensor steps_;  // float64 on device_: the step count of each parameter
  Tensor values_;  // float64 on device_: GroupValues of each group, one after the other
  // The values last uploaded, per group; a deque keeps their addresses, which an asynchronous upload reads.
  std::deque<GroupValues> uploaded_;
  std::vector<std::string> state_names_;
  std::vector<std::vector<Tensor>> state_;  // state_[k][i]: buffer state_names_[k] of parameter i (k allocated)
};

}  // namespace optim
}  // namespace minidl
