// any, all (bool reductions of every dtype: nonzero is true) and the whole-tensor comparisons allclose and equal,
// which return a host bool and so read their answer back from the device.
#include <limits>

#include "ops/reduce_utils.h"

namespace minidl {

using kernels::ReduceOp;

namespace {

Tensor logical_reduce(const Tensor& self, const std::vector<std::int64_t>& dims, bool keepdim, bool all_of) {
  // PyTorch keeps uint8 for uint8 inputs (its result type before bool tensors existed).
  const DType out = self.dtype() == kUInt8 ? kUInt8 : kBool;
  return ops::reduce_keepdim(self, dims, all_of ? ReduceOp::All : ReduceOp::Any, {}, out)
      .reshape(ops::reduced_shape(self.sizes(), dims, keepdim));
}

Tensor logical_reduce_dim(const Tensor& self, std::int64_t dim, bool keepdim, bool all_of, const char* op) {
  ops::check_defined(self, op, "self");
  const std::int64_t d = ops::wrap_dim(dim, self.dim(), op);
  return logical_reduce(self, self.dim() == 0 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{d}, keepdim,
                        all_of);
}

Tensor logical_reduce_dims(const Tensor& self, IntArrayRef dim, bool keepdim, bool all_of, const char* op) {
  ops::check_defined(self, op, "self");
  return logical_reduce(self, ops::reduction_dims(dim, self.dim(), op), keepdim, all_of);
}

}  // namespace

Tensor any(const Tensor& self) { return logical_reduce_dims(self, {}, false, false, "any"); }
Tensor any(const Tensor& self, std::int64_t dim, bool keepdim) {
  return logical_reduce_dim(self, dim, keepdim, false, "any");
}
Tensor any(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return logical_reduce_dims(self, dim, keepdim, false, "any");
}
Tensor all(const Tensor& self) { return logical_reduce_dims(self, {}, false, true, "all"); }
Tensor all(const Tensor& self, std::int64_t dim, bool keepdim) {
  return logical_reduce_dim(self, dim, keepdim, true, "all");
}
Tensor all(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return logical_reduce_dims(self, dim, keepdim, true, "all");
}

bool allclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  ops::check_same(self, other, "allclose");
  MINIDL_CHECK(rtol >= 0, ValueError, "allclose: expected 'rtol' >= 0, found ", rtol);
  MINIDL_CHECK(atol >= 0, ValueError, "allclose: expected 'atol' >= 0, found ", atol);
  broadcast_shapes(self.sizes(), other.sizes(), "allclose");
  NoGradGuard no_grad;
  if (self.dtype() == kBool) return all(eq(self, other)).item<bool>();
  // PyTorch's isclose: equal, or both NaN (equal_nan), or a finite difference within atol + rtol * |other|.
  // Integers compare in float64.
  const Tensor a = is_floating_point(self.dtype()) ? self : self.to(kFloat64);
  const Tensor b = is_floating_point(other.dtype()) ? other : other.to(kFloat64);
  Tensor close = eq(a, b);
  if (equal_nan) close = logical_or(close, logical_and(ne(a, a), ne(b, b)));
  const Tensor diff = abs(sub(a, b));
  const Tensor within =
      logical_and(lt(diff, std::numeric_limits<double>::infinity()), le(diff, add(mul(abs(b), rtol), atol)));
  return all(logical_or(close, within)).item<bool>();
}

bool equal(const Tensor& self, const Tensor& other) {
  ops::check_defined(self, "equal", "self");
  ops::check_defined(other, "equal", "other");
  MINIDL_CHECK(self.device() == other.device(), TypeError, "equal: expected both operands on the same device, found ",
               self.device(), " and ", other.device());
  if (self.sizes() != other.sizes()) return false;
  if (self.numel() == 0) return true;
  NoGradGuard no_grad;
  return all(eq(self, other)).item<bool>();
}

Tensor Tensor::any() const { return minidl::any(*this); }
Tensor Tensor::any(std::int64_t dim, bool keepdim) const { return minidl::any(*this, dim, keepdim); }
Tensor Tensor::any(IntArrayRef dim, bool keepdim) const { return minidl::any(*this, dim, keepdim); }
Tensor Tensor::all() const { return minidl::all(*this); }
Tensor Tensor::all(std::int64_t dim, bool keepdim) const { return minidl::all(*this, dim, keepdim); }
Tensor Tensor::all(IntArrayRef dim, bool keepdim) const { return minidl::all(*this, dim, keepdim); }
bool Tensor::allclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return minidl::allclose(*this, other, rtol, atol, equal_nan);
}
bool Tensor::equal(const Tensor& other) const { return minidl::equal(*this, other); }

}  // namespace minidl
