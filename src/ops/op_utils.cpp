#include "ops/op_utils.h"

#include <algorithm>

#include "minidl/autograd.h"

namespace minidl {
namespace ops {

void check_defined(const Tensor& t, const char* op, const char* arg) {
  MINIDL_CHECK(t.defined(), ValueError, op, ": argument '", arg, "' is an undefined tensor");
}

void check_same(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "self");
  check_defined(b, op, "other");
  MINIDL_CHECK(a.device() == b.device(), TypeError, op, ": expected both operands on the same device, found ",
               a.device(), " (shape ", shape_str(a.sizes()), ") and ", b.device(), " (shape ",
               shape_str(b.sizes()), ")");
  MINIDL_CHECK(a.dtype() == b.dtype(), TypeError, op, ": expected both operands of the same dtype, found ", a.dtype(),
               " (shape ", shape_str(a.sizes()), ") and ", b.dtype(), " (shape ", shape_str(b.sizes()), ")");
}

void check_floating(const Tensor& t, const char* op) {
  MINIDL_CHECK(is_floating_point(t.dtype()), TypeError, op, ": expected a floating tensor, found ", t.dtype());
}

const Tensor& check_integral_divisor(const Tensor& b, const char* op) {
  if (b.is_cpu() && is_integral(b.dtype(), true) && b.numel() > 0) {
    const Tensor zero = eq(b, 0);
    MINIDL_CHECK(!any_true(zero), ValueError, op, ": integer division by zero (a divisor element is 0)");
  }
  return b;
}

Tensor dense(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

bool any_true(const Tensor& mask) {
  for (bool v : mask.to_vector<bool>()) {
    if (v) return true;
  }
  return false;
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op) {
  const std::int64_t n = std::max<std::int64_t>(ndim, 1);
  MINIDL_CHECK(dim >= -n && dim < n, IndexError, op, ": dimension out of range (expected to be in [", -n, ", ", n - 1,
               "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::vector<std::int64_t> normalize_dims(const std::vector<std::int64_t>& dims, std::int64_t ndim, const char* op) {
  std::vector<std::int64_t> r;
  if (dims.empty()) {
    for (std::int64_t d = 0; d < ndim; ++d) r.push_back(d);
    return r;
  }
  for (std::int64_t d : dims) r.push_back(wrap_dim(d, ndim, op));
  std::sort(r.begin(), r.end());
  MINIDL_CHECK(std::adjacent_find(r.begin(), r.end()) == r.end(), ValueError, op, ": a dimension appears twice in the "
               "list of dims");
  return r;
}

std::int64_t prod(const Shape& s, std::size_t begin, std::size_t end) {
  std::int64_t p = 1;
  for (std::size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

Tensor empty_as(const Shape& shape, const Tensor& t) {
  return empty(shape, TensorOptions(t.dtype()).device(t.device()));
}

Tensor binary_grad(kernels::BinaryOp op, const kernels::OpScalars& s, const Tensor& g, const Tensor& saved) {
  Tensor out = empty_as(g.sizes(), g);
  MINIDL_ON_BACKEND(g.device(), binary(op, s, g, saved, out));
  return out;
}

Tensor binary_grad_reusing(kernels::BinaryOp op, double alpha, const Tensor& g, const Tensor& saved) {
  const bool exclusive = g.impl_ptr().use_count() == 1 && g.unsafe_impl()->storage_exclusive() &&
                         !autograd::detect_anomaly();
  if (!exclusive) return binary_grad(op, alpha, g, saved);
  Tensor out = g;  // the same buffer; `g` is the caller's last use of it
  MINIDL_ON_BACKEND(g.device(), binary(op, alpha, g, saved, out));
  return out;
}

Tensor gemm(const Tensor& a, const Tensor& b, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
            bool trans_a, bool trans_b, const Shape& out_shape) {
  Tensor out = empty_as(out_shape, a);
  MINIDL_ON_BACKEND(a.device(), matmul(a, b, out, batch, m, n, k, trans_a, trans_b));
  return out;
}

Tensor expand_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  Tensor out = empty_as(shape, g);
  MINIDL_ON_BACKEND(g.device(), binary(kernels::BinaryOp::First, 0.0, g, g, out));
  return out;
}

}  // namespace ops
}  // namespace minidl
