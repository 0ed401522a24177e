#include "autograd/inplace.h"

#include <memory>
#include <utility>

#include "core/tensor_impl.h"
#include "minidl/errors.h"

namespace minidl {
namespace autograd {

void check_inplace_allowed(const Tensor& t, const char* op) {
  MINIDL_CHECK(!(grad_mode_enabled() && t.requires_grad() && t.is_leaf()), AutogradError, op,
               ": a leaf tensor that requires grad is being used in an in-place operation (wrap it in NoGradGuard)");
}

void bump_version(const Tensor& t) { t.unsafe_impl()->storage->version.fetch_add(1); }

namespace {
/// A stand-in for a tensor's previous value: only its history (the value itself is overwritten, and no backward
/// rule here needs it). No storage and no elements, so that it keeps nothing alive and anomaly detection,
/// which reads the inputs of an op with a non-finite output, skips it. Undefined when there is no history.
Tensor history_of(const TensorImpl& impl) {
  if (!impl.grad_fn) return Tensor();
  auto before = std::make_shared<TensorImpl>(nullptr, 0, Shape{0}, impl.dtype);
  before->grad_fn = impl.grad_fn;
  return Tensor(before);
}
}  // namespace

InplaceRecord::InplaceRecord(const Tensor& self, const char* op, const char* node, std::vector<Tensor> others)
    : node_(node) {
  // Integer results carry no gradient (as PyTorch treats non-differentiable outputs).
  if (!grad_mode_enabled() || !is_floating_point(self.dtype())) return;
  bool any = self.requires_grad();
  for (const Tensor& t : others) any = any || (t.defined() && t.requires_grad());
  if (!any) return;
  const TensorImpl& impl = *self.unsafe_impl();
  if (impl.view_base) {
    // Writing through a view changes its base: the base's history gains the op (PyTorch's CopySlices).
    const TensorImpl& base = *impl.view_base;
    MINIDL_CHECK(!(base.requires_grad && !base.grad_fn), AutogradError, op, ": a view of a leaf tensor that requires "
                 "grad is being used in an in-place operation (wrap it in NoGradGuard, or clone the leaf first)");
    MINIDL_CHECK(impl.storage.use_count() == 2 && base.contiguous, AutogradError, op, ": in-place operation on a view "
                 "whose storage other tensors share too (another view of the same base, or a copy an earlier "
                 "operation saved) while autograd records; their gradients would not see the change. Use the "
                 "out-of-place operation, or NoGradGuard if no gradient is wanted");
    base_ = impl.view_base;
    view_sizes_ = impl.shape;
    view_strides_ = impl.strides;
    view_offset_ = static_cast<std::int64_t>((impl.byte_offset - base.byte_offset) / element_size(impl.dtype));
    inputs_.push_back(history_of(base));
  } else {
    MINIDL_CHECK(impl.storage_exclusive(), AutogradError, op, ": in-place operation on a tensor whose storage "
                 "is shared with other tensors (a view of it, or a copy an earlier operation saved for its backward "
                 "pass) while autograd records; the other tensors' gradients would not see the change. Use the "
                 "out-of-place operation, or NoGradGuard if no gradient is wanted");
    inputs_.push_back(history_of(impl));
  }
  for (Tensor& t : others) inputs_.push_back(std::move(t));
  active_ = true;
}

void InplaceRecord::finish(const Tensor& self, BackwardFn backward) const {
  if (!active_) return;
  if (!base_) {
    record(self, node_, inputs_, std::move(backward));
    return;
  }
  // The base's new value: its old value outside the view's region, the op's result inside it. Its gradient g
  // passes unchanged outside the region; inside, the op's backward maps g's region to the view's old value (back
  // into the region) and to the op's other operands.
  const Tensor base(base_);
  const Shape sizes = view_sizes_, strides = view_strides_, base_shape = base_->shape;
  const std::int64_t offset = view_offset_;
  record(base, "CopySlices", inputs_, [=](const Tensor& g) {
    Tensor result = g.clone();
    Tensor region = result.as_strided(sizes, strides, offset);
    // A copy: the op's gradients may be the incoming one itself, and the region is overwritten next.
    std::vector<Tensor> grads = backward(region.clone());
    if (grads[0].defined()) {
      region.copy_(grads[0]);
    } else {
      region.zero_();
    }
    grads[0] = result;
    return grads;
  });
  // The view's own history: the region of the base's new value.
  record(self, "AsStridedBackward", {base}, [=](const Tensor& g) {
    Tensor dx = zeros(base_shape, TensorOptions(g.dtype()).device(g.device()));
    dx.as_strided(sizes, strides, offset).copy_(g);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace autograd
}  // namespace minidl
