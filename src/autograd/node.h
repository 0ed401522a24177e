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
  /// Lets the rule take the incoming gradient with any strides (see record_strided).
  void accept_strided_grad() { strided_grad_ = true; }

 private:
  BackwardFn fn_;  // owns the tensors the op saved; dropped by release()
  bool strided_grad_ = false;
};

/// record() for a backward rule that takes an incoming gradient of any strides: one that hands it only to ops
/// (each reads any strides) or to kernels that take strides (elementwise, copy, the matmul family's layouts). The
/// engine passes such a rule the gradient as it is, instead of a contiguous copy: a view's backward (transpose,
/// permute) then costs nothing, and the copy happens once, at the first rule that needs dense memory.
Tensor record_strided(Tensor output, const std::string& name, const std::vector<Tensor>& inputs, BackwardFn backward);

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
