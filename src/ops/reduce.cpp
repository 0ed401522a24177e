// Reductions: sum, mean, max (with the position of the maximum for backward), argmax, and sum_to (the
// reverse of broadcasting). Every reduction is a sequence of single-dim reductions over an
// (outer, n, inner) view, so backends implement only that one kernel.
#include "ops/op_utils.h"

namespace minidl {
namespace {

/// Sums over `dims` (sorted, unique) keeping them as size 1. Adjacent dims are reduced together as one
/// (a run like H, W becomes a single n = H*W), so each run is one pass over long contiguous rows.
Tensor sum_keepdim(const Tensor& a, const std::vector<std::int64_t>& dims) {
  Tensor cur = a;
  Shape shape = a.sizes();
  std::size_t end = dims.size();
  while (end > 0) {
    std::size_t begin = end - 1;
    while (begin > 0 && dims[begin - 1] + 1 == dims[begin]) --begin;
    const auto first = static_cast<std::size_t>(dims[begin]), last = static_cast<std::size_t>(dims[end - 1]);
    const std::int64_t n = ops::prod(shape, first, last + 1);
    end = begin;
    if (n == 1) continue;
    const std::int64_t outer = ops::prod(shape, 0, first), inner = ops::prod(shape, last + 1, shape.size());
    for (std::size_t d = first; d <= last; ++d) shape[d] = 1;
    Tensor out = ops::empty_as(shape, cur);
    MINIDL_ON_BACKEND(cur.device(), reduce(kernels::ReduceOp::Sum, cur, outer, n, inner, out, nullptr));
    cur = out;
  }
  return cur.is_same(a) ? a.clone() : cur;
}

Shape drop_dims(const Shape& s, const std::vector<std::int64_t>& dims) {
  Shape r;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (std::find(dims.begin(), dims.end(), static_cast<std::int64_t>(i)) == dims.end()) r.push_back(s[i]);
  }
  return r;
}

Shape keep_dims(Shape s, const std::vector<std::int64_t>& dims) {
  for (std::int64_t d : dims) s[static_cast<std::size_t>(d)] = 1;
  return s;
}

}  // namespace

Tensor sum(const Tensor& a_in, const std::vector<std::int64_t>& dims_in, bool keepdim) {
  ops::check_defined(a_in, "sum", "self");
  // Integral and bool tensors sum in int64 (PyTorch's result dtype); the 16-bit floating types in float32,
  // rounded back to their own dtype.
  if (is_integral(a_in.dtype(), true) && a_in.dtype() != kInt64) return sum(a_in.to(kInt64), dims_in, keepdim);
  if (is_reduced_floating_point(a_in.dtype())) return sum(a_in.to(kFloat32), dims_in, keepdim).to(a_in.dtype());
  const Tensor a = ops::dense(a_in);
  const auto dims = ops::normalize_dims(dims_in, a.dim(), "sum");
  Tensor r;
  {
    NoGradGuard no_grad;
    r = sum_keepdim(a, dims);
    r = keepdim ? r : r.reshape(drop_dims(a.sizes(), dims));
  }
  const Shape in_shape = a.sizes(), kept = keep_dims(a.sizes(), dims);
  return autograd::record(r, "SumBackward", {a}, [in_shape, kept](const Tensor& g) {
    return std::vector<Tensor>{ops::expand_to(g.reshape(kept), in_shape)};
  });
}

Tensor mean(const Tensor& a, const std::vector<std::int64_t>& dims_in, bool keepdim) {
  ops::check_defined(a, "mean", "self");
  MINIDL_CHECK(is_floating_point(a.dtype()), TypeError, "mean: could not infer output dtype. Input dtype must be a "
               "floating point dtype, found ", a.dtype(), " (convert with .to(kFloat32) first)");
  const auto dims = ops::normalize_dims(dims_in, a.dim(), "mean");
  std::int64_t count = 1;
  for (std::int64_t d : dims) count *= a.sizes()[static_cast<std::size_t>(d)];
  MINIDL_CHECK(count > 0, ValueError, "mean: reducing over an empty dimension of shape ", shape_str(a.sizes()));
  return mul(sum(a, dims_in, keepdim), 1.0 / static_cast<double>(count));
}

namespace {
struct MaxResult {
  Tensor values, indices;  // both (outer, inner)-shaped, reshaped by the caller
  std::int64_t outer, n, inner;
};
/// The kernel takes float32, float64 and int64; other dtypes are compared in one of those that holds them exactly.
DType max_kernel_dtype(DType t) {
  if (t == kFloat32 || t == kFloat64 || t == kInt64) return t;
  return is_floating_point(t) ? kFloat32 : kInt64;
}

MaxResult max_along(const Tensor& a_in, std::int64_t dim, const char* op) {
  ops::check_defined(a_in, op, "self");
  const Tensor a = ops::dense(a_in.to(max_kernel_dtype(a_in.dtype())));
  const auto d = static_cast<std::size_t>(ops::wrap_dim(dim, a.dim(), op));
  const Shape& s = a.sizes();
  MaxResult r;
  r.outer = ops::prod(s, 0, d);
  r.n = a.dim() == 0 ? 1 : s[d];
  r.inner = ops::prod(s, d + 1, s.size());
  MINIDL_CHECK(r.n > 0, ValueError, op, ": cannot reduce over an empty dimension (shape ", shape_str(s), ")");
  r.values = ops::empty_as({r.outer, r.inner}, a);
  r.indices = empty({r.outer, r.inner}, TensorOptions(kInt64).device(a.device()));
  MINIDL_ON_BACKEND(a.device(), reduce(kernels::ReduceOp::Max, a, r.outer, r.n, r.inner, r.values, &r.indices));
  return r;
}
Shape reduced_shape(const Shape& s, std::int64_t d, bool keepdim) {
  if (s.empty()) return s;
  Shape r = s;
  if (keepdim) {
    r[static_cast<std::size_t>(d)] = 1;
  } else {
    r.erase(r.begin() + d);
  }
  return r;
}
}  // namespace

Tensor max(const Tensor& a, std::int64_t dim, bool keepdim) {
  MaxResult r = max_along(a, dim, "max");
  const std::int64_t d = ops::wrap_dim(dim, a.dim(), "max");
  Tensor values = r.values.reshape(reduced_shape(a.sizes(), d, keepdim)).to(a.dtype());
  const Shape in_shape = a.sizes();
  const Tensor idx = r.indices;
  const std::int64_t outer = r.outer, n = r.n, inner = r.inner;
  return autograd::record(values, "MaxBackward", {a}, [=](const Tensor& g) {
    Tensor dx = ops::empty_as(in_shape, g);
    MINIDL_ON_BACKEND(g.device(), scatter_reduced(g, idx, outer, n, inner, dx));
    return std::vector<Tensor>{dx};
  });
}

Tensor argmax(const Tensor& a, std::int64_t dim, bool keepdim) {
  MaxResult r = max_along(a, dim, "argmax");
  return r.indices.reshape(reduced_shape(a.sizes(), ops::wrap_dim(dim, a.dim(), "argmax"), keepdim));
}

Tensor sum_to(const Tensor& a, const Shape& shape) {
  if (a.sizes() == shape) return a;
  const Shape& s = a.sizes();
  MINIDL_CHECK(shape.size() <= s.size(), ValueError, "sum_to: cannot sum shape ", shape_str(s), " to ",
               shape_str(shape));
  const std::size_t lead = s.size() - shape.size();
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i < lead) {
      dims.push_back(static_cast<std::int64_t>(i));
    } else if (shape[i - lead] == 1 && s[i] != 1) {
      dims.push_back(static_cast<std::int64_t>(i));
    } else {
      MINIDL_CHECK(shape[i - lead] == s[i], ValueError, "sum_to: cannot sum shape ", shape_str(s), " to ",
                   shape_str(shape));
    }
  }
  return sum(a, dims, true).reshape(shape);
}

Tensor Tensor::sum() const { return minidl::sum(*this, {}, false); }
Tensor Tensor::sum(const std::vector<std::int64_t>& dims, bool keepdim) const {
  MINIDL_CHECK(!dims.empty(), ValueError, "sum: empty list of dims (call sum() to reduce over all)");
  return minidl::sum(*this, dims, keepdim);
}
Tensor Tensor::mean() const { return minidl::mean(*this, {}, false); }
Tensor Tensor::mean(const std::vector<std::int64_t>& dims, bool keepdim) const {
  MINIDL_CHECK(!dims.empty(), ValueError, "mean: empty list of dims (call mean() to reduce over all)");
  return minidl::mean(*this, dims, keepdim);
}
Tensor Tensor::max() const { return minidl::max(reshape({-1}), 0, false); }
Tensor Tensor::max(std::int64_t dim, bool keepdim) const { return minidl::max(*this, dim, keepdim); }
Tensor Tensor::argmax(std::int64_t dim, bool keepdim) const { return minidl::argmax(*this, dim, keepdim); }

}  // namespace minidl
