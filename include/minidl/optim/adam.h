#pragma once
// Adam (Kingma & Ba) with optional L2 weight decay and AMSGrad, as torch.optim.Adam:
//   g += weight_decay * p;  m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
//   (amsgrad: v_max = max(v_max, v), used in place of v)
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// with t the parameter's step count. AdamW (adamw.h) is the same class with the weight decay decoupled.
#include <tuple>
#include <string>
#include <vector>

#include "minidl/optim/optimizer.h"

namespace minidl {
namespace optim {

/// (beta1, beta2): decay rates of the first and second moment averages.
using AdamBetas = std::tuple<double, double>;

/// Options of Adam (kDecoupled false) and AdamW (true); they differ only in the default weight decay.
template <bool kDecoupled>
struct AdamFamilyOptions : public OptimizerCloneableOptions<AdamFamilyOptions<kDecoupled>> {
  AdamFamilyOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit, as LibTorch
  MINIDL_OPTIM_ARG(double, lr);
  MINIDL_OPTIM_ARG(AdamBetas, betas) = std::make_tuple(0.9, 0.999);
  MINIDL_OPTIM_ARG(double, eps) = 1e-8;
  MINIDL_OPTIM_ARG(double, weight_decay) = kDecoupled ? 1e-2 : 0.0;
  MINIDL_OPTIM_ARG(bool, amsgrad) = false;

 public:
  /// Throws ValueError naming the option: lr, eps, weight_decay finite and >= 0, each beta in [0, 1).
  void validate() const override;
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { this->lr(lr); }

 private:
  std::vector<std::string> state_names() const override;
  std::size_t states_needed() const override;
  void describe(kernels::OptimHyper& flags, double* values) const override;
};

template <bool kDecoupled>
class AdamFamily : public Optimizer {
 public:
  AdamFamily(std::vector<OptimizerParamGroup> param_groups, AdamFamilyOptions<kDecoupled> defaults = {});
  AdamFamily(std::vector<Tensor> params, AdamFamilyOptions<kDecoupled> defaults = {});
  /// The default options (each group's are param_groups()[i].options()).
  const AdamFamilyOptions<kDecoupled>& options() const {
    return static_cast<const AdamFamilyOptions<kDecoupled>&>(defaults());
  }
};

extern template struct AdamFamilyOptions<false>;
extern template struct AdamFamilyOptions<true>;
extern template class AdamFamily<false>;
extern template class AdamFamily<true>;

using AdamOptions = AdamFamilyOptions<false>;
using Adam = AdamFamily<false>;

}  // namespace optim
}  // namespace minidl
