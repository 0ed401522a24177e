#pragma once
// The checks behind set_detect_anomaly() (minidl/autograd.h). record() and the engine call them only while
// detection is on; each reads the tensor back to the host.
#include <string>
#include <vector>

#include "minidl/autograd.h"

namespace minidl {
namespace autograd {
namespace anomaly {

/// Throws AutogradError when `output` of the op recorded as node `node_name` holds NaN or Inf, saying whether
/// any of `inputs` already did.
void check_forward(const Tensor& output, const std::string& node_name, const std::vector<Tensor>& inputs);
/// Throws AutogradError when one of the gradients `node` returned for its inputs holds NaN or Inf, saying
/// whether the gradient it received already did.
void check_backward(const Node& node, const Tensor& grad_output, const std::vector<Tensor>& input_grads);

}  // namespace anomaly
}  // namespace autograd
}  // namespace minidl
