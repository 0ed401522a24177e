#pragma once
// Base class of the optimizers (LibTorch's torch::optim names and argument order, one parameter group).
//
// An optimizer owns, on its parameters' device, one state buffer per parameter for each state its
// configuration needs (allocated at construction, never reallocated) and a small float64 tensor holding the
// learning rate and one step counter per parameter. On CUDA, step() is a fixed sequence of kernel launches on
// gpu::stream() that reads the learning rate and step counts from that tensor: no allocation, no host copy,
// no synchronisation, so a whole training step can be captured in a CUDA graph: each replay advances the
// step counters, set_lr() between replays reaches the captured update, and the set of parameters that have a
// gradient is the one at capture time. Step counts are per parameter, as PyTorch's state["step"]: a parameter
// first updated late starts its own bias correction (Adam) or momentum buffer (SGD) then.
#include <map>
#include <string>
#include <vector>

#include "minidl/tensor.h"

/// Declares an option `name` of type T with a chainable setter and a getter, LibTorch style; follow it with
/// `= default_value;` to initialise it: MINIDL_OPTIM_ARG(double, momentum) = 0;
#define MINIDL_OPTIM_ARG(T, name)             \
 public:                                      \
  auto& name(const T& value) {                \
    name##_ = value;                          \
    return *this;                             \
  }                                           \
  const T& name() const { return name##_; }   \
                                              \
 private:                                     \
  T name##_

namespace minidl {
namespace kernels { struct OptimHyper; }

namespace optim {

class Optimizer {
 public:
  /// Takes the parameters to update (leaf tensors of float32 or float64, all on one device, each listed once);
  /// throws ValueError / TypeError naming the offending index. The learning rate starts at 0: subclasses set it.
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Updates every parameter that has a gradient (the others, and their state, are left alone, as PyTorch).
  virtual void step() = 0;
  /// Drops the gradients (set_to_none), or zeroes them in place, keeping their memory (for CUDA graphs).
  void zero_grad(bool set_to_none = true);

  const std::vector<Tensor>& parameters() const { return params_; }
  Device device() const { return device_; }
  double lr() const { return lr_; }
  /// Sets the learning rate used from the next step on (a finite value >= 0, else ValueError).
  void set_lr(double lr);

  /// A snapshot (copies) of the state, PyTorch's names with the parameter's index as prefix: "lr", and for
  /// each parameter i that has taken a step "i.step" (a float64 scalar) and its buffers, e.g. "i.exp_avg".
  virtual std::map<std::string, Tensor> state_dict() const;
  /// Restores a state_dict() of an optimizer of the same kind and configuration over parameters of the same
  /// shapes, copying into the existing buffers; parameters without an "i.step" start afresh. Unknown keys,
  /// wrong shapes, missing buffers or bad step counts throw ValueError and leave the state unchanged.
  virtual void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  /// Registers a state buffer (zeros shaped like each parameter), saved as "i.<name>". The order of the calls
  /// is the order in which the update rule receives the buffers.
  void add_state(const std::string& name);
  /// Checks the gradients and applies `hyper`'s update rule to every parameter that has one.
  void update(const kernels::OptimHyper& hyper);

 private:
  std::vector<Tensor> params_;
  Device device_;
  double lr_ = 0.0;  // the host copy; also the source of set_lr()'s asynchronous upload, so it lives here
  Tensor scalars_;   // float64 on device_: [lr, step of parameter 0, step of parameter 1, ...]
  std::vector<std::string> state_names_;
  std::vector<std::vector<Tensor>> state_;  // state_[k][i]: buffer state_names_[k] of parameter i
};

}  // namespace optim
}  // namespace minidl
