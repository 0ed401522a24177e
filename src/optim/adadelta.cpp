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

Adadelta::Adadelta(std::vector<Tensor> params, AdadeltaOptions options)
    : Optimizer(std::move(params)), options_(options) {
  options_.validate();
  set_lr(options_.lr());
  add_state("square_avg");
  add_state("acc_delta");
}

void Adadelta::step() {
  kernels::OptimHyper h;
  h.kind = kernels::OptimKind::Adadelta;
  h.rho = options_.rho();
  h.eps = options_.eps();
  h.weight_decay = options_.weight_decay();
  update(h);
}

}  // namespace optim
}  // namespace minidl
