// Losses. cross_entropy without options is fused: one log-softmax pass forward, and a backward that writes
// (softmax - smoothed one-hot) * grad directly, never materialising the one-hot target.
#include "autocast/policy.h"
#include "layers/lowp.h"
#include "ops/op_utils.h"
#include "minidl/nn/functional.h"
#include "minidl/nn/modules/loss.h"
#include "minidl/indexing.h"
#include "minidl/joining.h"
#include "minidl/math.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

Tensor reduce(const Tensor& losses, Reduction reduction, const char* op = "loss") {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean: return mean(losses);
    case Reduction::BatchMean: break;
  }
  throw ValueError(
      ::minidl::detail::str(op, ": reduction kBatchMean is kl_div's alone (use kMean, kSum or kNone)"));
}

void check_classification(const Tensor& input, const Tensor& target, const char* op) {
  ops::check_defined(input, op, "input");
  ops::check_defined(target, op, "target");
  ops::check_floating(input, op);
  MINIDL_CHECK(input.dim() == 2, ValueError, op, ": input must be (N, C), found shape ", shape_str(input.sizes()));
  MINIDL_CHECK(target.dtype() == kInt64, TypeError, op, ": target must be int64 class indices, found ", target.dtype());
  MINIDL_CHECK(target.dim() == 1 && target.size(0) == input.size(0), ValueError, op, ": target must have shape [",
               input.size(0), "], found ", shape_str(target.sizes()));
  MINIDL_CHECK(target.device() == input.device(), TypeError, op, ": input is on ", input.device(), ", target on ",
               target.device());
}

/// cross_entropy and nll_loss from log-probabilities (the backward rule of either: from logits, or from the
/// log-probabilities themselves): per sample, or reduced (mean or sum) in the loss's own pass, with a backward
/// that scales in its own pass too. Per-sample losses, then sum, then scale forward, and scale, expand, then the
/// rule backward, were seven kernels of a GPU training step where the reduced loss takes two (counted under
/// Nsight Compute).
Tensor loss_from_log_probs(const Tensor& input, const Tensor& log_probs, const Tensor& target, double smoothing,
                           bool from_logits, Reduction reduction, const char* name) {
  const std::int64_t n = input.size(0);
  MINIDL_CHECK(reduction != Reduction::BatchMean, ValueError, from_logits ? "cross_entropy" : "nll_loss",
               ": reduction kBatchMean is kl_div's alone (use kMean, kSum or kNone)");
  double scale = 1.0;
  Tensor loss;
  if (reduction == Reduction::None) {
    loss = ops::empty_as({n}, input);
    MINIDL_ON_BACKEND(input.device(), cross_entropy_loss(log_probs, target, smoothing, loss));
  } else {
    MINIDL_CHECK(reduction != Reduction::Mean || n > 0, ValueError, from_logits ? "cross_entropy" : "nll_loss",
                 ": the mean over a batch of 0 samples is undefined");
    if (reduction == Reduction::Mean) scale = 1.0 / static_cast<double>(n);
    loss = ops::empty_as({}, input);
    MINIDL_ON_BACKEND(input.device(), cross_entropy_loss_sum(log_probs, target, smoothing, scale, loss));
  }
  return autograd::record(loss, name, {input}, [=](const Tensor& g) {
    Tensor dx = ops::empty_as(log_probs.sizes(), g);
    MINIDL_ON_BACKEND(g.device(), cross_entropy_backward(log_probs, target, g, smoothing, from_logits, scale, dx));
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

Tensor cross_entropy(const Tensor& input_in, const Tensor& target_in, Reduction reduction, double label_smoothing) {
  MINIDL_AUTOCAST(cross_entropy, input_in, target_in, reduction, label_smoothing);
  check_classification(input_in, target_in, "cross_entropy");
  const Tensor input = ops::dense(input_in), target = ops::dense(target_in);
  MINIDL_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
               "cross_entropy: label_smoothing must be in [0, 1], found ", label_smoothing);
  if (layers::needs_float_path(input, true)) {
    return cross_entropy(layers::widen(input), target, reduction, label_smoothing).to(input.dtype());
  }
  Tensor log_probs;
  {
    NoGradGuard no_grad;
    log_probs = minidl::log_softmax(input, 1);
  }
  return loss_from_log_probs(input, log_probs, target, label_smoothing, true, reduction, "CrossEntropyBackward");
}

Tensor nll_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  MINIDL_AUTOCAST(nll_loss, input_in, target_in, reduction);
  check_classification(input_in, target_in, "nll_loss");
  const Tensor input = ops::dense(input_in), target = ops::dense(target_in);
  if (layers::needs_float_path(input, true)) return nll_loss(layers::widen(input), target, reduction).to(input.dtype());
  return loss_from_log_probs(input, input.detach(), target, 0.0, false, reduction, "NllLossBackward");
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  MINIDL_AUTOCAST(mse_loss, input, target, reduction);
  ops::check_same(input, target, "mse_loss");
  ops::check_floating(input, "mse_loss");
  MINIDL_CHECK(input.sizes() == target.sizes(), ValueError, "mse_loss: input shape ", shape_str(input.sizes()),
               " differs from target shape ", shape_str(target.sizes()));
  const Tensor d = input - target;
  return reduce(d * d, reduction, "mse_loss");
}


namespace {

/// The checks of a loss comparing input and target element by element: defined, floating, one device, one shape.
void check_pointwise(const Tensor& input, const Tensor& target, const char* op) {
  ops::check_defined(input, op, "input");
  ops::check_defined(target, op, "target");
  ops::check_floating(input, op);
  MINIDL_CHECK(is_floating_point(target.dtype()), TypeError, op, ": target must be floating, found ", target.dtype());
  MINIDL_CHECK(target.device() == input.device(), TypeError, op, ": input is on ", input.device(), ", target on ",
               target.device());
  MINIDL_CHECK(input.sizes() == target.sizes(), ValueError, op, ": target shape ", shape_str(target.sizes()),
               " differs from input shape ", shape_str(input.sizes()));
}

/// An optional weight (undefined: none) that must broadcast to `shape`, on the input's device.
void check_weight(const Tensor& weight, const Tensor& input, const char* op, const char* arg) {
  if (!weight.defined()) return;
  MINIDL_CHECK(is_floating_point(weight.dtype()), TypeError, op, ": ", arg, " must be floating, found ",
               weight.dtype());
  MINIDL_CHECK(weight.device() == input.device(), TypeError, op, ": input is on ", input.device(), ", ", arg, " on ",
               weight.device());
  const Shape& w = weight.sizes();
  const Shape& x = input.sizes();
  bool ok = w.size() <= x.size();
  for (std::size_t i = 0; ok && i < w.size(); ++i) {
    const std::int64_t wi = w[w.size() - 1 - i], xi = x[x.size() - 1 - i];
    ok = wi == 1 || wi == xi;
  }
  MINIDL_CHECK(ok, ValueError, op, ": ", arg, " of shape ", shape_str(w), " does not broadcast to the input's shape ",
               shape_str(x));
}

Tensor weighted(const Tensor& losses, const Tensor& weight) { return weight.defined() ? losses * weight : losses; }

}  // namespace

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BinaryCrossEntropyFuncOptions& o) {
  MINIDL_AUTOCAST(binary_cross_entropy, input, target, o);
  const char* op = "binary_cross_entropy";
  check_pointwise(input, target, op);
  check_weight(o.weight(), input, op, "weight");
  if (!input.is_cuda() && input.numel() > 0) {
    // PyTorch's check; on the CPU the read costs no synchronisation.
    const bool outside = any(logical_or(input.detach().lt(0.0), input.detach().gt(1.0))).item<bool>();
    MINIDL_CHECK(!outside, ValueError, op, ": all elements of input should be between 0 and 1");
  }
  const Tensor log_x = clamp_min(log(input), -100.0), log_1mx = clamp_min(log1p(-input), -100.0);
  const Tensor losses = -(target * log_x + (1.0 - target) * log_1mx);
  return reduce(weighted(losses, o.weight()), o.reduction(), op);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& o) {
  MINIDL_AUTOCAST(binary_cross_entropy_with_logits, input, target, o);
  const char* op = "binary_cross_entropy_with_logits";
  check_pointwise(input, target, op);
  check_weight(o.weight(), input, op, "weight");
  check_weight(o.pos_weight(), input, op, "pos_weight");
  Tensor log_sig = logsigmoid(input);
  if (o.pos_weight().defined()) log_sig = log_sig * ((o.pos_weight() - 1.0) * target + 1.0);
  const Tensor losses = (1.0 - target) * input - log_sig;
  return reduce(weighted(losses, o.weight()), o.reduction(), op);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& o) {
  MINIDL_AUTOCAST(l1_loss, input, target, o);
  check_pointwise(input, target, "l1_loss");
  return reduce(abs(input - target), o.reduction(), "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& o) {
  MINIDL_AUTOCAST(smooth_l1_loss, input, target, o);
  const char* op = "smooth_l1_loss";
  check_pointwise(input, target, op);
  const double beta = o.beta();
  MINIDL_CHECK(beta >= 0.0, ValueError, op, ": beta must be non-negative, found ", beta);
  if (beta == 0.0) return reduce(abs(input - target), o.reduction(), op);
  const Tensor d = abs(input - target);
  return reduce(where(d.lt(beta), 0.5 * d * d / beta, d - 0.5 * beta), o.reduction(), op);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossFuncOptions& o) {
  MINIDL_AUTOCAST(huber_loss, input, target, o);
  const char* op = "huber_loss";
  check_pointwise(input, target, op);
  const double delta = o.delta();
  MINIDL_CHECK(delta > 0.0, ValueError, op, ": delta must be positive, found ", delta);
  const Tensor d = abs(input - target);
  return reduce(where(d.lt(delta), 0.5 * d * d, delta * (d - 0.5 * delta)), o.reduction(), op);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivFuncOptions& o) {
  MINIDL_AUTOCAST(kl_div, input, target, o);
  const char* op = "kl_div";
  check_pointwise(input, target, op);
  const Tensor losses = o.log_target() ? exp(target) * (target - input)
                                       : target * (log(where(target.eq(0.0), 1.0, target)) - input);
  if (o.reduction() != Reduction::BatchMean) return reduce(losses, o.reduction(), op);
  MINIDL_CHECK(input.dim() > 0, ValueError, op, ": kBatchMean needs an input with a batch dimension, found a 0-d one");
  return sum(losses) / static_cast<double>(input.size(0));
}

Tensor cross_entropy(const Tensor& input_in, const Tensor& target, const CrossEntropyFuncOptions& o) {
  MINIDL_AUTOCAST(cross_entropy, input_in, target, o);
  const char* op = "cross_entropy";
  ops::check_defined(input_in, op, "input");
  ops::check_defined(target, op, "target");
  ops::check_floating(input_in, op);
  MINIDL_CHECK(input_in.dim() >= 1, ValueError, op, ": input must be (C), (N, C) or (N, C, d1, ...), found a 0-d one");
  MINIDL_CHECK(target.device() == input_in.device(), TypeError, op, ": input is on ", input_in.device(),
               ", target on ", target.device());
  MINIDL_CHECK(o.reduction() != Reduction::BatchMean, ValueError, op,
               ": reduction kBatchMean is kl_div's alone (use kMean, kSum or kNone)");
  const double eps = o.label_smoothing();
  MINIDL_CHECK(eps >= 0.0 && eps <= 1.0, ValueError, op, ": label_smoothing must be in [0, 1], found ", eps);
  const std::int64_t class_dim = input_in.dim() == 1 ? 0 : 1, c = input_in.size(class_dim);
  const Tensor& weight = o.weight();
  if (weight.defined()) {
    MINIDL_CHECK(weight.dim() == 1 && weight.numel() == c, ValueError, op, ": weight must have one element per class (",
                 c, "), found shape ", shape_str(weight.sizes()));
    MINIDL_CHECK(weight.dtype() == input_in.dtype(), TypeError, op, ": weight must have the input's dtype (",
                 input_in.dtype(), "), found ", weight.dtype());
    MINIDL_CHECK(weight.device() == input_in.device(), TypeError, op, ": input is on ", input_in.device(),
                 ", weight on ", weight.device());
  }
  const Tensor log_probs = minidl::log_softmax(input_in, class_dim);

  if (is_floating_point(target.dtype())) {  // class probabilities
    MINIDL_CHECK(target.sizes() == input_in.sizes(), ValueError, op, ": probability targets must have the input's ",
                 "shape ", shape_str(input_in.sizes()), ", found ", shape_str(target.sizes()));
    MINIDL_CHECK(o.ignore_index() < 0, ValueError, op, ": ignore_index (", o.ignore_index(),
                 ") is not supported for probability targets");
    const Tensor t = eps > 0.0 ? target * (1.0 - eps) + eps / static_cast<double>(c) : target;
    Tensor prod = log_probs * t;
    if (weight.defined()) {
      Shape w_shape(static_cast<std::size_t>(input_in.dim() - class_dim), 1);
      w_shape[0] = c;
      prod = prod * weight.reshape(w_shape);
    }
    switch (o.reduction()) {
      case Reduction::None: return -sum(prod, {class_dim});
      case Reduction::Sum: return -sum(prod);
      default: return -sum(prod) / static_cast<double>(input_in.numel() / std::max<std::int64_t>(c, 1));
    }
  }

  MINIDL_CHECK(target.dtype() == kInt64, TypeError, op, ": target must be int64 class indices or floating class ",
               "probabilities, found ", target.dtype());
  Shape expected = input_in.sizes();
  expected.erase(expected.begin() + class_dim);
  MINIDL_CHECK(target.sizes() == expected, ValueError, op, ": class-index targets must have shape ",
               shape_str(expected), " for input ", shape_str(input_in.sizes()), ", found ", shape_str(target.sizes()));
  // Rows of (M, C): the class dim last.
  std::vector<std::int64_t> class_last{0};
  for (std::int64_t d = 2; d < input_in.dim(); ++d) class_last.push_back(d);
  class_last.push_back(1);
  const Tensor lp = input_in.dim() == 1   ? log_probs.unsqueeze(0)
                    : input_in.dim() == 2 ? log_probs
                                          : log_probs.permute(class_last).reshape({-1, c});
  const Tensor t = target.reshape({-1});
  const Tensor ignored = t.eq(o.ignore_index());
  const Tensor safe = masked_fill(t, ignored, 0);
  Tensor picked;
  try {
    picked = gather(lp, 1, safe.unsqueeze(1)).squeeze(1);
  } catch (const IndexError& e) {
    throw IndexError(
        ::minidl::detail::str(op, ": a target class is out of range for ", c, " classes (", e.what(), ")"));
  }
  Tensor w = logical_not(ignored).to(lp.dtype());
  if (weight.defined()) w = w * index_select(weight, 0, safe);
  Tensor losses = -(picked * w);
  if (eps > 0.0) {
    const Tensor smooth = -minidl::sum(weight.defined() ? lp * weight : lp, {1}) * logical_not(ignored).to(lp.dtype());
    losses = (1.0 - eps) * losses + (eps / static_cast<double>(c)) * smooth;
  }
  switch (o.reduction()) {
    case Reduction::None: return losses.reshape(target.sizes());
    case Reduction::Sum: return sum(losses);
    default: return sum(losses) / sum(w);
  }
}
}  // namespace functional
}  // namespace nn
}  // namespace minidl

namespace minidl {
namespace nn {

// The weights live as buffers (moved by to()); forward passes them in place of the options' copies.
BCELossImpl::BCELossImpl(const BCELossOptions& o) : LossImpl(o, "BCELoss") {
  if (options.weight().defined()) weight = register_buffer("weight", options.weight());
}
Tensor BCELossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy(input, target, BCELossOptions(options).weight(weight));
}

BCEWithLogitsLossImpl::BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& o) : LossImpl(o, "BCEWithLogitsLoss") {
  if (options.weight().defined()) weight = register_buffer("weight", options.weight());
  if (options.pos_weight().defined()) pos_weight = register_buffer("pos_weight", options.pos_weight());
}
Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy_with_logits(
      input, target, BCEWithLogitsLossOptions(options).weight(weight).pos_weight(pos_weight));
}

CrossEntropyLossImpl::CrossEntropyLossImpl(const CrossEntropyLossOptions& o) : LossImpl(o, "CrossEntropyLoss") {
  if (options.weight().defined()) weight = register_buffer("weight", options.weight());
}
Tensor CrossEntropyLossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::cross_entropy(input, target, CrossEntropyLossOptions(options).weight(weight));
}

}  // namespace nn
}  // namespace minidl
