#pragma once
// Adadelta (Zeiler), as torch.optim.Adadelta:
//   g += weight_decay * p;  sq = rho * sq + (1 - rho) * g^2
//   delta = sqrt(acc + eps) / sqrt(sq + eps) * g;  acc = rho * acc + (1 - rho) * delta^2;  p -= lr * delta
#include <string>
#include <vector>

#include "minidl/optim/optimizer.h"

namespace minidl {
namespace optim {

struct AdadeltaOptions : public OptimizerCloneableOptions<AdadeltaOptions> {
  AdadeltaOptions(double lr = 1.0) : lr_(lr) {}  // NOLINT: implicit, as LibTorch
  MINIDL_OPTIM_ARG(double, lr);
  MINIDL_OPTIM_ARG(double, rho) = 0.9;
  MINIDL_OPTIM_ARG(double, eps) = 1e-6;
  MINIDL_OPTIM_ARG(double, weight_decay) = 0.0;

 public:
  /// Throws ValueError naming the option: lr, eps, weight_decay finite and >= 0, rho in [0, 1].
  void validate() const override;
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { this->lr(lr); }

 private:
  std::vector<std::string> state_names() const override;
  std::size_t states_needed() const override;
  void describe(kernels::OptimHyper& flags, double* values) const override;
};

class Adadelta : public Optimizer {
 public:
  Adadelta(std::vector<OptimizerParamGroup> param_groups, AdadeltaOptions defaults = {});
  Adadelta(std::vector<Tensor> params, AdadeltaOptions defaults = {});
  /// The default options (each group's are param_groups()[i].options()).
  const AdadeltaOptions& options() const { return static_cast<const AdadeltaOptions&>(defaults()); }
};

}  // namespace optim
}  // namespace minidl
