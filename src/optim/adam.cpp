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
AdamFamily<kDecoupled>::AdamFamily(std::vector<Tensor> params, AdamFamilyOptions<kDecoupled> options)
    : Optimizer(std::move(params)), options_(options) {
  options_.validate();
  set_lr(options_.lr());
  add_state("exp_avg");
  add_state("exp_avg_sq");
  if (options_.amsgrad()) add_state("max_exp_avg_sq");
}

template <bool kDecoupled>
void AdamFamily<kDecoupled>::step() {
  kernels::OptimHyper h;
  h.kind = kernels::OptimKind::Adam;
  h.beta1 = std::get<0>(options_.betas());
  h.beta2 = std::get<1>(options_.betas());
  h.eps = options_.eps();
  h.weight_decay = options_.weight_decay();
  h.amsgrad = options_.amsgrad();
  h.decoupled_weight_decay = kDecoupled;
  update(h);
}

template struct AdamFamilyOptions<false>;
template struct AdamFamilyOptions<true>;
template class AdamFamily<false>;
template class AdamFamily<true>;

}  // namespace optim
}  // namespace minidl
