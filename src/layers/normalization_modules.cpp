// LayerNorm, RMSNorm, GroupNorm and InstanceNorm1d/2d modules over the functionals of normalization.cpp.
#include <ostream>

#include "minidl/autograd.h"
#include "minidl/nn/init.h"
#include "minidl/nn/modules.h"

namespace minidl {
namespace nn {
namespace F = functional;

namespace {
/// LibTorch prints a normalized_shape as an IntArrayRef: [2, 3].
std::ostream& print_dims(std::ostream& os, const std::vector<std::int64_t>& v) {
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << "]";
}

const char* bool_str(bool b) { return b ? "true" : "false"; }

Shape shape_of(const std::vector<std::int64_t>& v) { return Shape(v.begin(), v.end()); }

void check_normalized_shape(const std::vector<std::int64_t>& v, const std::string& module) {
  MINIDL_CHECK(!v.empty(), ValueError, module, ": normalized_shape must have at least one dimension, found []");
  for (std::int64_t d : v) {
    MINIDL_CHECK(d >= 0, ValueError, module, ": normalized_shape must not hold negative sizes, found ",
                 shape_str(shape_of(v)));
  }
}
}  // namespace

LayerNormImpl::LayerNormImpl(LayerNormOptions o) : Module("LayerNorm"), options(std::move(o)) {
  check_normalized_shape(options.normalized_shape(), name());
  if (options.elementwise_affine()) {
    weight = register_parameter("weight", empty(shape_of(options.normalized_shape())));
    if (options.bias()) bias = register_parameter("bias", empty(shape_of(options.normalized_shape())));
  }
  reset_parameters();
}
void LayerNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}
Tensor LayerNormImpl::forward(const Tensor& input) {
  return F::layer_norm(input, options.normalized_shape(), weight, bias, options.eps());
}
void LayerNormImpl::pretty_print(std::ostream& os) const {
  os << "LayerNorm(";
  print_dims(os, options.normalized_shape())
      << ", eps=" << options.eps() << ", elementwise_affine=" << bool_str(options.elementwise_affine());
  if (!options.bias()) os << ", bias=false";
  os << ")";
}

RMSNormImpl::RMSNormImpl(RMSNormOptions o) : Module("RMSNorm"), options(std::move(o)) {
  check_normalized_shape(options.normalized_shape(), name());
  if (options.elementwise_affine()) weight = register_parameter("weight", empty(shape_of(options.normalized_shape())));
  reset_parameters();
}
void RMSNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
}
Tensor RMSNormImpl::forward(const Tensor& input) {
  return F::rms_norm(input, options.normalized_shape(), weight, options.eps());
}
void RMSNormImpl::pretty_print(std::ostream& os) const {
  os << "RMSNorm(";
  print_dims(os, options.normalized_shape()) << ", eps=";
  if (options.eps()) {
    os << *options.eps();
  } else {
    os << "None";
  }
  os << ", elementwise_affine=" << bool_str(options.elementwise_affine()) << ")";
}

GroupNormImpl::GroupNormImpl(GroupNormOptions o) : Module("GroupNorm"), options(std::move(o)) {
  const std::int64_t g = options.num_groups(), c = options.num_channels();
  MINIDL_CHECK(g > 0 && c > 0 && c % g == 0, ValueError, "GroupNorm: num_channels (", c,
               ") must be positive and divisible by num_groups (", g, ")");
  if (options.affine()) {
    weight = register_parameter("weight", empty({c}));
    bias = register_parameter("bias", empty({c}));
  }
  reset_parameters();
}
void GroupNormImpl::reset_parameters() {
  if (!options.affine()) return;
  init::ones_(weight);
  init::zeros_(bias);
}
Tensor GroupNormImpl::forward(const Tensor& input) {
  MINIDL_CHECK(input.defined() && input.dim() >= 2 && input.size(1) == options.num_channels(), ValueError,
               "GroupNorm: expected input of shape (N, ", options.num_channels(), ", *), found ",
               input.defined() ? shape_str(input.sizes()) : "undefined");
  return F::group_norm(input, options.num_groups(), weight, bias, options.eps());
}
void GroupNormImpl::pretty_print(std::ostream& os) const {
  os << "GroupNorm(" << options.num_groups() << ", " << options.num_channels() << ", eps=" << options.eps()
     << ", affine=" << bool_str(options.affine()) << ")";
}

InstanceNormImplBase::InstanceNormImplBase(InstanceNormOptions o, std::string name, std::int64_t spatial_dims)
    : Module(std::move(name)), options(std::move(o)), spatial_dims_(spatial_dims) {
  const std::int64_t c = options.num_features();
  MINIDL_CHECK(c > 0, ValueError, this->name(), ": num_features must be positive, found ", c);
  if (options.affine()) {
    weight = register_parameter("weight", empty({c}));
    bias = register_parameter("bias", empty({c}));
  }
  if (options.track_running_stats()) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
  reset_parameters();
}

void InstanceNormImplBase::reset_running_stats() {
  if (!options.track_running_stats()) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  NoGradGuard g;
  num_batches_tracked.zero_();
}

void InstanceNormImplBase::reset_parameters() {
  reset_running_stats();
  if (options.affine()) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor InstanceNormImplBase::forward(const Tensor& input) {
  const std::int64_t batched = spatial_dims_ + 2;
  MINIDL_CHECK(input.defined() && (input.dim() == batched || input.dim() == batched - 1), ValueError, name(),
               ": expected ", batched - 1, "D (unbatched) or ", batched, "D (batched) input, found shape ",
               input.defined() ? shape_str(input.sizes()) : "undefined");
  const bool unbatched = input.dim() == batched - 1;
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  // PyTorch raises for a channel count other than num_features only where the parameters or statistics need it.
  MINIDL_CHECK(x.size(1) == options.num_features() || (!options.affine() && !options.track_running_stats()), ValueError,
               name(), ": expected input's size at dim ", unbatched ? 0 : 1, " to match num_features (",
               options.num_features(), "), found shape ", shape_str(input.sizes()));
  const bool use_input_stats = is_training() || !options.track_running_stats();
  if (is_training() && options.track_running_stats()) {
    NoGradGuard g;
    num_batches_tracked.add_(1);
  }
  const Tensor y =
      F::instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, options.momentum(), options.eps());
  return unbatched ? y.squeeze(0) : y;
}

void InstanceNormImplBase::pretty_print(std::ostream& os) const {
  os << name() << "(" << options.num_features() << ", eps=" << options.eps() << ", momentum=" << options.momentum()
     << ", affine=" << bool_str(options.affine()) << ", track_running_stats=" << bool_str(options.track_running_stats())
     << ")";
}

}  // namespace nn
}  // namespace minidl
