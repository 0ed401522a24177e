#pragma once
// Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and L2 weight decay,
// as torch.optim.SGD:
//   d = g + weight_decay * p
//   buf = d (first step), else momentum * buf + (1 - dampening) * d;  d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
#include <vector>

#include "minidl/optim/optimizer.h"

namespace minidl {
namespace optim {

struct SGDOptions {
  SGDOptions(double lr) : lr_(lr) {}  // NOLINT: implicit, as LibTorch, so SGD(params, 0.1) works
  MINIDL_OPTIM_ARG(double, lr);
  MINIDL_OPTIM_ARG(double, momentum) = 0.0;
  MINIDL_OPTIM_ARG(double, dampening) = 0.0;
  MINIDL_OPTIM_ARG(double, weight_decay) = 0.0;
  MINIDL_OPTIM_ARG(bool, nesterov) = false;

 public:
  /// Throws ValueError naming the option: lr, momentum, weight_decay must be finite and >= 0, dampening
  /// finite; nesterov needs momentum > 0 and dampening 0.
  void validate() const;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  /// The options given at construction (the current learning rate is lr()).
  const SGDOptions& options() const { return options_; }

 private:
  SGDOptions options_;
};

}  // namespace optim
}  // namespace minidl
