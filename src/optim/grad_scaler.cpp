// amp::GradScaler (torch/amp/grad_scaler.py): the per-optimizer stages and their checks, the gathering of the
// gradients, and the dispatch of the inf check and the scale update to the device (kernels/grad_scaler.h).
#include "minidl/amp/grad_scaler.h"

#include <cmath>

#include "kernels/backend.h"
#include "minidl/autograd.h"
#include "minidl/errors.h"
#include "minidl/factories.h"
#include "minidl/ops.h"
#include "minidl/optim/optimizer.h"

namespace minidl {
namespace amp {
namespace {

void check_growth_factor(double f) {
  MINIDL_CHECK(std::isfinite(f) && f > 1.0, ValueError, "GradScaler: growth_factor must be finite and > 1.0, found ",
               f);
}

void check_backoff_factor(double f) {
  MINIDL_CHECK(f > 0.0 && f < 1.0, ValueError, "GradScaler: backoff_factor must be in (0, 1), found ", f);
}

void check_growth_interval(std::int64_t n) {
  MINIDL_CHECK(n >= 1 && n <= 2147483647, ValueError, "GradScaler: growth_interval must be in [1, 2^31), found ", n);
}

void check_scale_value(const char* call, double s) {
  MINIDL_CHECK(std::isfinite(s) && s > 0.0, ValueError, "GradScaler ", call, ": the scale must be finite and > 0, found ",
               s);
}

/// The value of a one-element tensor as double.
double value_of(const Tensor& t) { return t.detach().cpu().to(kFloat64).item<double>(); }

}  // namespace

GradScaler::GradScaler(GradScalerOptions options)
    : enabled_(options.enabled()), init_scale_(options.init_scale()), growth_factor_(options.growth_factor()),
      backoff_factor_(options.backoff_factor()), growth_interval_(options.growth_interval()) {
  check_scale_value("init_scale", init_scale_);
  check_growth_factor(growth_factor_);
  check_backoff_factor(backoff_factor_);
  check_growth_interval(growth_interval_);
}

Tensor GradScaler::scale(const Tensor& outputs) {
  MINIDL_CHECK(outputs.defined(), ValueError, "GradScaler scale: outputs is an undefined tensor");
  MINIDL_CHECK(is_floating_point(outputs.dtype()), TypeError, "GradScaler scale: outputs must be floating, found ",
               outputs.dtype());
  if (!enabled_) return outputs;
  if (!scale_.defined()) {
    NoGradGuard no_grad;
    scale_ = full({}, init_scale_, TensorOptions(kFloat32).device(outputs.device()));
    growth_tracker_ =
        full({}, static_cast<double>(init_growth_tracker_), TensorOptions(kInt32).device(outputs.device()));
  }
  return outputs * (scale_.device() == outputs.device() ? scale_ : scale_.to(outputs.device()));
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

void GradScaler::require_scale(const char* call) const {
  MINIDL_CHECK(scale_.defined(), ValueError, "GradScaler ", call,
               ": no scale yet; call scale(loss) and backward "
               "through it earlier in the iteration");
}

void GradScaler::check_gradients(optim::Optimizer& optimizer, OptimizerState& state, bool unscale, const char* call) {
  NoGradGuard no_grad;
  const Device device = scale_.device();
  std::vector<Tensor> grads;
  const std::vector<Tensor>& params = optimizer.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    MINIDL_CHECK(!unscale || g.dtype() != kFloat16, ValueError, "GradScaler ", call, ": the gradient of parameter ", i,
                 " is float16; attempting to unscale FP16 gradients (keep the parameters float32)");
    MINIDL_CHECK(g.device() == device, ValueError, "GradScaler ", call, ": the gradient of parameter ", i, " is on ",
                 g.device(), ", the scale on ", device);
    grads.push_back(g);
  }
  if (!state.found_inf.defined() || state.found_inf.device() != device) {
    state.found_inf = zeros({}, TensorOptions(kFloat32).device(device));
  } else {
    state.found_inf.zero_();
  }
  std::vector<Tensor> dense;  // contiguous gradients: the kernel's operands
  dense.reserve(grads.size());
  for (const Tensor& g : grads) dense.push_back(g.is_contiguous() ? g : g.contiguous());
  MINIDL_ON_BACKEND(device, non_finite_check_and_unscale(dense, state.found_inf, scale_, unscale));
  if (unscale) {
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].is_contiguous()) grads[i].copy_(dense[i]);
    }
  }
  state.checked = !grads.empty();
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  require_scale("unscale_");
  OptimizerState& state = states_[&optimizer];
  MINIDL_CHECK(state.stage != Stage::Unscaled, ValueError,
               "GradScaler unscale_: unscale_() has already been called on this optimizer since the last update()");
  MINIDL_CHECK(state.stage != Stage::Stepped, ValueError,
               "GradScaler unscale_: unscale_() is being called after "
               "step(); call update() first");
  check_gradients(optimizer, state, /*unscale=*/true, "unscale_");
  state.stage = Stage::Unscaled;
}

void GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return;
  }
  require_scale("step");
  OptimizerState& state = states_[&optimizer];
  MINIDL_CHECK(state.stage != Stage::Stepped, ValueError,
               "GradScaler step: step() has already been called since the last update()");
  // Not unscaled yet: check without writing, and let the fused update unscale as it reads (PyTorch's fused Adam).
  const bool unscaled = state.stage == Stage::Unscaled;
  if (!unscaled) check_gradients(optimizer, state, /*unscale=*/false, "step");
  MINIDL_CHECK(state.checked, ValueError,
               "GradScaler step: no inf checks were recorded for this optimizer (none of "
               "its parameters has a gradient; backward through scale(loss) first)");
  MINIDL_CHECK(optimizer.device() == scale_.device(), ValueError,
               "GradScaler step: the optimizer's parameters are "
               "on ",
               optimizer.device(), ", the scale on ", scale_.device());
  optimizer.scaled_step(unscaled ? Tensor() : scale_, state.found_inf);
  state.stage = Stage::Stepped;
}

void GradScaler::ready_optimizers() {
  for (auto& entry : states_) {
    entry.second.stage = Stage::Ready;
    entry.second.checked = false;
  }
}

void GradScaler::update() {
  if (!enabled_) return;
  require_scale("update");
  std::vector<const Tensor*> flags;
  for (const auto& entry : states_) {
    if (entry.second.checked) flags.push_back(&entry.second.found_inf);
  }
  MINIDL_CHECK(!flags.empty(), ValueError,
               "GradScaler update: no inf checks were recorded prior to update() (call "
               "unscale_ or step with gradients from scale(loss) first, or update(new_scale))");
  NoGradGuard no_grad;
  const Tensor* found = flags[0];
  if (flags.size() > 1) {
    if (!combined_.defined() || combined_.device() != scale_.device()) {
      combined_ = zeros({}, TensorOptions(kFloat32).device(scale_.device()));
    }
    combined_.copy_(*flags[0]);
    for (std::size_t k = 1; k < flags.size(); ++k) combined_.add_(*flags[k]);
    found = &combined_;
  }
  MINIDL_ON_BACKEND(scale_.device(),
                    update_scale(scale_, growth_tracker_, *found, growth_factor_, backoff_factor_, growth_interval_));
  ready_optimizers();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  require_scale("update");
  check_scale_value("update", new_scale);
  NoGradGuard no_grad;
  scale_.fill_(new_scale);
  ready_optimizers();
}

void GradScaler::update(const Tensor& new_scale) {
  if (!enabled_) return;
  require_scale("update");
  MINIDL_CHECK(new_scale.defined() && new_scale.numel() == 1 && new_scale.dtype() == kFloat32, ValueError,
               "GradScaler update: new_scale must be a float or a one-element float32 tensor");
  MINIDL_CHECK(new_scale.device() == scale_.device(), ValueError,
               "GradScaler update: new_scale must be on the "
               "scale's device ",
               scale_.device(), ", found ", new_scale.device());
  MINIDL_CHECK(!new_scale.requires_grad(), ValueError, "GradScaler update: new_scale must not require grad");
  NoGradGuard no_grad;
  scale_.copy_(new_scale.reshape({}));
  ready_optimizers();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? value_of(scale_) : init_scale_;
}

void GradScaler::set_growth_factor(double new_factor) {
  check_growth_factor(new_factor);
  growth_factor_ = new_factor;
}

void GradScaler::set_backoff_factor(double new_factor) {
  check_backoff_factor(new_factor);
  backoff_factor_ = new_factor;
}

void GradScaler::set_growth_interval(std::int64_t new_interval) {
  check_growth_interval(new_interval);
  growth_interval_ = new_interval;
}

std::map<std::string, Tensor> GradScaler::state_dict() const {
  if (!enabled_) return {};
  const TensorOptions f64(kFloat64), i64(kInt64);
  const double tracker = growth_tracker_.defined() ? value_of(growth_tracker_) : 0.0;
  return {{"scale", full({}, get_scale(), f64)},
          {"growth_factor", full({}, growth_factor_, f64)},
          {"backoff_factor", full({}, backoff_factor_, f64)},
          {"growth_interval", full({}, static_cast<double>(growth_interval_), i64)},
          {"_growth_tracker", full({}, tracker, i64)}};
}

void GradScaler::load_state_dict(const std::map<std::string, Tensor>& state) {
  if (!enabled_) return;
  MINIDL_CHECK(!state.empty(), ValueError,
               "GradScaler load_state_dict: the source state dict is empty, possibly "
               "because it was saved from a disabled instance of GradScaler");
  auto get = [&](const char* key) {
    const auto it = state.find(key);
    MINIDL_CHECK(it != state.end(), ValueError, "GradScaler load_state_dict: missing key '", key, "'");
    MINIDL_CHECK(it->second.defined() && it->second.numel() == 1, ValueError, "GradScaler load_state_dict: '", key,
                 "' must be a one-element tensor");
    return value_of(it->second);
  };
  const double scale = get("scale"), growth = get("growth_factor"), backoff = get("backoff_factor");
  const double interval = get("growth_interval"), tracker = get("_growth_tracker");
  check_scale_value("load_state_dict", scale);
  check_growth_factor(growth);
  check_backoff_factor(backoff);
  MINIDL_CHECK(interval == std::floor(interval), ValueError,
               "GradScaler load_state_dict: 'growth_interval' must be "
               "a whole number, found ",
               interval);
  check_growth_interval(static_cast<std::int64_t>(interval));
  MINIDL_CHECK(tracker == std::floor(tracker) && tracker >= 0.0 && tracker <= 2147483647.0, ValueError,
               "GradScaler load_state_dict: '_growth_tracker' must be a whole number in [0, 2^31), found ", tracker);
  init_scale_ = scale;
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = static_cast<std::int64_t>(interval);
  init_growth_tracker_ = static_cast<std::int64_t>(tracker);
  NoGradGuard no_grad;
  if (scale_.defined()) scale_.fill_(scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(tracker);
}

}  // namespace amp
}  // namespace minidl
