#include "autograd/node.h"

#include <atomic>

#include "autograd/anomaly.h"
#include "minidl/ops.h"

namespace minidl {
namespace autograd {

namespace {
std::atomic<std::uint64_t> g_sequence{0};
thread_local bool t_grad_enabled = true;
}  // namespace

bool grad_mode_enabled() { return t_grad_enabled; }
void set_grad_mode(bool enabled) { t_grad_enabled = enabled; }

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(g_sequence.fetch_add(1)) {}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  MINIDL_CHECK(fn_ != nullptr, AutogradError, "Trying to backward through the graph a second time (", name_,
               " has already freed its saved tensors); specify retain_graph=true on the first backward call "
               "if you need to backward twice");
  // Backward rules may hand a gradient to kernels that read contiguous memory; a view's backward (permute,
  // expand) can produce a strided one, so this is the one place that makes it contiguous, for every rule that was
  // not recorded as taking strides (record_strided).
  if (!strided_grad_ && !grad_output.is_contiguous()) {
    const Tensor dense = grad_output.contiguous();
    return fn_(dense);
  }
  return fn_(grad_output);
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad) {
  Tensor& slot = leaf_->grad;
  if (!slot.defined()) {
    // Keep the incoming buffer unless someone else still holds it (then in-place accumulation later would
    // change their tensor too).
    slot = !grad.unsafe_impl()->storage_exclusive() || !grad.is_contiguous() ? grad.clone() : grad;
  } else {
    slot.add_(grad);  // in place: a persistent grad buffer stays at one address (CUDA graphs rely on it)
  }
  if (!leaf_->post_accumulate_grad_hooks.empty()) {
    const auto hooks = leaf_->post_accumulate_grad_hooks;  // a copy: a hook may remove itself
    const Tensor leaf(leaf_);
    for (const auto& h : hooks) h.second(leaf);
  }
  return {};
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  TensorImpl* impl = leaf.unsafe_impl();
  if (auto existing = impl->grad_accumulator.lock()) return existing;
  auto node = std::make_shared<AccumulateGrad>(leaf.impl_ptr());
  impl->grad_accumulator = node;
  return node;
}

// Keeps the data (storage, offset, shape, dtype) but not the autograd identity: an op that saves its own output
// would otherwise form the cycle output -> grad_fn -> backward closure -> saved output, and every graph not
// released by a backward pass (inference without NoGradGuard, retain_graph, a failed backward) would leak. The
// version counter lives on the storage, so in-place changes are still detected; backward closures run without
// grad mode and never need the saved tensor's own history.
SavedTensor::SavedTensor(const Tensor& t, std::string op)
    : tensor_(t.defined() ? t.detach() : t), version_(t.defined() ? t.version() : 0), op_(std::move(op)) {}

Tensor SavedTensor::get() const {
  if (!tensor_.defined()) return tensor_;  // an optional input that was not given (an RNN's initial state)
  MINIDL_CHECK(tensor_.version() == version_, AutogradError,
               "one of the tensors needed for gradient computation by ", op_,
               " has been modified by an inplace operation: it was saved at version ", version_,
               " and is now at version ", tensor_.version());
  return tensor_;
}

Tensor record(Tensor output, const std::string& name, const std::vector<Tensor>& inputs, BackwardFn backward) {
  if (!grad_mode_enabled()) return output;
  bool any = false;
  for (const Tensor& in : inputs) any = any || (in.defined() && in.requires_grad());
  if (!any) return output;
  if (detect_anomaly()) anomaly::check_forward(output, name, inputs);
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  node->next_.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    if (!in.defined() || !in.requires_grad()) {
      node->next_.push_back(nullptr);
    } else if (in.grad_fn()) {
      node->next_.push_back(in.grad_fn());
    } else {
      node->next_.push_back(grad_accumulator(in));
    }
  }
  output.unsafe_impl()->grad_fn = std::move(node);  // ops always hand in a fresh impl of their own
  return output;
}

Tensor record_strided(Tensor output, const std::string& name, const std::vector<Tensor>& inputs, BackwardFn backward) {
  const Node* before = output.grad_fn().get();
  Tensor out = record(std::move(output), name, inputs, std::move(backward));
  const std::shared_ptr<Node> node = out.grad_fn();
  if (node && node.get() != before) static_cast<FunctionNode&>(*node).accept_strided_grad();
  return out;
}

}  // namespace autograd
}  // namespace minidl
