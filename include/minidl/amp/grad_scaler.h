#pragma once
// Gradient scaling for float16 mixed-precision training: torch.amp.GradScaler's algorithm and API.
//
//   amp::GradScaler scaler;                       // init_scale 2^16, x2 after 2000 clean steps, x0.5 on inf/NaN
//   scaler.scale(loss).backward();                // gradients of loss * scale: small ones survive float16
//   scaler.unscale_(optimizer);                   // optional: true gradients, e.g. for clip_grad_norm_
//   scaler.step(optimizer);                       // skipped when any gradient is inf or NaN
//   scaler.update();                              // backs the scale off, or grows it
//
// Everything is decided on the scaled outputs' device: the scale (float32) and the count of clean steps (int32)
// are device tensors; one multi-tensor kernel checks every gradient for inf/NaN and unscales it in the same pass,
// writing a device flag (found_inf) per optimizer; the optimizer's fused update reads that flag and skips the
// whole step on the device (step counts included), unscaling as it reads the gradients when unscale_ was not
// called; update() is one tiny kernel. No host synchronisation (only get_scale() and state_dict() read the scale
// back), so a whole step with the scaler can be captured in a CUDA graph: each replay checks its own gradients
// and skips or applies its own update. The tensors keep their addresses from the first scale() on.
//
// Misuse is a ValueError naming the call, where PyTorch raises RuntimeError or AssertionError: unscale_ twice, or
// after step, before update(); step twice before update(); unscale_/step/update before any scale(); step or
// update with no gradient checked (no backward since the last update); unscale_ of float16 gradients.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "minidl/arg.h"
#include "minidl/tensor.h"

namespace minidl {
namespace optim {
class Optimizer;
}  // namespace optim

namespace amp {

/// torch.amp.GradScaler's constructor arguments, with PyTorch's defaults.
struct GradScalerOptions {
  MINIDL_ARG(double, init_scale) = 65536.0;          ///< finite, > 0
  MINIDL_ARG(double, growth_factor) = 2.0;           ///< > 1
  MINIDL_ARG(double, backoff_factor) = 0.5;          ///< in (0, 1)
  MINIDL_ARG(std::int64_t, growth_interval) = 2000;  ///< clean steps before a growth, >= 1
  MINIDL_ARG(bool, enabled) = true;                  ///< false: every call passes through (scale returns its input)
};

class GradScaler {
 public:
  /// Throws ValueError naming the option when one is out of range.
  explicit GradScaler(GradScalerOptions options = {});
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  /// outputs * scale (a floating tensor; the first call places the scale on its device). Disabled: outputs.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);

  /// Divides the optimizer's gradients by the scale in place, recording on the device whether any is inf or NaN.
  void unscale_(optim::Optimizer& optimizer);
  /// The optimizer's step, skipped on the device when a gradient is inf or NaN (unscaling them itself when
  /// unscale_ was not called). Disabled: optimizer.step().
  void step(optim::Optimizer& optimizer);
  /// Updates the scale from this iteration's checks (backoff on inf/NaN, growth after growth_interval clean steps)
  /// and readies every optimizer for the next iteration.
  void update();
  /// Sets the scale instead (a finite value > 0, or a one-element float32 tensor on the scale's device).
  void update(double new_scale);
  void update(const Tensor& new_scale);

  /// The current scale (reads it back from the device); init_scale before the first scale(); 1 when disabled.
  double get_scale() const;
  double get_growth_factor() const { return growth_factor_; }
  void set_growth_factor(double new_factor);
  double get_backoff_factor() const { return backoff_factor_; }
  void set_backoff_factor(double new_factor);
  std::int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_interval(std::int64_t new_interval);
  bool is_enabled() const { return enabled_; }

  /// PyTorch's keys as 0-d CPU tensors: "scale", "growth_factor", "backoff_factor" (float64), "growth_interval",
  /// "_growth_tracker" (int64). Empty when disabled.
  std::map<std::string, Tensor> state_dict() const;
  /// Restores a state_dict() (nothing happens when disabled). Throws ValueError for an empty dictionary, a missing
  /// key or a value out of range, leaving the scaler unchanged.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  /// Per optimizer and iteration: where it stands, and its device flag (kept, so captured kernels keep its
  /// address; `checked` says whether this iteration has written it).
  struct OptimizerState {
    Stage stage = Stage::Ready;
    bool checked = false;
    Tensor found_inf;
  };

  void require_scale(const char* call) const;
  /// Zeroes the optimizer's flag and runs the check over its gradients (unscaling them when `unscale`).
  void check_gradients(optim::Optimizer& optimizer, OptimizerState& state, bool unscale, const char* call);
  void ready_optimizers();

  bool enabled_;
  double init_scale_, growth_factor_, backoff_factor_;
  std::int64_t growth_interval_;
  std::int64_t init_growth_tracker_ = 0;  // load_state_dict's value before the first scale()
  Tensor scale_;                          // float32 0-d on the device, from the first scale() on
  Tensor growth_tracker_;                 // int32 0-d beside it: clean steps since the last change of the scale
  Tensor combined_;                       // float32 0-d: the sum of the flags when several optimizers step
  std::map<const optim::Optimizer*, OptimizerState> states_;
};

}  // namespace amp
}  // namespace minidl
