#pragma once
// Autograd for in-place operations (Tensor::add_, mul_, fill_, copy_, zero_, relu_), as PyTorch records them: after
// the write, the tensor gets a new grad_fn whose inputs are its previous history and the op's other tensors,
// so a gradient through the modified tensor flows back through what it was before. Without this, x * 2 followed
// by y.mul_(3) would back-propagate 2 instead of 6: a silently wrong gradient.
//
// minidl has no view tracking (PyTorch's CopySlices): when the written storage is shared with another tensor
// (a view, or a tensor an earlier op saved for backward), the other tensor's history would not see the write,
// so recording is refused with an AutogradError instead of producing a wrong gradient.
#include <vector>

#include "minidl/autograd.h"
#include "minidl/tensor.h"

namespace minidl {
namespace autograd {

/// Throws AutogradError when `t` is a leaf that requires grad and grad mode is on (PyTorch's rule: its value is
/// what the gradient is taken with respect to).
void check_inplace_allowed(const Tensor& t, const char* op);
/// Marks `t`'s storage as written (SavedTensor compares versions before a backward rule uses a saved tensor).
void bump_version(const Tensor& t);

class InplaceRecord {
 public:
  /// Call before the write of `op` (e.g. "mul_"), whose node will be called `node`. Records nothing when grad
  /// mode is off or neither `self` nor `others` requires grad; throws AutogradError when it would have to record
  /// and `self`'s storage is shared.
  InplaceRecord(const Tensor& self, const char* op, const char* node, std::vector<Tensor> others = {});
  /// Call after the write: `backward(g)` returns the gradients for self's previous value and for each of
  /// `others`, in order (an undefined tensor for none).
  void finish(const Tensor& self, BackwardFn backward) const;

 private:
  const char* node_;
  std::vector<Tensor> inputs_;  // self's previous history (a stand-in holding only its old grad_fn), then `others`
  bool active_ = false;
};

}  // namespace autograd
}  // namespace minidl
