#pragma once
// Layer modules with LibTorch's names, options structs (chained setters) and default initialisation.
#include <functional>
#include <memory>
#include <vector>

#include "minidl/arg.h"
#include "minidl/nn/functional.h"
#include "minidl/nn/module.h"

namespace minidl {
namespace nn {

struct LinearOptions {
  LinearOptions(std::int64_t in, std::int64_t out) : in_features_(in), out_features_(out) {}
  MINIDL_ARG(std::int64_t, in_features);
  MINIDL_ARG(std::int64_t, out_features);
  MINIDL_ARG(bool, bias) = true;
};

class LinearImpl : public Module {
 public:
  LinearImpl(std::int64_t in, std::int64_t out) : LinearImpl(LinearOptions(in, out)) {}
  explicit LinearImpl(LinearOptions options);
  Tensor forward(const Tensor& input) override;
  /// LibTorch's default: kaiming_uniform_(a=sqrt(5)) for the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias.
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  LinearOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(Linear);

/// Linear followed by ReLU, fused (PyTorch's torch.ao.nn.intrinsic.LinearReLU): the parameters and their names
/// are Linear's, forward is functional::linear_relu.
class LinearReLUImpl : public LinearImpl {
 public:
  using LinearImpl::LinearImpl;
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
};
MINIDL_MODULE(LinearReLU);

struct Conv2dOptions {
  Conv2dOptions(std::int64_t in, std::int64_t out, ExpandingArray2 kernel)
      : in_channels_(in), out_channels_(out), kernel_size_(kernel) {}
  MINIDL_ARG(std::int64_t, in_channels);
  MINIDL_ARG(std::int64_t, out_channels);
  MINIDL_ARG(ExpandingArray2, kernel_size);
  MINIDL_ARG(ExpandingArray2, stride) = 1;
  MINIDL_ARG(ExpandingArray2, padding) = 0;
  MINIDL_ARG(ExpandingArray2, dilation) = 1;
  MINIDL_ARG(std::int64_t, groups) = 1;
  MINIDL_ARG(bool, bias) = true;
};

class Conv2dImpl : public Module {
 public:
  Conv2dImpl(std::int64_t in, std::int64_t out, ExpandingArray2 kernel) : Conv2dImpl(Conv2dOptions(in, out, kernel)) {}
  explicit Conv2dImpl(Conv2dOptions options);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  Conv2dOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(Conv2d);

/// Conv2d followed by ReLU, fused (PyTorch's torch.ao.nn.intrinsic.ConvReLU2d): the parameters and their names
/// are Conv2d's, so checkpoints move between the two; forward is functional::conv2d_relu.
class ConvReLU2dImpl : public Conv2dImpl {
 public:
  using Conv2dImpl::Conv2dImpl;
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
};
MINIDL_MODULE(ConvReLU2d);

struct Pool2dOptions {
  Pool2dOptions(ExpandingArray2 kernel) : kernel_size_(kernel) {}
  MINIDL_ARG(ExpandingArray2, kernel_size);
  MINIDL_ARG(ExpandingArray2, stride) = 0;  // 0: the kernel size
  MINIDL_ARG(ExpandingArray2, padding) = 0;
};
using MaxPool2dOptions = Pool2dOptions;
using AvgPool2dOptions = Pool2dOptions;

class MaxPool2dImpl : public Module {
 public:
  explicit MaxPool2dImpl(Pool2dOptions options) : Module("MaxPool2d"), options(std::move(options)) {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  Pool2dOptions options;
};
MINIDL_MODULE(MaxPool2d);

class AvgPool2dImpl : public Module {
 public:
  explicit AvgPool2dImpl(Pool2dOptions options) : Module("AvgPool2d"), options(std::move(options)) {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  Pool2dOptions options;
};
MINIDL_MODULE(AvgPool2d);

class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(ExpandingArray2 output_size) : Module("AdaptiveAvgPool2d"), output_size(output_size) {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  ExpandingArray2 output_size;
};
MINIDL_MODULE(AdaptiveAvgPool2d);

struct BatchNormOptions {
  BatchNormOptions(std::int64_t num_features) : num_features_(num_features) {}
  MINIDL_ARG(std::int64_t, num_features);
  MINIDL_ARG(double, eps) = 1e-5;
  MINIDL_ARG(double, momentum) = 0.1;
  MINIDL_ARG(bool, affine) = true;
  MINIDL_ARG(bool, track_running_stats) = true;
};

/// Shared by BatchNorm1d and BatchNorm2d; `dims` is the accepted input rank(s).
class BatchNormImplBase : public Module {
 public:
  BatchNormImplBase(BatchNormOptions options, std::string name, std::vector<std::int64_t> accepted_dims);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  void reset_running_stats();
  void pretty_print(std::ostream& os) const override;
  BatchNormOptions options;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  std::vector<std::int64_t> accepted_dims_;
};

class BatchNorm1dImpl : public BatchNormImplBase {
 public:
  explicit BatchNorm1dImpl(BatchNormOptions options) : BatchNormImplBase(std::move(options), "BatchNorm1d", {2, 3}) {}
};
MINIDL_MODULE(BatchNorm1d);
class BatchNorm2dImpl : public BatchNormImplBase {
 public:
  explicit BatchNorm2dImpl(BatchNormOptions options) : BatchNormImplBase(std::move(options), "BatchNorm2d", {4}) {}
};
MINIDL_MODULE(BatchNorm2d);
using BatchNorm1dOptions = BatchNormOptions;
using BatchNorm2dOptions = BatchNormOptions;

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  double p;
};
MINIDL_MODULE(Dropout);

class Dropout2dImpl : public Module {
 public:
  explicit Dropout2dImpl(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  double p;
};
MINIDL_MODULE(Dropout2d);

/// A parameter-free module that applies a function (activations, flatten, softmax, user lambdas). `config` is
/// what printing shows after the name, e.g. "(dim=1)".
class FunctionalImpl : public Module {
 public:
  explicit FunctionalImpl(std::function<Tensor(const Tensor&)> fn, std::string name = "Functional",
                          std::string config = "")
      : Module(std::move(name)), fn_(std::move(fn)), config_(std::move(config)) {}
  Tensor forward(const Tensor& input) override { return fn_(input); }
  void pretty_print(std::ostream& os) const override { os << name() << config_; }

 private:
  std::function<Tensor(const Tensor&)> fn_;
  std::string config_;
};
MINIDL_MODULE(Functional);

class ReLUImpl : public FunctionalImpl {
 public:
  explicit ReLUImpl(ReLUOptions options = {})
      : FunctionalImpl([inplace = options.inplace()](const Tensor& x) {
          Tensor t = x;  // the same tensor: in place, the caller's input is overwritten, as in LibTorch
          return inplace ? relu_(t) : relu(x);
        }, "ReLU", options.inplace() ? "(inplace=true)" : "") {}
};
MINIDL_MODULE(ReLU);
class LeakyReLUImpl : public FunctionalImpl {
 public:
  /// With inplace(true) the caller's input is overwritten, as in LibTorch.
  explicit LeakyReLUImpl(const LeakyReLUOptions& options_ = {})
      : FunctionalImpl([options_](const Tensor& x) { return functional::leaky_relu(x, options_); }, "LeakyReLU",
                       detail::str("(negative_slope=", options_.negative_slope(),
                                   options_.inplace() ? ", inplace=true" : "", ")")),
        options(options_) {}
  LeakyReLUOptions options;
};
MINIDL_MODULE(LeakyReLU);
class GELUImpl : public FunctionalImpl {
 public:
  explicit GELUImpl(const GELUOptions& options_ = {})
      : FunctionalImpl([options_](const Tensor& x) { return functional::gelu(x, options_); }, "GELU",
                       options_.approximate() == "none" ? "" : "(approximate=" + options_.approximate() + ")"),
        options(options_) {}
  GELUOptions options;
};
MINIDL_MODULE(GELU);
class SigmoidImpl : public FunctionalImpl {
 public:
  SigmoidImpl() : FunctionalImpl([](const Tensor& x) { return sigmoid(x); }, "Sigmoid") {}
};
MINIDL_MODULE(Sigmoid);
class TanhImpl : public FunctionalImpl {
 public:
  TanhImpl() : FunctionalImpl([](const Tensor& x) { return tanh(x); }, "Tanh") {}
};
MINIDL_MODULE(Tanh);
class FlattenImpl : public FunctionalImpl {
 public:
  explicit FlattenImpl(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : FunctionalImpl([start_dim, end_dim](const Tensor& x) { return flatten(x, start_dim, end_dim); }, "Flatten",
                       detail::str("(start_dim=", start_dim, ", end_dim=", end_dim, ")")) {}
};
MINIDL_MODULE(Flatten);
class SoftmaxImpl : public FunctionalImpl {
 public:
  explicit SoftmaxImpl(const SoftmaxOptions& options_)
      : FunctionalImpl([dim = options_.dim()](const Tensor& x) { return softmax(x, dim); }, "Softmax",
                       detail::str("(dim=", options_.dim(), ")")),
        options(options_) {}
  SoftmaxOptions options;
};
MINIDL_MODULE(Softmax);
class LogSoftmaxImpl : public FunctionalImpl {
 public:
  explicit LogSoftmaxImpl(const LogSoftmaxOptions& options_)
      : FunctionalImpl([dim = options_.dim()](const Tensor& x) { return log_softmax(x, dim); }, "LogSoftmax",
                       detail::str("(dim=", options_.dim(), ")")),
        options(options_) {}
  LogSoftmaxOptions options;
};
MINIDL_MODULE(LogSoftmax);

/// Applies its submodules in order ("0", "1", ...).
class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  template <class... Ms>
  explicit SequentialImpl(Ms&&... modules) : Module("Sequential") {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  void push_back(std::shared_ptr<Module> module);
  template <class Impl>
  void push_back(const ModuleHolder<Impl>& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }
  Tensor forward(const Tensor& input) override;
  std::size_t size() const { return layers_.size(); }
  const std::shared_ptr<Module>& operator[](std::size_t i) const { return layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};
MINIDL_MODULE(Sequential);

}  // namespace nn
}  // namespace minidl

#include "minidl/nn/modules/basics.h"
#include "minidl/nn/modules/rnn.h"
#include "minidl/nn/modules/generative.h"
#include "minidl/nn/modules/normalization.h"
