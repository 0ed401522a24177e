#include "autograd/anomaly.h"

#include <atomic>
#include <cmath>

#include "minidl/cuda.h"

namespace minidl {
namespace autograd {

namespace {

// Process-wide, as PyTorch's: the switch is flipped by a user for a whole run, not per thread.
std::atomic<bool> g_detect_anomaly{false};

struct NonFinite {
  std::int64_t count = 0;
  std::int64_t first = -1;  // flat index of the first NaN/Inf
  double first_value = 0.0;
};

template <class T>
NonFinite scan(const T* p, std::int64_t n) {
  NonFinite r;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isfinite(p[i])) continue;
    if (r.count++ == 0) {
      r.first = i;
      r.first_value = static_cast<double>(p[i]);
    }
  }
  return r;
}

NonFinite find_non_finite(const Tensor& t) {
  if (!t.defined() || !is_floating_point(t.dtype()) || t.numel() == 0) return {};
  MINIDL_CHECK(!cuda::is_capturing(), AutogradError,
               "detect_anomaly: cannot read a tensor back while a CUDA graph is being captured; turn anomaly "
               "detection off (set_detect_anomaly(false)) around the capture");
  NoGradGuard no_grad;
  const Tensor host = t.detach().cpu();
  return host.dtype() == kFloat32 ? scan(host.data_ptr<float>(), host.numel())
                                  : scan(host.data_ptr<double>(), host.numel());
}

std::string describe(const NonFinite& f, const Tensor& t) {
  return detail::str(f.count, " of ", t.numel(), " values are NaN or Inf (the first, at flat index ", f.first,
                     ", is ", f.first_value, "; shape ", shape_str(t.sizes()), ", ", t.dtype(), " on ", t.device(),
                     ")");
}

// Indices of the tensors that hold NaN or Inf, e.g. "0, 2"; empty when all are finite.
std::string non_finite_indices(const std::vector<Tensor>& ts) {
  std::string out;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (find_non_finite(ts[i]).count > 0) out += (out.empty() ? "" : ", ") + std::to_string(i);
  }
  return out;
}

// "LogBackward" -> "Log": nodes are named after the op whose backward they run.
std::string op_of(const std::string& node_name) {
  const std::string suffix = "Backward";
  const bool has_suffix = node_name.size() > suffix.size() &&
                          node_name.compare(node_name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return has_suffix ? node_name.substr(0, node_name.size() - suffix.size()) : node_name;
}

}  // namespace

void set_detect_anomaly(bool enabled) { g_detect_anomaly.store(enabled); }
bool detect_anomaly() { return g_detect_anomaly.load(std::memory_order_relaxed); }

namespace anomaly {

void check_forward(const Tensor& output, const std::string& node_name, const std::vector<Tensor>& inputs) {
  const NonFinite f = find_non_finite(output);
  if (f.count == 0) return;
  const std::string bad_inputs = non_finite_indices(inputs);
  throw AutogradError(detail::str(
      "detect_anomaly: forward pass: op ", op_of(node_name), " (autograd node ", node_name,
      ") produced a non-finite output: ", describe(f, output), "; ",
      bad_inputs.empty() ? std::string("every input is finite, so this op is where the NaN/Inf first appears")
                         : "input(s) " + bad_inputs +
                               " already held NaN/Inf (made outside the graph, or by an op that records no node)"));
}

void check_backward(const Node& node, const Tensor& grad_output, const std::vector<Tensor>& input_grads) {
  for (std::size_t i = 0; i < input_grads.size(); ++i) {
    const NonFinite f = find_non_finite(input_grads[i]);
    if (f.count == 0) continue;
    const bool incoming_finite = find_non_finite(grad_output).count == 0;
    throw AutogradError(detail::str(
        "detect_anomaly: backward pass: node ", node.name(), " (the backward of op ", op_of(node.name()),
        ") returned a non-finite gradient for its input ", i, ": ", describe(f, input_grads[i]), "; ",
        incoming_finite ? "the gradient it received was finite, so this node is where the NaN/Inf first appears"
                        : "the gradient it received already held NaN/Inf"));
  }
}

}  // namespace anomaly
}  // namespace autograd
}  // namespace minidl
