// Losses. cross_entropy is fused: one log-softmax pass forward, and a backward that writes
// (softmax - smoothed one-hot) * grad directly, never materialising the one-hot target.
#include "ops/op_utils.h"
#include "minidl/nn/functional.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

Tensor reduce(const Tensor& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean: return mean(losses);
  }
  return losses;
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
  check_classification(input_in, target_in, "cross_entropy");
  const Tensor input = ops::dense(input_in), target = ops::dense(target_in);
  MINIDL_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
               "cross_entropy: label_smoothing must be in [0, 1], found ", label_smoothing);
  Tensor log_probs;
  {
    NoGradGuard no_grad;
    log_probs = minidl::log_softmax(input, 1);
  }
  return loss_from_log_probs(input, log_probs, target, label_smoothing, true, reduction, "CrossEntropyBackward");
}

Tensor nll_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  check_classification(input_in, target_in, "nll_loss");
  const Tensor input = ops::dense(input_in), target = ops::dense(target_in);
  return loss_from_log_probs(input, input.detach(), target, 0.0, false, reduction, "NllLossBackward");
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  ops::check_same(input, target, "mse_loss");
  ops::check_floating(input, "mse_loss");
  MINIDL_CHECK(input.sizes() == target.sizes(), ValueError, "mse_loss: input shape ", shape_str(input.sizes()),
               " differs from target shape ", shape_str(target.sizes()));
  const Tensor d = input - target;
  return reduce(d * d, reduction);
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
