#pragma once
// Concrete graph nodes: a closure-backed node for every op, and the node that accumulates into a leaf.
#include <memory>

#include "core/tensor_impl.h"

namespace minidl {
namespace autograd {

class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : Node(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  void release() override { fn_ = nullptr; }

 private:
  BackwardFn fn_;  // owns the tensors the op saved; dropped by release()
};

/// Sink of a leaf tensor: adds incoming gradients into leaf.grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const Tensor& grad) override;
  TensorImpl* leaf() const { return leaf_.get(); }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

/// The AccumulateGrad node of a leaf (created on first use, shared while the graph lives).
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace autograd
}  // namespace minidl
