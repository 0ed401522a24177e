#pragma once
// PyTorch's reset_parameters() of the linear and convolution layers: kaiming_uniform_(a=sqrt(5)) for the weight,
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias (fan_in from the weight's shape, dims 1 and up).
#include <cmath>

#include "minidl/nn/init.h"

namespace minidl {
namespace layers {
inline void default_init(Tensor& weight, Tensor& bias) {
  nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(nn::init::calculate_fan_in_and_fan_out(weight).first));
    nn::init::uniform_(bias, -bound, bound);
  }
}
}  // namespace layers
}  // namespace minidl
