#include "minidl/nn/modules.h"

#include <algorithm>
#include <cmath>

#include "layers/default_init.h"
#include "minidl/autograd.h"
#include "minidl/nn/init.h"

namespace minidl {
namespace nn {
namespace F = functional;
using layers::default_init;

namespace {
std::ostream& operator<<(std::ostream& os, const ExpandingArray2& a) { return os << "(" << a.h << ", " << a.w << ")"; }
const char* bool_str(bool b) { return b ? "true" : "false"; }

/// Prints the stride actually used: a stride of 0 in the options means "the kernel size".
void print_pool(std::ostream& os, const char* name, const Pool2dOptions& o) {
  const ExpandingArray2 k = o.kernel_size(), s = o.stride();
  os << name << "(kernel_size=" << k << ", stride=" << ExpandingArray2(s.h == 0 ? k.h : s.h, s.w == 0 ? k.w : s.w)
     << ", padding=" << o.padding() << ")";
}
}  // namespace

LinearImpl::LinearImpl(LinearOptions o) : Module("Linear"), options(std::move(o)) {
  MINIDL_CHECK(options.in_features() > 0 && options.out_features() > 0, ValueError,
               "Linear: in_features and out_features must be positive, found ", options.in_features(), " and ",
               options.out_features());
  weight = register_parameter("weight", empty({options.out_features(), options.in_features()}));
  if (options.bias()) bias = register_parameter("bias", empty({options.out_features()}));
  reset_parameters();
}
void LinearImpl::reset_parameters() { default_init(weight, bias); }
Tensor LinearImpl::forward(const Tensor& input) { return F::linear(input, weight, bias); }
void LinearImpl::pretty_print(std::ostream& os) const {
  os << "Linear(in_features=" << options.in_features() << ", out_features=" << options.out_features()
     << ", bias=" << bool_str(options.bias()) << ")";
}
Tensor LinearReLUImpl::forward(const Tensor& input) { return F::linear_relu(input, weight, bias); }
void LinearReLUImpl::pretty_print(std::ostream& os) const {
  os << "LinearReLU(";
  LinearImpl::pretty_print(os);
  os << ")";
}

Conv2dImpl::Conv2dImpl(Conv2dOptions o) : Module("Conv2d"), options(std::move(o)) {
  const std::int64_t g = options.groups();
  MINIDL_CHECK(options.in_channels() > 0 && options.out_channels() > 0 && g > 0 && options.in_channels() % g == 0 &&
                   options.out_channels() % g == 0,
               ValueError, "Conv2d: in_channels (", options.in_channels(), ") and out_channels (",
               options.out_channels(), ") must be positive and divisible by groups (", g, ")");
  MINIDL_CHECK(options.kernel_size().h > 0 && options.kernel_size().w > 0, ValueError,
               "Conv2d: kernel_size must be positive, found (", options.kernel_size().h, ", ",
               options.kernel_size().w, ")");
  weight = register_parameter("weight", empty({options.out_channels(), options.in_channels() / g,
                                               options.kernel_size().h, options.kernel_size().w}));
  if (options.bias()) bias = register_parameter("bias", empty({options.out_channels()}));
  reset_parameters();
}
void Conv2dImpl::reset_parameters() { default_init(weight, bias); }
Tensor Conv2dImpl::forward(const Tensor& input) {
  return F::conv2d(input, weight, bias, options.stride(), options.padding(), options.dilation(), options.groups());
}
void Conv2dImpl::pretty_print(std::ostream& os) const {
  os << "Conv2d(" << options.in_channels() << ", " << options.out_channels()
     << ", kernel_size=" << options.kernel_size() << ", stride=" << options.stride()
     << ", padding=" << options.padding() << ", dilation=" << options.dilation() << ", groups=" << options.groups()
     << ", bias=" << bool_str(options.bias()) << ")";
}
Tensor ConvReLU2dImpl::forward(const Tensor& input) {
  return F::conv2d_relu(input, weight, bias, options.stride(), options.padding(), options.dilation(), options.groups());
}
void ConvReLU2dImpl::pretty_print(std::ostream& os) const {
  os << "ConvReLU2d(";
  Conv2dImpl::pretty_print(os);
  os << ")";
}

Tensor MaxPool2dImpl::forward(const Tensor& input) {
  return F::max_pool2d(input, options.kernel_size(), options.stride(), options.padding());
}
void MaxPool2dImpl::pretty_print(std::ostream& os) const {
  print_pool(os, "MaxPool2d", options);
}
Tensor AvgPool2dImpl::forward(const Tensor& input) {
  return F::avg_pool2d(input, options.kernel_size(), options.stride(), options.padding());
}
void AvgPool2dImpl::pretty_print(std::ostream& os) const {
  print_pool(os, "AvgPool2d", options);
}
Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& input) { return F::adaptive_avg_pool2d(input, output_size); }
void AdaptiveAvgPool2dImpl::pretty_print(std::ostream& os) const {
  os << "AdaptiveAvgPool2d(output_size=" << output_size << ")";
}

BatchNormImplBase::BatchNormImplBase(BatchNormOptions o, std::string name, std::vector<std::int64_t> accepted_dims)
    : Module(std::move(name)), options(std::move(o)), accepted_dims_(std::move(accepted_dims)) {
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

void BatchNormImplBase::reset_running_stats() {
  if (!options.track_running_stats()) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  NoGradGuard g;
  num_batches_tracked.zero_();
}

void BatchNormImplBase::reset_parameters() {
  reset_running_stats();
  if (options.affine()) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNormImplBase::forward(const Tensor& input) {
  MINIDL_CHECK(
      input.defined() && std::find(accepted_dims_.begin(), accepted_dims_.end(), input.dim()) != accepted_dims_.end(),
      ValueError, name(), ": expected input with ", accepted_dims_.size() == 1 ? "4" : "2 or 3",
      " dimensions, found shape ", input.defined() ? shape_str(input.sizes()) : "undefined");
  MINIDL_CHECK(input.size(1) == options.num_features(), ValueError, name(), ": expected ", options.num_features(),
               " channels in dimension 1, found shape ", shape_str(input.sizes()));
  const bool use_batch_stats = is_training() || !options.track_running_stats();
  if (is_training() && options.track_running_stats()) {
    NoGradGuard g;
    num_batches_tracked.add_(1);
  }
  return F::batch_norm(input, use_batch_stats && !is_training() ? Tensor() : running_mean,
                       use_batch_stats && !is_training() ? Tensor() : running_var, weight, bias, use_batch_stats,
                       options.momentum(), options.eps());
}

void BatchNormImplBase::pretty_print(std::ostream& os) const {
  os << name() << "(" << options.num_features() << ", eps=" << options.eps() << ", momentum=" << options.momentum()
     << ", affine=" << bool_str(options.affine()) << ", track_running_stats=" << bool_str(options.track_running_stats())
     << ")";
}

DropoutImpl::DropoutImpl(double p_) : Module("Dropout"), p(p_) {
  MINIDL_CHECK(p >= 0.0 && p <= 1.0, ValueError, "Dropout: p must be in [0, 1], found ", p);
}
Tensor DropoutImpl::forward(const Tensor& input) { return F::dropout(input, p, is_training()); }
void DropoutImpl::pretty_print(std::ostream& os) const { os << "Dropout(p=" << p << ")"; }

Dropout2dImpl::Dropout2dImpl(double p_) : Module("Dropout2d"), p(p_) {
  MINIDL_CHECK(p >= 0.0 && p <= 1.0, ValueError, "Dropout2d: p must be in [0, 1], found ", p);
}
Tensor Dropout2dImpl::forward(const Tensor& input) { return F::dropout2d(input, p, is_training()); }
void Dropout2dImpl::pretty_print(std::ostream& os) const { os << "Dropout2d(p=" << p << ")"; }

void SequentialImpl::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& layer : layers_) x = layer->forward(x);
  return x;
}

}  // namespace nn
}  // namespace minidl
