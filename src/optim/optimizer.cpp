// The optimizer base: parameter checks, state buffers, the device-side learning rate and step counters, the
// dispatch of an update rule to the parameters' backend, and the state dictionary.
#include "minidl/optim/optimizer.h"

#include <cmath>
#include <cstdlib>
#include <set>

#include "core/tensor_impl.h"
#include "kernels/backend.h"
#include "kernels/optim_update.h"
#include "minidl/autograd.h"

namespace minidl {
namespace optim {
namespace {

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

/// The value of a one-element tensor, as double.
double scalar_value(const Tensor& t) { return t.detach().cpu().to(kFloat64).to_vector<double>()[0]; }

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  MINIDL_CHECK(!params_.empty(), ValueError, "optimizer: got an empty parameter list");
  std::set<const TensorImpl*> seen;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    MINIDL_CHECK(p.defined(), ValueError, "optimizer: parameter ", i, " is an undefined tensor");
    MINIDL_CHECK(is_floating_point(p.dtype()), TypeError, "optimizer: parameter ", i,
                 " must be float32 or float64, found ", p.dtype());
    MINIDL_CHECK(p.is_leaf(), ValueError, "optimizer: parameter ", i,
                 " is not a leaf tensor (it was computed by ", p.grad_fn() ? p.grad_fn()->name() : "an op",
                 "); optimize the leaf it came from");
    MINIDL_CHECK(p.device() == params_[0].device(), ValueError, "optimizer: all parameters must be on one device; "
                 "parameter 0 is on ", params_[0].device(), ", parameter ", i, " on ", p.device());
    MINIDL_CHECK(seen.insert(p.unsafe_impl()).second, ValueError, "optimizer: parameter ", i,
                 " appears more than once in the parameter list");
  }
  device_ = params_[0].device();
  // Zero bytes are 0.0: the learning rate starts at 0 and every step counter at 0 (no step taken).
  scalars_ = zeros({static_cast<std::int64_t>(params_.size()) + 1}, TensorOptions(kFloat64).device(device_));
}

Optimizer::~Optimizer() = default;

void Optimizer::set_lr(double lr) {
  MINIDL_CHECK(std::isfinite(lr) && lr >= 0.0, ValueError, "optimizer: set_lr expects a finite learning rate >= 0, "
               "found ", lr);
  lr_ = lr;
  MINIDL_ON_BACKEND(device_, optim_set_lr(scalars_, &lr_));
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

void Optimizer::add_state(const std::string& name) {
  MINIDL_CHECK(static_cast<int>(state_names_.size()) < kernels::kMaxOptimStates, ValueError, "optimizer: at most ",
               kernels::kMaxOptimStates, " state buffers per parameter, adding '", name, "'");
  state_names_.push_back(name);
  std::vector<Tensor> buffers;
  buffers.reserve(params_.size());
  for (const Tensor& p : params_) buffers.push_back(zeros_like(p.detach()));
  state_.push_back(std::move(buffers));
}

void Optimizer::update(const kernels::OptimHyper& hyper) {
  NoGradGuard no_grad;
  std::vector<kernels::OptimSlot> slots;
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
    slots.push_back(std::move(slot));
  }
  if (slots.empty()) return;
  MINIDL_ON_BACKEND(device_, optim_step(hyper, slots, scalars_));
  // The parameters changed in place: saved-tensor checks in autograd must see it.
  for (const kernels::OptimSlot& slot : slots) slot.param.unsafe_impl()->storage->version.fetch_add(1);
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  out["lr"] = full({}, lr_, TensorOptions(kFloat64));
  const std::vector<double> scalars = scalars_.cpu().to_vector<double>();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const double step = scalars[1 + i];
    if (step == 0.0) continue;
    const std::string prefix = std::to_string(i) + ".";
    out[prefix + "step"] = full({}, step, TensorOptions(kFloat64));
    for (std::size_t k = 0; k < state_.size(); ++k) out[prefix + state_names_[k]] = state_[k][i].detach().clone();
  }
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  // Validate everything before changing anything.
  auto it = state.find("lr");
  MINIDL_CHECK(it != state.end(), ValueError, "optimizer load_state_dict: missing key 'lr'");
  MINIDL_CHECK(it->second.defined() && it->second.numel() == 1, ValueError,
               "optimizer load_state_dict: 'lr' must be a one-element tensor");
  const double lr = scalar_value(it->second);
  MINIDL_CHECK(std::isfinite(lr) && lr >= 0.0, ValueError, "optimizer load_state_dict: 'lr' must be finite and >= 0, "
               "found ", lr);
  std::vector<double> scalars(params_.size() + 1, 0.0);
  scalars[0] = lr;
  for (const auto& [key, value] : state) {
    if (key == "lr") continue;
    std::size_t i = 0;
    std::string name;
    MINIDL_CHECK(split_key(key, params_.size(), i, name), ValueError, "optimizer load_state_dict: unexpected key '",
                 key, "' (expected 'lr' or '<parameter index below ", params_.size(), ">.<state name>')");
    MINIDL_CHECK(value.defined(), ValueError, "optimizer load_state_dict: '", key, "' is an undefined tensor");
    if (name == "step") {
      MINIDL_CHECK(value.numel() == 1, ValueError, "optimizer load_state_dict: '", key,
                   "' must hold one value, found shape ", shape_str(value.sizes()));
      const double step = scalar_value(value);
      MINIDL_CHECK(step >= 1.0 && step <= 9007199254740992.0 && step == std::floor(step), ValueError,
                   "optimizer load_state_dict: '", key, "' must be a whole number >= 1, found ", step);
      scalars[1 + i] = step;
      continue;
    }
    bool known = false;
    for (const std::string& n : state_names_) known = known || n == name;
    MINIDL_CHECK(known, ValueError, "optimizer load_state_dict: unexpected key '", key, "' (this optimizer keeps no '",
                 name, "' state)");
    MINIDL_CHECK(is_floating_point(value.dtype()), TypeError, "optimizer load_state_dict: '", key,
                 "' must be float32 or float64, found ", value.dtype());
    MINIDL_CHECK(value.sizes() == params_[i].sizes(), ValueError, "optimizer load_state_dict: '", key, "' has shape ",
                 shape_str(value.sizes()), ", parameter ", i, " has shape ", shape_str(params_[i].sizes()));
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = std::to_string(i) + ".";
    const bool stepped = scalars[1 + i] != 0.0;
    for (const std::string& name : state_names_) {
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
  lr_ = lr;
  // copy_ keeps the buffer (and its address, which a captured graph may hold).
  scalars_.copy_(from_vector(scalars, {static_cast<std::int64_t>(scalars.size())}));
}

}  // namespace optim
}  // namespace minidl
