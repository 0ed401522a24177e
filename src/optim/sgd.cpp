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

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(std::move(params)), options_(options) {
  options_.validate();
  set_lr(options_.lr());
  if (options_.momentum() != 0.0) add_state("momentum_buffer");
}

void SGD::step() {
  kernels::OptimHyper h;
  h.kind = kernels::OptimKind::Sgd;
  h.momentum = options_.momentum();
  h.dampening = options_.dampening();
  h.weight_decay = options_.weight_decay();
  h.nesterov = options_.nesterov();
  update(h);
}

}  // namespace optim
}  // namespace minidl
