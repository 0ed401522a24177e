#include "classifier_step.h"

namespace examples {

namespace F = minidl::nn::functional;

StepOutputs train_step(minidl::nn::Module& model, minidl::optim::Optimizer& optimizer, minidl::amp::GradScaler* scaler,
                       const std::optional<minidl::DType>& amp, const minidl::Device& device, const minidl::Tensor& x,
                       const minidl::Tensor& y) {
  StepOutputs out;
  {
    AmpRegion region(amp, device);
    out.logits = model.forward(x);
    out.loss = F::cross_entropy(out.logits, y);
  }
  if (scaler) {
    scaler->scale(out.loss).backward();
    scaler->step(optimizer);  // skipped on the device when a gradient is inf or NaN
    scaler->update();         // x0.5 after a skipped step, x2 after growth_interval clean ones
  } else {
    out.loss.backward();
    optimizer.step();
  }
  return out;
}

minidl::Tensor correct_count(const minidl::Tensor& logits, const minidl::Tensor& target) {
  return minidl::eq(minidl::argmax(logits, 1), target).sum();
}

}  // namespace examples
