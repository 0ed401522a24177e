// The optimizer base: parameter groups and their checks, state buffers, the device-side options and step
// counters, the dispatch of each group's update rule to the parameters' backend, and the state dictionary.
#include "minidl/optim/optimizer.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <typeinfo>

#include "core/tensor_impl.h"
#include "kernels/backend.h"
#include "kernels/optim_update.h"
#include "minidl/autograd.h"
#include "minidl/joining.h"

namespace minidl {
namespace optim {
namespace {

static_assert(std::tuple_size<std::array<double, 8>>::value == kernels::kOptimValues, "GroupValues' size");

/// Parses the parameter index of a state key "i.name"; returns false when the key has no such prefix.
bool split_key(const std::string& key, std::size_t count, std::size_t& index, std::string& name) {
  const std::size_t dot = key.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  for (std::size_t c = 0; c < dot; ++c) {
    if (key[c] < '0' || key[c] > '9') return false;
  }
  if (dot > 9 || (dot > 1 && key[0] == '0')) return false;  // too many digits for an index, or not canonical
  index = static_cast<std::size_t>(std::strtoull(key.substr(0, dot).c_str(), nullptr, 10));
  name = key.substr(dot + 1);
  return index < count;
}

/// The state_dict key of group g's learning rate (g >= 1; group 0's is "lr").
std::string group_lr_key(std::size_t g) { return "param_groups." + std::to_string(g) + ".lr"; }

/// The value of a one-element tensor, as double.
double scalar_value(const Tensor& t) { return t.detach().cpu().to(kFloat64).to_vector<double>()[0]; }

}  // namespace

// ---- options and groups -----------------------------------------------------------------------------------

void OptimizerOptions::changed() {
  if (owner_ != nullptr) owner_->sync_group(group_);
}

OptimizerParamGroup::OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}

OptimizerParamGroup::OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
    : params_(std::move(params)), options_(std::move(options)) {}

OptimizerParamGroup::OptimizerParamGroup(const OptimizerParamGroup& other)
    : params_(other.params_), options_(other.options_ ? other.options_->clone() : nullptr) {}

OptimizerParamGroup& OptimizerParamGroup::operator=(const OptimizerParamGroup& other) {
  if (this != &other) {
    params_ = other.params_;
    options_ = other.options_ ? other.options_->clone() : nullptr;
  }
  return *this;
}

OptimizerOptions& OptimizerParamGroup::options() {
  MINIDL_CHECK(options_ != nullptr, ValueError, "OptimizerParamGroup: the group has no options");
  return *options_;
}

const OptimizerOptions& OptimizerParamGroup::options() const {
  MINIDL_CHECK(options_ != nullptr, ValueError, "OptimizerParamGroup: the group has no options");
  return *options_;
}

void OptimizerParamGroup::set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }

// ---- the optimizer ----------------------------------------------------------------------------------------

Optimizer::Optimizer(std::vector<OptimizerParamGroup> param_groups, std::unique_ptr<OptimizerOptions> defaults)
    : defaults_(std::move(defaults)) {
  MINIDL_CHECK(defaults_ != nullptr, ValueError, "optimizer: the default options are null");
  defaults_->validate();
  state_names_ = defaults_->state_names();
  std::size_t count = 0;
  for (const OptimizerParamGroup& g : param_groups) count += g.params().size();
  MINIDL_CHECK(count > 0, ValueError, "optimizer: got an empty parameter list");
  for (const OptimizerParamGroup& g : param_groups) add_param_group(g);
}

Optimizer::~Optimizer() = default;

void Optimizer::add_param_group(const OptimizerParamGroup& param_group) {
  std::unique_ptr<OptimizerOptions> options =
      param_group.has_options() ? param_group.options().clone() : defaults_->clone();
  MINIDL_CHECK(typeid(*options) == typeid(*defaults_), TypeError, "optimizer: parameter group ", groups_.size(),
               " has the options of another optimizer kind");
  options->validate();
  const std::vector<Tensor>& params = param_group.params();
  std::set<const TensorImpl*> seen;
  for (const Tensor& p : params_) seen.insert(p.unsafe_impl());
  for (std::size_t k = 0; k < params.size(); ++k) {
    const Tensor& p = params[k];
    const std::size_t i = params_.size() + k;
    MINIDL_CHECK(p.defined(), ValueError, "optimizer: parameter ", i, " is an undefined tensor");
    MINIDL_CHECK(is_floating_point(p.dtype()), TypeError, "optimizer: parameter ", i,
                 " must be float32 or float64, found ", p.dtype());
    MINIDL_CHECK(p.is_leaf(), ValueError, "optimizer: parameter ", i,
                 " is not a leaf tensor (it was computed by ", p.grad_fn() ? p.grad_fn()->name() : "an op",
                 "); optimize the leaf it came from");
    const Device first = params_.empty() ? params[0].device() : device_;
    MINIDL_CHECK(p.device() == first, ValueError, "optimizer: all parameters must be on one device; parameter 0 is on ",
                 first, ", parameter ", i, " on ", p.device());
    MINIDL_CHECK(seen.insert(p.unsafe_impl()).second, ValueError, "optimizer: parameter ", i,
                 " appears more than once in the parameter list (parameters may belong to one group only)");
  }
  if (params.empty() && params_.empty()) return;  // nothing to place yet: the device is unknown
  if (params_.empty()) device_ = params[0].device();

  // Everything checked: grow the device tensors (new ones; a captured graph holds the old addresses).
  NoGradGuard no_grad;
  const std::size_t g = groups_.size();
  const TensorOptions f64 = TensorOptions(kFloat64).device(device_);
  Tensor new_steps = zeros({static_cast<std::int64_t>(params.size())}, f64);
  steps_ = steps_.defined() ? cat({steps_, new_steps}) : new_steps;
  for (std::size_t k = 0; k < state_.size(); ++k) {
    for (const Tensor& p : params) state_[k].push_back(zeros_like(p.detach()));
  }
  for (const Tensor& p : params) {
    params_.push_back(p);
    group_of_.push_back(g);
  }
  kernels::OptimHyper flags;
  GroupValues values{};
  options->describe(flags, values.data());
  uploaded_.push_back(values);
  Tensor new_values =
      from_vector(std::vector<double>(values.begin(), values.end()), {kernels::kOptimValues}).to(device_);
  values_ = values_.defined() ? cat({values_, new_values}) : new_values;
  options->owner_ = this;
  options->group_ = g;
  groups_.emplace_back(params, std::move(options));
  ensure_states(groups_.back().options().states_needed());
}

void Optimizer::sync_group(std::size_t g) {
  const OptimizerOptions& options = groups_[g].options();
  options.validate();
  kernels::OptimHyper flags;
  GroupValues values{};
  options.describe(flags, values.data());
  if (values != uploaded_[g]) {
    uploaded_[g] = values;
    MINIDL_ON_BACKEND(device_, optim_upload(values_, static_cast<std::int64_t>(g) * kernels::kOptimValues,
                                            uploaded_[g].data(), kernels::kOptimValues));
  }
  ensure_states(options.states_needed());
}

void Optimizer::ensure_states(std::size_t count) {
  NoGradGuard no_grad;
  while (state_.size() < count) {
    MINIDL_CHECK(static_cast<int>(state_.size()) < kernels::kMaxOptimStates && state_.size() < state_names_.size(),
                 ValueError, "optimizer: at most ", kernels::kMaxOptimStates, " state buffers per parameter");
    std::vector<Tensor> buffers;
    buffers.reserve(params_.size());
    for (const Tensor& p : params_) buffers.push_back(zeros_like(p.detach()));
    state_.push_back(std::move(buffers));
  }
}

double Optimizer::lr() const { return groups_.empty() ? defaults_->get_lr() : groups_[0].options().get_lr(); }

void Optimizer::set_lr(double lr) {
  MINIDL_CHECK(std::isfinite(lr) && lr >= 0.0, ValueError, "optimizer: set_lr expects a finite learning rate >= 0, "
               "found ", lr);
  for (OptimizerParamGroup& g : groups_) g.options().set_lr(lr);
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : params_) {
    Tensor& g = p.mutable_grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      g = Tensor();
    } else {
      g.zero_();
    }
  }
}

void Optimizer::step() { run_step(nullptr, nullptr); }

void Optimizer::scaled_step(const Tensor& grad_scale, const Tensor& found_inf) {
  auto check = [&](const Tensor& t, const char* name, bool optional) {
    if (optional && !t.defined()) return;
    MINIDL_CHECK(t.defined(), ValueError, "optimizer scaled_step: ", name, " is an undefined tensor");
    MINIDL_CHECK(t.dtype() == kFloat32 && t.numel() == 1, TypeError, "optimizer scaled_step: ", name,
                 " must be a one-element float32 tensor, found ", t.dtype(), " of shape ", shape_str(t.sizes()));
    MINIDL_CHECK(t.device() == device_, ValueError, "optimizer scaled_step: ", name, " must be on the parameters' "
                 "device ", device_, ", found ", t.device());
  };
  check(grad_scale, "grad_scale", true);
  check(found_inf, "found_inf", false);
  run_step(grad_scale.defined() ? grad_scale.data_ptr<float>() : nullptr, found_inf.data_ptr<float>());
}

void Optimizer::run_step(const float* grad_scale, const float* found_inf) {
  NoGradGuard no_grad;
  // Options assigned whole (operator=) bypass the setters: catch up before the launches (a no-op otherwise).
  for (std::size_t g = 0; g < groups_.size(); ++g) sync_group(g);
  std::vector<std::vector<kernels::OptimSlot>> slots(groups_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    MINIDL_CHECK(g.device() == p.device() && g.dtype() == p.dtype(), TypeError,
                 "optimizer step: gradient of parameter ", i, " is ", g.dtype(), " on ", g.device(), ", the parameter ",
                 p.dtype(), " on ", p.device());
    MINIDL_CHECK(g.sizes() == p.sizes(), ValueError, "optimizer step: gradient of parameter ", i, " has shape ",
                 shape_str(g.sizes()), ", the parameter ", shape_str(p.sizes()));
    kernels::OptimSlot slot;
    slot.index = static_cast<int>(i);
    slot.param = p;
    slot.grad = g;
    for (std::size_t k = 0; k < state_.size(); ++k) slot.state[k] = state_[k][i];
    slots[group_of_[i]].push_back(std::move(slot));
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (slots[g].empty()) continue;
    kernels::OptimHyper flags;
    GroupValues values{};
    groups_[g].options().describe(flags, values.data());
    kernels::OptimAmp amp;
    amp.grad_scale = grad_scale;
    amp.found_inf = found_inf;
    MINIDL_ON_BACKEND(device_, optim_step(flags, slots[g], steps_, values_, static_cast<std::int64_t>(g), amp));
    // The parameters changed in place: saved-tensor checks in autograd must see it.
    for (const kernels::OptimSlot& slot : slots[g]) slot.param.unsafe_impl()->storage->version.fetch_add(1);
  }
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  out["lr"] = full({}, lr(), TensorOptions(kFloat64));
  for (std::size_t g = 1; g < groups_.size(); ++g) {
    out[group_lr_key(g)] = full({}, groups_[g].options().get_lr(), TensorOptions(kFloat64));
  }
  const std::vector<double> steps = steps_.cpu().to_vector<double>();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (steps[i] == 0.0) continue;
    const std::string prefix = std::to_string(i) + ".";
    out[prefix + "step"] = full({}, steps[i], TensorOptions(kFloat64));
    for (std::size_t k = 0; k < state_.size(); ++k) out[prefix + state_names_[k]] = state_[k][i].detach().clone();
  }
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  // Validate everything before changing anything.
  std::vector<double> lrs(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::string key = g == 0 ? "lr" : group_lr_key(g);
    auto it = state.find(key);
    MINIDL_CHECK(it != state.end(), ValueError, "optimizer load_state_dict: missing key '", key, "'");
    MINIDL_CHECK(it->second.defined() && it->second.numel() == 1, ValueError, "optimizer load_state_dict: '", key,
                 "' must be a one-element tensor");
    lrs[g] = scalar_value(it->second);
    MINIDL_CHECK(std::isfinite(lrs[g]) && lrs[g] >= 0.0, ValueError, "optimizer load_state_dict: '", key,
                 "' must be finite and >= 0, found ", lrs[g]);
  }
  std::vector<double> steps(params_.size(), 0.0);
  for (const auto& [key, value] : state) {
    if (key == "lr") continue;
    bool group_key = false;
    for (std::size_t g = 1; g < groups_.size(); ++g) group_key = group_key || key == group_lr_key(g);
    if (group_key) continue;
    std::size_t i = 0;
    std::string name;
    MINIDL_CHECK(split_key(key, params_.size(), i, name), ValueError, "optimizer load_state_dict: unexpected key '",
                 key, "' (expected 'lr', 'param_groups.<group>.lr' or '<parameter index below ", params_.size(),
                 ">.<state name>')");
    MINIDL_CHECK(value.defined(), ValueError, "optimizer load_state_dict: '", key, "' is an undefined tensor");
    if (name == "step") {
      MINIDL_CHECK(value.numel() == 1, ValueError, "optimizer load_state_dict: '", key,
                   "' must hold one value, found shape ", shape_str(value.sizes()));
      const double step = scalar_value(value);
      MINIDL_CHECK(step >= 1.0 && step <= 9007199254740992.0 && step == std::floor(step), ValueError,
                   "optimizer load_state_dict: '", key, "' must be a whole number >= 1, found ", step);
      steps[i] = step;
      continue;
    }
    std::size_t known = state_names_.size();
    for (std::size_t k = 0; k < state_names_.size(); ++k) known = state_names_[k] == name ? k : known;
    MINIDL_CHECK(known < state_.size(), ValueError, "optimizer load_state_dict: unexpected key '", key,
                 "' (this optimizer keeps no '", name, "' state)");
    MINIDL_CHECK(is_floating_point(value.dtype()), TypeError, "optimizer load_state_dict: '", key,
                 "' must be float32 or float64, found ", value.dtype());
    MINIDL_CHECK(value.sizes() == params_[i].sizes(), ValueError, "optimizer load_state_dict: '", key, "' has shape ",
                 shape_str(value.sizes()), ", parameter ", i, " has shape ", shape_str(params_[i].sizes()));
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = std::to_string(i) + ".";
    const bool stepped = steps[i] != 0.0;
    for (std::size_t k = 0; k < state_.size(); ++k) {
      const std::string& name = state_names_[k];
      const bool has = state.count(prefix + name) == 1;
      MINIDL_CHECK(has || !stepped, ValueError, "optimizer load_state_dict: '", prefix, name, "' is missing (the state "
                   "has '", prefix, "step')");
      MINIDL_CHECK(stepped || !has, ValueError, "optimizer load_state_dict: '", prefix, name, "' is given without '",
                   prefix, "step'");
    }
  }

  NoGradGuard no_grad;
  for (std::size_t k = 0; k < state_.size(); ++k) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto found = state.find(std::to_string(i) + "." + state_names_[k]);
      if (found == state.end()) {
        state_[k][i].zero_();
      } else {
        state_[k][i].copy_(found->second);
      }
    }
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) groups_[g].options().set_lr(lrs[g]);
  // copy_ keeps the buffer (and its address, which a captured graph may hold).
  steps_.copy_(from_vector(steps, {static_cast<std::int64_t>(steps.size())}));
}

}  // namespace optim
}  // namespace minidl
