#pragma once
// Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and L2 weight decay,
// as torch.optim.SGD:
//   d = g + weight_decay * p
//   buf = d (first step), else momentum * buf + (1 - dampening) * d;  d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
#include <string>
#include <vector>

#include "minidl/optim/optimizer.h"

namespace minidl {
namespace optim {

struct SGDOptions : public OptimizerCloneableOptions<SGDOptions> {
  SGDOptions(double lr) : lr_(lr) {}  // NOLINT: implicit, as LibTorch, so SGD(params, 0.1) works
  MINIDL_OPTIM_ARG(double, lr);
  MINIDL_OPTIM_ARG(double, momentum) = 0.0;
  MINIDL_OPTIM_ARG(double, dampening) = 0.0;
  MINIDL_OPTIM_ARG(double, weight_decay) = 0.0;
  MINIDL_OPTIM_ARG(bool, nesterov) = false;

 public:
  /// Throws ValueError naming the option: lr, momentum, weight_decay must be finite and >= 0, dampening
  /// finite; nesterov needs momentum > 0 and dampening 0.
  void validate() const override;
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { this->lr(lr); }

 private:
  std::vector<std::string> state_names() const override;
  std::size_t states_needed() const override;
  void describe(kernels::OptimHyper& flags, double* values) const override;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<OptimizerParamGroup> param_groups, SGDOptions defaults);
  SGD(std::vector<Tensor> params, SGDOptions defaults);
  /// The default options (each group's are param_groups()[i].options()).
  const SGDOptions& options() const { return static_cast<const SGDOptions&>(defaults()); }
};

}  // namespace optim
}  // namespace minidl
