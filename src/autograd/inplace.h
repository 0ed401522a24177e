#pragma once
// Autograd for in-place operations (Tensor::add_, mul_, fill_, copy_, zero_, relu_), as PyTorch records them: after
// the write, the tensor gets a new grad_fn whose inputs are its previous history and the op's other tensors,
// so a gradient through the modified tensor flows back through what it was before. Without this, x * 2 followed
// by y.mul_(3) would back-propagate 2 instead of 6: a silently wrong gradient.
//
// Writing through a view (a narrow, select, transpose ... of a base tensor) records on the base as PyTorch's
// CopySlices does: the base's history gains the op for the view's region, and the view's history becomes that
// region of the base. A view of a leaf that requires grad raises, as in PyTorch. When the written storage is
// shared beyond the view and its base (another view, or a tensor an earlier op saved for backward), the other
// tensor's history would not see the write, so recording is refused with an AutogradError instead of producing
// a wrong gradient.
#include <cstdint>
#include <memory>
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
  // self's (or, for a view, its base's) previous history (a stand-in holding only its old grad_fn), then `others`
  std::vector<Tensor> inputs_;
  bool active_ = false;
  // Writing through a view: its base and the view's geometry in it (offset in elements from the base's start).
  std::shared_ptr<TensorImpl> base_;
  Shape view_sizes_, view_strides_;
  std::int64_t view_offset_ = 0;
};

}  // namespace autograd
}  // namespace minidl
