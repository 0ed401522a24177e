// diag and trace, composed from the diagonal view (ops/view.cpp): their gradients are the view's and the copy's or
// the sum's, so they run on every device and dtype the copy and the sum take.
#include "minidl/factories.h"
#include "minidl/ops.h"
#include "minidl/reduction.h"
#include "ops/op_utils.h"

namespace minidl {

Tensor diag(const Tensor& a, std::int64_t diagonal) {
  ops::check_defined(a, "diag", "self");
  MINIDL_CHECK(a.dim() == 1 || a.dim() == 2, ValueError, "diag: expected a 1-D or 2-D tensor, found shape ",
               shape_str(a.sizes()));
  if (a.dim() == 2) return a.diagonal(diagonal).clone();
  const std::int64_t n = a.size(0) + (diagonal < 0 ? -diagonal : diagonal);
  Tensor out = zeros({n, n}, TensorOptions(a.dtype()).device(a.device()));
  out.diagonal(diagonal).copy_(a);  // records the copy: the gradient of a is the diagonal of out's
  return out;
}

Tensor trace(const Tensor& a) {
  ops::check_defined(a, "trace", "self");
  MINIDL_CHECK(a.dim() == 2, ValueError, "trace: expected a matrix, found shape ", shape_str(a.sizes()));
  return a.diagonal().sum();
}

Tensor Tensor::diag(std::int64_t diagonal) const { return minidl::diag(*this, diagonal); }
Tensor Tensor::trace() const { return minidl::trace(*this); }

}  // namespace minidl
