#pragma once
// Loss modules of LibTorch's torch/nn/modules/loss.h: each holds its options, keeps its weights as buffers (so
// to() moves them) and calls its nn::functional form: loss(input, target).
#include "minidl/nn/functional/loss.h"
#include "minidl/nn/modules.h"

namespace minidl {
namespace nn {

/// The shared shape of a loss module: options, forward(input, target) through `F`, and printing of its name.
template <class Options>
class LossImpl : public Module {
 public:
  LossImpl(Options options_, const char* name) : Module(name), options(std::move(options_)) {}
  using Module::forward;
  Options options;
};

class BCELossImpl : public LossImpl<BCELossOptions> {
 public:
  explicit BCELossImpl(const BCELossOptions& options_ = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor weight;
};
MINIDL_MODULE(BCELoss);

class BCEWithLogitsLossImpl : public LossImpl<BCEWithLogitsLossOptions> {
 public:
  explicit BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options_ = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor weight, pos_weight;
};
MINIDL_MODULE(BCEWithLogitsLoss);

class L1LossImpl : public LossImpl<L1LossOptions> {
 public:
  explicit L1LossImpl(const L1LossOptions& options_ = {}) : LossImpl(options_, "L1Loss") {}
  Tensor forward(const Tensor& input, const Tensor& target) { return functional::l1_loss(input, target, options); }
};
MINIDL_MODULE(L1Loss);

class SmoothL1LossImpl : public LossImpl<SmoothL1LossOptions> {
 public:
  explicit SmoothL1LossImpl(const SmoothL1LossOptions& options_ = {}) : LossImpl(options_, "SmoothL1Loss") {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return functional::smooth_l1_loss(input, target, options);
  }
};
MINIDL_MODULE(SmoothL1Loss);

class HuberLossImpl : public LossImpl<HuberLossOptions> {
 public:
  explicit HuberLossImpl(const HuberLossOptions& options_ = {}) : LossImpl(options_, "HuberLoss") {}
  Tensor forward(const Tensor& input, const Tensor& target) { return functional::huber_loss(input, target, options); }
};
MINIDL_MODULE(HuberLoss);

class KLDivLossImpl : public LossImpl<KLDivLossOptions> {
 public:
  explicit KLDivLossImpl(const KLDivLossOptions& options_ = {}) : LossImpl(options_, "KLDivLoss") {}
  Tensor forward(const Tensor& input, const Tensor& target) { return functional::kl_div(input, target, options); }
};
MINIDL_MODULE(KLDivLoss);

class CrossEntropyLossImpl : public LossImpl<CrossEntropyLossOptions> {
 public:
  explicit CrossEntropyLossImpl(const CrossEntropyLossOptions& options_ = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor weight;
};
MINIDL_MODULE(CrossEntropyLoss);

}  // namespace nn
}  // namespace minidl
