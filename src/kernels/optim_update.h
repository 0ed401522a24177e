#pragma once
// The optimizers' update rules as per-element functors compiled for both host and device, so the CPU and CUDA
// backends apply exactly the same formula (PyTorch's single-tensor path, operation for operation). A functor is
// built once per parameter and step from the hyper-parameters, the current learning rate and the parameter's
// step count (1 on its first update), then called for every element i with the parameter, the element's
// gradient (already unscaled under amp::GradScaler) and the state buffers. Coefficients are derived in double,
// as PyTorch's Python scalars are, then rounded to T. The numeric options come as an array of double
// (OptimValue's layout), the parameter group's block of a device tensor on CUDA, so that a captured step reads
// the values current at each replay.
#include <cstdint>

#include "kernels/dispatch_types.h"
#include "kernels/elementwise.h"
#include "minidl/tensor.h"

namespace minidl {
namespace kernels {

enum class OptimKind : std::uint8_t { Sgd, Adam, Adadelta };

/// The positions of a group's numeric options in the array the update rules read.
enum OptimValue : int { kLr, kWeightDecay, kMomentum, kDampening, kBeta1, kBeta2, kEps, kRho, kOptimValues };

/// The update rule and its structural flags, fixed per launch (trivially copyable: passed to kernels by value).
struct OptimHyper {
  OptimKind kind = OptimKind::Sgd;
  bool nesterov = false;                // SGD
  bool amsgrad = false;                 // Adam, AdamW
  bool decoupled_weight_decay = false;  // AdamW
};

/// Most state buffers any optimizer keeps per parameter (Adam with amsgrad: exp_avg, exp_avg_sq, max_exp_avg_sq).
constexpr int kMaxOptimStates = 3;

/// amp::GradScaler's part in a step (PyTorch's fused optimizers' grad_scale and found_inf), as float32 scalars on
/// the parameters' device, either null: when *found_inf != 0 at the time the step runs, the step does nothing
/// (no parameter, state or step count changes); gradients are read multiplied by inv_scale_of(*grad_scale).
struct OptimAmp {
  const float* grad_scale = nullptr;
  const float* found_inf = nullptr;
};

/// One parameter to update: its position in the optimizer (which selects its step counter), the parameter, its
/// gradient and its state buffers in the optimizer's order (undefined where the configuration needs none).
struct OptimSlot {
  int index = 0;
  Tensor param;
  Tensor grad;
  Tensor state[kMaxOptimStates];
};

/// SGD (torch/optim/sgd.py). State: momentum_buffer, used only when momentum != 0.
template <class T>
struct SgdUpdate {
  static constexpr double kCost = 8;  // rough cycles per element, for the CPU's work splitting
  T lr, weight_decay, momentum, keep;  // keep = 1 - dampening
  bool nesterov, first;

  MINIDL_HD SgdUpdate(const OptimHyper& h, const double* v, double step)
      : lr(static_cast<T>(v[kLr])),
        weight_decay(static_cast<T>(v[kWeightDecay])),
        momentum(static_cast<T>(v[kMomentum])),
        keep(static_cast<T>(1.0 - v[kDampening])),
        nesterov(h.nesterov),
        first(step == 1.0) {}

  MINIDL_HD void operator()(std::int64_t i, T* p, T grad, T* const* state) const {
    T d = grad;
    if (weight_decay != T(0)) d = d + weight_decay * p[i];
    if (momentum != T(0)) {
      T& buf = state[0][i];
      // The buffer starts as a copy of the first gradient, not as momentum applied to zeros.
      buf = first ? d : buf * momentum + keep * d;
      d = nesterov ? d + momentum * buf : buf;
    }
    p[i] = p[i] + (-lr) * d;
  }
};

/// Adam (torch/optim/adam.py) and, with decoupled_weight_decay, AdamW (adamw.py).
/// State: exp_avg, exp_avg_sq, and max_exp_avg_sq when amsgrad.
template <class T>
struct AdamUpdate {
  static constexpr double kCost = 20;
  T weight_decay, decay;  // decay = 1 - lr * weight_decay (AdamW's multiplicative shrink)
  T one_minus_beta1, beta2, one_minus_beta2, neg_step_size, bias_correction2_sqrt, eps;
  bool amsgrad, decoupled;

  MINIDL_HD AdamUpdate(const OptimHyper& h, const double* v, double step)
      : weight_decay(static_cast<T>(v[kWeightDecay])),
        decay(static_cast<T>(1.0 - v[kLr] * v[kWeightDecay])),
        one_minus_beta1(static_cast<T>(1.0 - v[kBeta1])),
        beta2(static_cast<T>(v[kBeta2])),
        one_minus_beta2(static_cast<T>(1.0 - v[kBeta2])),
        neg_step_size(static_cast<T>(-(v[kLr] / (1.0 - ::pow(v[kBeta1], step))))),
        bias_correction2_sqrt(static_cast<T>(::sqrt(1.0 - ::pow(v[kBeta2], step)))),
        eps(static_cast<T>(v[kEps])),
        amsgrad(h.amsgrad),
        decoupled(h.decoupled_weight_decay) {}

  MINIDL_HD void operator()(std::int64_t i, T* p, T grad, T* const* state) const {
    if (weight_decay != T(0)) {
      if (decoupled) {
        p[i] = p[i] * decay;
      } else {
        grad = grad + weight_decay * p[i];
      }
    }
    T& m = state[0][i];
    T& v = state[1][i];
    m = lerp(m, grad, one_minus_beta1);
    v = v * beta2 + one_minus_beta2 * grad * grad;
    T second = v;
    if (amsgrad) {
      T& vmax = state[2][i];
      vmax = vmax >= v ? vmax : v;  // NaN in v propagates, as torch.maximum
      second = vmax;
    }
    const T denom = m_sqrt(second) / bias_correction2_sqrt + eps;
    p[i] = p[i] + neg_step_size * m / denom;
  }
};

/// Adadelta (torch/optim/adadelta.py). State: square_avg, acc_delta.
template <class T>
struct AdadeltaUpdate {
  static constexpr double kCost = 30;
  T lr, weight_decay, rho, one_minus_rho, eps;

  MINIDL_HD AdadeltaUpdate(const OptimHyper& /*h*/, const double* v, double /*step*/)
      : lr(static_cast<T>(v[kLr])),
        weight_decay(static_cast<T>(v[kWeightDecay])),
        rho(static_cast<T>(v[kRho])),
        one_minus_rho(static_cast<T>(1.0 - v[kRho])),
        eps(static_cast<T>(v[kEps])) {}

  MINIDL_HD void operator()(std::int64_t i, T* p, T grad, T* const* state) const {
    if (weight_decay != T(0)) grad = grad + weight_decay * p[i];
    T& square_avg = state[0][i];
    T& acc_delta = state[1][i];
    square_avg = square_avg * rho + one_minus_rho * grad * grad;
    const T std_dev = m_sqrt(square_avg + eps);
    const T delta = m_sqrt(acc_delta + eps) / std_dev * grad;
    acc_delta = acc_delta * rho + one_minus_rho * delta * delta;
    p[i] = p[i] + (-lr) * delta;
  }
};

/// Calls f(TypeTag<Functor<T>>{}) for the update rule of `kind`, once per call (not per element).
template <class T, class F>
void visit_optimizer(OptimKind kind, F&& f) {
  switch (kind) {
    case OptimKind::Sgd: f(TypeTag<SgdUpdate<T>>{}); return;
    case OptimKind::Adam: f(TypeTag<AdamUpdate<T>>{}); return;
    case OptimKind::Adadelta: f(TypeTag<AdadeltaUpdate<T>>{}); return;
  }
}

}  // namespace kernels
}  // namespace minidl
