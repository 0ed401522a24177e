// Adam and AdamW: option checks and the mapping of the options onto the shared update rule.
#include "minidl/optim/adam.h"

#include "kernels/optim_update.h"
#include "optim/option_checks.h"

namespace minidl {
namespace optim {
namespace {
template <bool kDecoupled>
constexpr const char* kName = kDecoupled ? "AdamW" : "Adam";
}  // namespace

template <bool kDecoupled>
void AdamFamilyOptions<kDecoupled>::validate() const {
  const char* owner = kName<kDecoupled>;
  check_non_negative(owner, "lr", lr_);
  check_non_negative(owner, "eps", eps_);
  check_non_negative(owner, "weight_decay", weight_decay_);
  check_unit_interval_open(owner, "betas[0]", std::get<0>(betas_));
  check_unit_interval_open(owner, "betas[1]", std::get<1>(betas_));
}

template <bool kDecoupled>
std::vector<std::string> AdamFamilyOptions<kDecoupled>::state_names() const {
  return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
}

template <bool kDecoupled>
std::size_t AdamFamilyOptions<kDecoupled>::states_needed() const {
  return amsgrad_ ? 3 : 2;
}

template <bool kDecoupled>
void AdamFamilyOptions<kDecoupled>::describe(kernels::OptimHyper& flags, double* values) const {
  flags.kind = kernels::OptimKind::Adam;
  flags.amsgrad = amsgrad_;
  flags.decoupled_weight_decay = kDecoupled;
  values[kernels::kLr] = lr_;
  values[kernels::kWeightDecay] = weight_decay_;
  values[kernels::kBeta1] = std::get<0>(betas_);
  values[kernels::kBeta2] = std::get<1>(betas_);
  values[kernels::kEps] = eps_;
}

template <bool kDecoupled>
AdamFamily<kDecoupled>::AdamFamily(std::vector<OptimizerParamGroup> param_groups,
                                   AdamFamilyOptions<kDecoupled> defaults)
    : Optimizer(std::move(param_groups), std::make_unique<AdamFamilyOptions<kDecoupled>>(defaults)) {}

template <bool kDecoupled>
AdamFamily<kDecoupled>::AdamFamily(std::vector<Tensor> params, AdamFamilyOptions<kDecoupled> defaults)
    : AdamFamily(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, defaults) {}

template struct AdamFamilyOptions<false>;
template struct AdamFamilyOptions<true>;
template class AdamFamily<false>;
template class AdamFamily<true>;

}  // namespace optim
}  // namespace minidl
