// SGD: option checks and the mapping of the options onto the shared update rule.
#include "minidl/optim/sgd.h"

#include "kernels/optim_update.h"
#include "optim/option_checks.h"

namespace minidl {
namespace optim {

void SGDOptions::validate() const {
  check_non_negative("SGD", "lr", lr_);
  check_non_negative("SGD", "momentum", momentum_);
  check_non_negative("SGD", "weight_decay", weight_decay_);
  check_option(std::isfinite(dampening_), "SGD", "dampening", dampening_, "a finite value");
  MINIDL_CHECK(!nesterov_ || (momentum_ > 0.0 && dampening_ == 0.0), ValueError, "SGD: nesterov momentum requires "
               "momentum > 0 and dampening 0, found momentum ", momentum_, " and dampening ", dampening_);
}

std::vector<std::string> SGDOptions::state_names() const { return {"momentum_buffer"}; }

std::size_t SGDOptions::states_needed() const { return momentum_ != 0.0 ? 1 : 0; }

void SGDOptions::describe(kernels::OptimHyper& flags, double* values) const {
  flags.kind = kernels::OptimKind::Sgd;
  flags.nesterov = nesterov_;
  values[kernels::kLr] = lr_;
  values[kernels::kWeightDecay] = weight_decay_;
  values[kernels::kMomentum] = momentum_;
  values[kernels::kDampening] = dampening_;
}

SGD::SGD(std::vector<OptimizerParamGroup> param_groups, SGDOptions defaults)
    : Optimizer(std::move(param_groups), std::make_unique<SGDOptions>(defaults)) {}

SGD::SGD(std::vector<Tensor> params, SGDOptions defaults)
    : SGD(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, defaults) {}

}  // namespace optim
}  // namespace minidl
