#pragma once
// One training step of an image classifier (examples/mnist's CNN, examples/resnet's ResNet-18) and its count of
// correct predictions: cross entropy on the logits, under --amp's autocast when one is chosen
// (examples/common/amp_mode.h has the recipe). Nothing here clips gradients; a caller that does must call
// scaler->unscale_(optimizer) before clipping.
#include <minidl/amp/grad_scaler.h>
#include <minidl/minidl.h>

#include <optional>

#include "amp_mode.h"

namespace examples {

/// The logits and the (float32, unscaled) loss of one training step.
struct StepOutputs {
  minidl::Tensor logits, loss;
};

/// One training step on gradients zeroed by the caller: forward and cross-entropy loss under autocast to `amp` on
/// `device`'s type (plain float32 when none), backward, and the optimizer's update (through `scaler` when given:
/// scale, backward, step, update).
StepOutputs train_step(minidl::nn::Module& model, minidl::optim::Optimizer& optimizer, minidl::amp::GradScaler* scaler,
                       const std::optional<minidl::DType>& amp, const minidl::Device& device, const minidl::Tensor& x,
                       const minidl::Tensor& y);

/// Number of correct predictions (the argmax of each row of `logits` equal to its `target`) in a batch, as a 0-d
/// tensor on the device.
minidl::Tensor correct_count(const minidl::Tensor& logits, const minidl::Tensor& target);

}  // namespace examples
