#pragma once
// Activation modules of LibTorch's torch/nn/modules/activation.h beyond those of modules.h: SiLU, Softplus, ELU,
// Mish, Hardswish, Softmax2d. Each calls its nn::functional form (nn/functional/activation.h).
#include "minidl/nn/functional/activation.h"
#include "minidl/nn/modules.h"

namespace minidl {
namespace nn {

class SiLUImpl : public Module {
 public:
  SiLUImpl() : Module("SiLU") {}
  Tensor forward(const Tensor& input) override { return functional::silu(input); }
};
MINIDL_MODULE(SiLU);

class SoftplusImpl : public Module {
 public:
  explicit SoftplusImpl(const SoftplusOptions& options_ = {}) : Module("Softplus"), options(options_) {}
  Tensor forward(const Tensor& input) override { return functional::softplus(input, options); }
  void pretty_print(std::ostream& os) const override {
    os << "Softplus(beta=" << options.beta() << ", threshold=" << options.threshold() << ")";
  }
  SoftplusOptions options;
};
MINIDL_MODULE(Softplus);

class ELUImpl : public Module {
 public:
  explicit ELUImpl(const ELUOptions& options_ = {}) : Module("ELU"), options(options_) {}
  /// With inplace(true) the caller's input is overwritten, as in LibTorch.
  Tensor forward(const Tensor& input) override { return functional::elu(input, options); }
  void pretty_print(std::ostream& os) const override {
    os << "ELU(alpha=" << options.alpha() << (options.inplace() ? ", inplace=true" : "") << ")";
  }
  ELUOptions options;
};
MINIDL_MODULE(ELU);

class MishImpl : public Module {
 public:
  MishImpl() : Module("Mish") {}
  Tensor forward(const Tensor& input) override { return functional::mish(input); }
};
MINIDL_MODULE(Mish);

class HardswishImpl : public Module {
 public:
  HardswishImpl() : Module("Hardswish") {}
  Tensor forward(const Tensor& input) override { return functional::hardswish(input); }
};
MINIDL_MODULE(Hardswish);

class Softmax2dImpl : public Module {
 public:
  Softmax2dImpl() : Module("Softmax2d") {}
  Tensor forward(const Tensor& input) override { return functional::softmax2d(input); }
};
MINIDL_MODULE(Softmax2d);

}  // namespace nn
}  // namespace minidl
