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

InplaceRecord::InplaceRecord(const Tensor& self, const char* op, const char* node, std::vector<Tensor> others)
    : node_(node) {
  // Integer results carry no gradient (as PyTorch treats non-differentiable outputs).
  if (!grad_mode_enabled() || !is_floating_point(self.dtype())) return;
  bool any = self.requires_grad();
  for (const Tensor& t : others) any = any || (t.defined() && t.requires_grad());
  if (!any) return;
  const TensorImpl& impl = *self.unsafe_impl();
  MINIDL_CHECK(impl.storage.use_count() == 1, AutogradError, op, ": in-place operation on a tensor whose storage is "
               "shared with other tensors (a view of it, or a copy an earlier operation saved for its backward pass) "
               "while autograd records; the other tensors' gradients would not see the change. Use the "
               "out-of-place operation, or NoGradGuard if no gradient is wanted");
  // A stand-in for self's previous value: only its history (the value itself is overwritten, and no backward
  // rule here needs it). No storage and no elements, so that it keeps nothing alive and anomaly detection,
  // which reads the inputs of an op with a non-finite output, skips it.
  auto before = std::make_shared<TensorImpl>(nullptr, 0, Shape{0}, impl.dtype);
  before->grad_fn = impl.grad_fn;
  inputs_.push_back(impl.grad_fn ? Tensor(before) : Tensor());
  for (Tensor& t : others) inputs_.push_back(std::move(t));
  active_ = true;
}

void InplaceRecord::finish(const Tensor& self, BackwardFn backward) const {
  if (active_) record(self, node_, inputs_, std::move(backward));
}

}  // namespace autograd
}  // namespace minidl
