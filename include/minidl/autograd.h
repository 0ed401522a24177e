#pragma once
// Reverse-mode automatic differentiation. An op that produces a tensor from inputs that require grad records
// a Node: the edges to its inputs' nodes and a closure that maps the output's gradient to the inputs'.
// backward() orders the graph topologically and runs the closures in reverse (micrograd's idea, kept legible).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "minidl/tensor.h"

namespace minidl {
namespace autograd {

/// One step of the recorded computation.
class Node {
 public:
  explicit Node(std::string name);
  virtual ~Node() = default;
  const std::string& name() const { return name_; }
  /// Nodes of the inputs (nullptr where an input needs no gradient).
  const std::vector<std::shared_ptr<Node>>& next_functions() const { return next_; }
  /// Maps the gradient of the output to one gradient per input (undefined where none flows).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  /// Frees what the node saved for backward; a later apply() is an AutogradError.
  virtual void release() {}
  std::uint64_t sequence_nr() const { return sequence_nr_; }

 protected:
  friend Tensor record(Tensor, const std::string&, const std::vector<Tensor>&,
                       std::function<std::vector<Tensor>(const Tensor&)>);
  std::string name_;
  std::vector<std::shared_ptr<Node>> next_;
  std::uint64_t sequence_nr_;
};

/// A tensor saved for backward, with the version it had when saved: get() fails if it was modified in place.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, std::string op);
  Tensor get() const;

 private:
  Tensor tensor_;
  std::uint64_t version_ = 0;
  std::string op_;
};

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

/// Connects `output` to `inputs` in the graph when grad mode is on and any input requires grad.
/// `backward` returns one gradient per input, each of that input's shape (or undefined). This is also the
/// way to add a user-defined differentiable op: compute the forward with any ops under NoGradGuard (or
/// with raw kernels), then record the backward rule here. Returns `output`.
Tensor record(Tensor output, const std::string& name, const std::vector<Tensor>& inputs, BackwardFn backward);

/// True when gradients are being recorded on this thread.
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

/// Runs backward from `roots` with their gradients; accumulates into the leaves' grad().
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph = false);

/// Finite-difference check of `fn`'s gradients at `inputs` (float64, central differences). For each input
/// that requires grad, compares the analytical Jacobian-vector products with numerical ones element by
/// element; returns true on success, or throws AutogradError naming the input, element and both values
/// when `raise` is true (the default), as PyTorch's gradcheck does. Also checks that two backward passes
/// give identical results.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  bool raise = true;
};
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               GradcheckOptions options = {});

/// Anomaly detection, for finding where a NaN or Inf comes from (as torch.autograd.set_detect_anomaly). While
/// on, the output of every op recorded in the graph and every gradient a node computes in backward are
/// checked, and the first one holding NaN or Inf throws AutogradError naming the op (its node), the pass
/// (forward or backward), the count and first position of the bad values, and whether its own inputs were
/// already bad. Each check reads the tensor back to the host (a CUDA tensor synchronises, and a CUDA graph
/// capture is refused): a debugging mode. Off by default; process-wide.
void set_detect_anomaly(bool enabled);
bool detect_anomaly();

/// Turns anomaly detection on (or off) in its scope and restores the previous setting.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true) : prev_(detect_anomaly()) { set_detect_anomaly(enabled); }
  ~DetectAnomalyGuard() { set_detect_anomaly(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace autograd

/// Disables gradient recording in its scope (like torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(autograd::grad_mode_enabled()) { autograd::set_grad_mode(false); }
  ~NoGradGuard() { autograd::set_grad_mode(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

using autograd::gradcheck;

}  // namespace minidl
