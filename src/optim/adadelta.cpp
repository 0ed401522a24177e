// Adadelta: option checks and the mapping of the options onto the shared update rule.
#include "minidl/optim/adadelta.h"

#include "kernels/optim_update.h"
#include "optim/option_checks.h"

namespace minidl {
namespace optim {

void AdadeltaOptions::validate() const {
  check_non_negative("Adadelta", "lr", lr_);
  check_non_negative("Adadelta", "eps", eps_);
  check_non_negative("Adadelta", "weight_decay", weight_decay_);
  check_unit_interval("Adadelta", "rho", rho_);
}

std::vector<std::string> AdadeltaOptions::state_names() const { return {"square_avg", "acc_delta"}; }

std::size_t AdadeltaOptions::states_needed() const { return 2; }

void AdadeltaOptions::describe(kernels::OptimHyper& flags, double* values) const {
  flags.kind = kernels::OptimKind::Adadelta;
  values[kernels::kLr] = lr_;
  values[kernels::kWeightDecay] = weight_decay_;
  values[kernels::kRho] = rho_;
  values[kernels::kEps] = eps_;
}

Adadelta::Adadelta(std::vector<OptimizerParamGroup> param_groups, AdadeltaOptions defaults)
    : Optimizer(std::move(param_groups), std::make_unique<AdadeltaOptions>(defaults)) {}

Adadelta::Adadelta(std::vector<Tensor> params, AdadeltaOptions defaults)
    : Adadelta(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, defaults) {}

}  // namespace optim
}  // namespace minidl
