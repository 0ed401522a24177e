#pragma once
// Losses with LibTorch's options structs (torch/nn/options/loss.h) and reductions: binary_cross_entropy(_with_logits),
// l1_loss, smooth_l1_loss, huber_loss, kl_div, and cross_entropy with class weights, ignore_index, label
// smoothing and class probabilities as targets. Reductions: minidl::kNone, kMean, kSum (kl_div also kBatchMean).
#include <cstdint>

#include "minidl/nn/functional.h"
#include "minidl/tensor.h"

#include "minidl/arg.h"

namespace minidl {
namespace nn {

struct BinaryCrossEntropyOptions {
  /// Rescales each element's loss; broadcasts to the input's shape.
  MINIDL_ARG(Tensor, weight);
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};
using BCELossOptions = BinaryCrossEntropyOptions;

struct BCEWithLogitsLossOptions {
  MINIDL_ARG(Tensor, weight);
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
  /// The weight of the positive term per class (broadcast over the input's last dim).
  MINIDL_ARG(Tensor, pos_weight);
};

struct L1LossOptions {
  L1LossOptions(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}  // NOLINT: LibTorch's
  MINIDL_ARG(Reduction, reduction);
};

struct SmoothL1LossOptions {
  SmoothL1LossOptions(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}  // NOLINT: LibTorch's
  MINIDL_ARG(Reduction, reduction);
  /// Where the loss turns from quadratic to linear; 0 gives l1_loss.
  MINIDL_ARG(double, beta) = 1.0;
};

struct HuberLossOptions {
  HuberLossOptions(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}  // NOLINT: LibTorch's
  MINIDL_ARG(Reduction, reduction);
  MINIDL_ARG(double, delta) = 1.0;
};

struct KLDivLossOptions {
  KLDivLossOptions(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}  // NOLINT: LibTorch's
  /// kBatchMean (the mathematical KL divergence per sample) divides the sum by the batch size.
  MINIDL_ARG(Reduction, reduction);
  /// Whether target holds log-probabilities.
  MINIDL_ARG(bool, log_target) = false;
};

struct CrossEntropyLossOptions {
  /// A weight per class (C elements).
  MINIDL_ARG(Tensor, weight);
  /// Targets of this class contribute neither loss nor gradient, nor count in the mean.
  MINIDL_ARG(std::int64_t, ignore_index) = -100;
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
  MINIDL_ARG(double, label_smoothing) = 0.0;
};

namespace functional {

using BinaryCrossEntropyFuncOptions = BinaryCrossEntropyOptions;
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsLossOptions;
using L1LossFuncOptions = L1LossOptions;
using SmoothL1LossFuncOptions = SmoothL1LossOptions;
using HuberLossFuncOptions = HuberLossOptions;
using KLDivFuncOptions = KLDivLossOptions;
using CrossEntropyFuncOptions = CrossEntropyLossOptions;

/// -w (t log(x) + (1 - t) log(1 - x)) with each log clamped at -100, as PyTorch; input and target of one shape.
/// Input values outside [0, 1] are a ValueError on the CPU (on the GPU they give NaN: checking needs a host read).
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& options = {});
/// From logits, stable for any input: (1 - t) x - (1 + (pos_weight - 1) t) log(sigmoid(x)), times weight.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& options = {});
/// |x - t|
Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options = {});
/// 0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (d = x - t).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& options = {});
/// 0.5 d^2 where |d| < delta, else delta (|d| - delta / 2).
Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossFuncOptions& options = {});
/// input: log-probabilities; target: probabilities (log-probabilities with log_target). Pointwise
/// t (log t - x), 0 where t = 0.
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivFuncOptions& options = {});
/// Cross entropy from logits with LibTorch's options. input (C), (N, C) or (N, C, d1, ...); target either class
/// indices (int64, the input's shape without C) or class probabilities (floating, the input's shape). The mean
/// divides by the summed weights of the targets not ignored (by N for probabilities), as PyTorch.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& options);

}  // namespace functional
}  // namespace nn

inline constexpr nn::Reduction kNone = nn::Reduction::None;
inline constexpr nn::Reduction kMean = nn::Reduction::Mean;
inline constexpr nn::Reduction kSum = nn::Reduction::Sum;
inline constexpr nn::Reduction kBatchMean = nn::Reduction::BatchMean;

}  // namespace minidl

