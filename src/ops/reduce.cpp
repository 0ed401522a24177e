// Arithmetic reductions over dims: sum, prod, mean, var, std, logsumexp, norm (and sum_to, the reverse of
// broadcasting), with PyTorch's backward rules; and reduce_keepdim, the one entry through which every reduction op
// runs a backend reducer (kernels/reduce.h) over an (outer, n, inner) view.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autocast/policy.h"
#include "ops/reduce_utils.h"

namespace minidl {

using kernels::ReduceOp;
using kernels::ReduceParams;

namespace ops {

std::vector<std::int64_t> reduction_dims(IntArrayRef dims, std::int64_t ndim, const char* op) {
  if (ndim == 0) {
    for (std::int64_t d : dims) wrap_dim(d, 0, op);
    return {};
  }
  return normalize_dims(dims.vec(), ndim, op);
}

Shape reduced_shape(const Shape& s, const std::vector<std::int64_t>& dims, bool keepdim) {
  Shape r;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<std::int64_t>(i)) != dims.end();
    if (!reduced) {
      r.push_back(s[i]);
    } else if (keepdim) {
      r.push_back(1);
    }
  }
  return r;
}

std::int64_t reduced_count(const Shape& s, const std::vector<std::int64_t>& dims) {
  std::int64_t c = 1;
  for (std::int64_t d : dims) c *= s[static_cast<std::size_t>(d)];
  return c;
}

void check_nonempty(const Tensor& a, const std::vector<std::int64_t>& dims, const char* op) {
  MINIDL_CHECK(reduced_count(a.sizes(), dims) > 0, ValueError, op,
               ": cannot reduce over an empty dimension (input "
               "of shape ",
               shape_str(a.sizes()), "): the reduction has no identity");
}

void check_floating_input(const Tensor& a, const char* op) {
  MINIDL_CHECK(is_floating_point(a.dtype()), TypeError, op,
               ": expected a floating input (input dtype must be a "
               "floating point dtype), found ",
               a.dtype(), " (convert with .to(kFloat32) first)");
}

namespace {

bool splits_into_passes(ReduceOp op) {
  return op == ReduceOp::Sum || op == ReduceOp::Prod || op == ReduceOp::Max || op == ReduceOp::Min ||
         op == ReduceOp::Any || op == ReduceOp::All;
}

/// The dtype that keeps a pass's partial results exact enough for the next pass.
DType partial_dtype(ReduceOp op, DType in) {
  if (op == ReduceOp::Any || op == ReduceOp::All) return kBool;
  if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
    if (is_integral(in, true)) return kInt64;
    if (is_reduced_floating_point(in)) return kFloat32;
  }
  return in;
}

/// One backend pass over dims [b, e) of a tensor of `sizes` (x's contiguous data): out has outer * inner elements.
Tensor reduce_pass(const Tensor& x, const Shape& sizes, std::size_t b, std::size_t e, ReduceOp op,
                   const ReduceParams& params, DType dtype, Tensor* indices) {
  const std::int64_t outer = prod(sizes, 0, b), n = prod(sizes, b, e), inner = prod(sizes, e, sizes.size());
  Tensor out = empty({outer * inner}, TensorOptions(dtype).device(x.device()));
  if (indices) *indices = empty({outer * inner}, TensorOptions(kInt64).device(x.device()));
  MINIDL_ON_BACKEND(x.device(), reduce(op, params, x, outer, n, inner, out, indices));
  return out;
}

}  // namespace

Tensor reduce_keepdim(const Tensor& a_in, const std::vector<std::int64_t>& dims, ReduceOp op,
                      const ReduceParams& params, DType out_dtype, Tensor* indices) {
  NoGradGuard no_grad;
  const Tensor a = dense(a_in);
  const Shape kept = reduced_shape(a.sizes(), dims, true);
  // Size-1 dims go with any neighbour: drop them, then find the runs of neighbouring reduced dims.
  Shape sizes;
  std::vector<bool> reduced;
  for (std::size_t i = 0; i < a.sizes().size(); ++i) {
    if (a.sizes()[i] == 1) continue;
    sizes.push_back(a.sizes()[i]);
    reduced.push_back(std::find(dims.begin(), dims.end(), static_cast<std::int64_t>(i)) != dims.end());
  }
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (!reduced[i]) continue;
    if (!runs.empty() && runs.back().second == i) {
      runs.back().second = i + 1;
    } else {
      runs.emplace_back(i, i + 1);
    }
  }
  if (runs.size() <= 1) {  // no run: every element alone (n = 1)
    const std::size_t b = runs.empty() ? sizes.size() : runs[0].first;
    const std::size_t e = runs.empty() ? sizes.size() : runs[0].second;
    Tensor out = reduce_pass(a, sizes, b, e, op, params, out_dtype, indices);
    if (indices) *indices = indices->reshape(kept);
    return out.reshape(kept);
  }
  MINIDL_CHECK(indices == nullptr, ValueError, "reduce: positions need a reduction over one dim");
  if (splits_into_passes(op)) {
    // Run by run from the innermost (usually the longest contiguous one); a mean's scale in the last pass.
    const DType mid = partial_dtype(op, a.dtype());
    ReduceParams unscaled = params;
    unscaled.scale = 1;
    Tensor cur = a;
    for (std::size_t r = runs.size(); r-- > 0;) {
      cur = reduce_pass(cur, sizes, runs[r].first, runs[r].second, op, r == 0 ? params : unscaled, mid, nullptr);
      for (std::size_t d = runs[r].first; d < runs[r].second; ++d) sizes[d] = 1;
    }
    cur = cur.reshape(kept);
    return cur.dtype() == out_dtype ? cur : cur.to(out_dtype);
  }
  // The other reducers read one copy with the reduced dims moved last.
  std::vector<std::int64_t> order;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t d = 0; d < a.dim(); ++d) {
      const bool r = std::find(dims.begin(), dims.end(), d) != dims.end();
      if (r == (pass == 1)) order.push_back(d);
    }
  }
  const Tensor moved = a.permute(order).contiguous();
  const std::int64_t n = reduced_count(a.sizes(), dims);
  Tensor out = reduce_pass(moved, {shape_numel(kept), n}, 1, 2, op, params, out_dtype, nullptr);
  return out.reshape(kept);
}

}  // namespace ops

namespace {

DType sum_dtype(DType in) { return is_integral(in, true) ? kInt64 : in; }

/// The gradient of a reduction's output (of the reduced shape) viewed with the reduced dims as size 1.
Tensor unsqueeze_reduced(const Tensor& g, const Shape& kept) { return g.reshape(kept); }

/// sum and mean: `self` converted to `dtype` first when given.
Tensor sum_or_mean(const Tensor& self, IntArrayRef dim, bool keepdim, std::optional<DType> dtype, bool mean) {
  const char* name = mean ? "mean" : "sum";
  ops::check_defined(self, name, "self");
  const Tensor a = dtype ? self.to(*dtype) : self;
  if (mean) {
    MINIDL_CHECK(is_floating_point(a.dtype()), TypeError,
                 "mean: could not infer output dtype. Input dtype must be a "
                 "floating point dtype, found ",
                 a.dtype(), " (pass dtype=kFloat32, or convert with .to(kFloat32))");
  }
  const auto dims = ops::reduction_dims(dim, a.dim(), name);
  const std::int64_t count = ops::reduced_count(a.sizes(), dims);
  ReduceParams p;
  if (mean) p.scale = 1.0 / static_cast<double>(count);
  Tensor r = ops::reduce_keepdim(a, dims, ReduceOp::Sum, p, mean ? a.dtype() : sum_dtype(a.dtype()));
  r = r.reshape(ops::reduced_shape(a.sizes(), dims, keepdim));
  if (dtype && r.dtype() != *dtype) r = r.to(*dtype);
  const Shape in_shape = a.sizes(), kept = ops::reduced_shape(a.sizes(), dims, true);
  const double scale = p.scale;
  return autograd::record(r, mean ? "MeanBackward" : "SumBackward", {a}, [=](const Tensor& g) {
    const Tensor gk = unsqueeze_reduced(g, kept);
    return std::vector<Tensor>{ops::expand_to(mean ? mul(gk, scale) : gk, in_shape)};
  });
}

/// The elementwise sign of x (0 at 0), for backward rules.
Tensor sign_of(const Tensor& x) {
  Tensor out = ops::empty_as(x.sizes(), x);
  MINIDL_ON_BACKEND(x.device(), unary(kernels::UnaryOp::Sign, 0.0, x, out));
  return out;
}

/// 1 / d where d != 0, else 0 (PyTorch's masked_fill(grad / d, d == 0, 0) without an infinity in between).
Tensor safe_reciprocal(const Tensor& d) {
  const Tensor zero = eq(d, 0).to(d.dtype());
  return div(sub(ones_like(d), zero), add(d, zero));
}

Tensor var_or_std(const Tensor& self, IntArrayRef dim, double correction, bool keepdim, bool take_sqrt) {
  const char* name = take_sqrt ? "std" : "var";
  ops::check_defined(self, name, "self");
  MINIDL_CHECK(is_floating_point(self.dtype()), TypeError, name,
               ": std and var only support floating point dtypes, "
               "found ",
               self.dtype());
  const auto dims = ops::reduction_dims(dim, self.dim(), name);
  const double dof = static_cast<double>(ops::reduced_count(self.sizes(), dims)) - correction;
  ReduceParams p;
  p.correction = correction;
  p.take_sqrt = take_sqrt;
  const Tensor rk = ops::reduce_keepdim(self, dims, ReduceOp::Var, p, self.dtype());
  const Tensor r = rk.reshape(ops::reduced_shape(self.sizes(), dims, keepdim));
  const Shape kept = rk.sizes();
  autograd::SavedTensor sx(self, name), sr(rk, name);
  return autograd::record(r, take_sqrt ? "StdBackward" : "VarBackward", {self}, [=](const Tensor& g) {
    const Tensor x = sx.get();
    const Tensor centred = sub(x, mean(x, dims, true));
    const Tensor gk = unsqueeze_reduced(g, kept);
    if (!take_sqrt) return std::vector<Tensor>{mul(mul(gk, centred), 2.0 / dof)};
    // d std = d var / (2 std), and 0 where std is 0.
    return std::vector<Tensor>{mul(mul(mul(gk, safe_reciprocal(sr.get())), centred), 1.0 / dof)};
  });
}

}  // namespace

Tensor sum(const Tensor& self, std::optional<DType> dtype) {
  MINIDL_AUTOCAST(sum, self, dtype);
  return sum_or_mean(self, {}, false, dtype, false);
}
Tensor sum(const Tensor& self, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  MINIDL_AUTOCAST(sum, self, dim, keepdim, dtype);
  return sum_or_mean(self, dim, keepdim, dtype, false);
}
Tensor mean(const Tensor& self, std::optional<DType> dtype) { return sum_or_mean(self, {}, false, dtype, true); }
Tensor mean(const Tensor& self, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  return sum_or_mean(self, dim, keepdim, dtype, true);
}

Tensor prod(const Tensor& self, std::optional<DType> dtype) {
  MINIDL_AUTOCAST(prod, self, dtype);
  ops::check_defined(self, "prod", "self");
  return prod(self.reshape({-1}), 0, false, dtype);
}

Tensor prod(const Tensor& self, std::int64_t dim, bool keepdim, std::optional<DType> dtype) {
  MINIDL_AUTOCAST(prod, self, dim, keepdim, dtype);
  ops::check_defined(self, "prod", "self");
  const Tensor a = dtype ? self.to(*dtype) : self;
  const std::int64_t d = ops::wrap_dim(dim, a.dim(), "prod");
  const std::vector<std::int64_t> dims = a.dim() == 0 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{d};
  Tensor r = ops::reduce_keepdim(a, dims, ReduceOp::Prod, {}, sum_dtype(a.dtype()));
  r = r.reshape(ops::reduced_shape(a.sizes(), dims, keepdim));
  if (dtype && r.dtype() != *dtype) r = r.to(*dtype);
  const Shape in_shape = a.sizes(), kept = ops::reduced_shape(a.sizes(), dims, true);
  const auto u = static_cast<std::size_t>(d);
  const std::int64_t outer = a.dim() == 0 ? 1 : ops::prod(in_shape, 0, u);
  const std::int64_t n = a.dim() == 0 ? 1 : in_shape[u];
  const std::int64_t inner = a.dim() == 0 ? 1 : ops::prod(in_shape, u + 1, in_shape.size());
  autograd::SavedTensor sa(a, "prod");
  return autograd::record(r, "ProdBackward", {a}, [=](const Tensor& g) {
    // prod is cumprod's last element: cumprod's exact backward with the gradient at the last position alone.
    Tensor dx = ops::empty_as(in_shape, g);
    if (dx.numel() == 0) return std::vector<Tensor>{dx};
    Tensor g_last = zeros(in_shape, TensorOptions(g.dtype()).device(g.device()));
    if (a.dim() == 0) {
      g_last.copy_(g);
    } else {
      Tensor last = g_last.narrow(d, n - 1, 1);
      last.copy_(unsqueeze_reduced(g, kept));
    }
    const Tensor x = ops::dense(sa.get());
    MINIDL_ON_BACKEND(g.device(), cumprod_backward(x, g_last, outer, n, inner, dx));
    return std::vector<Tensor>{dx};
  });
}

Tensor var(const Tensor& self, IntArrayRef dim, bool unbiased, bool keepdim) {
  return var_or_std(self, dim, unbiased ? 1.0 : 0.0, keepdim, false);
}
Tensor var(const Tensor& self, IntArrayRef dim, const std::optional<Scalar>& correction, bool keepdim) {
  return var_or_std(self, dim, correction ? correction->to_double() : 1.0, keepdim, false);
}
Tensor std(const Tensor& self, IntArrayRef dim, bool unbiased, bool keepdim) {
  return var_or_std(self, dim, unbiased ? 1.0 : 0.0, keepdim, true);
}
Tensor std(const Tensor& self, IntArrayRef dim, const std::optional<Scalar>& correction, bool keepdim) {
  return var_or_std(self, dim, correction ? correction->to_double() : 1.0, keepdim, true);
}

Tensor logsumexp(const Tensor& self, IntArrayRef dim, bool keepdim) {
  MINIDL_AUTOCAST(logsumexp, self, dim, keepdim);
  ops::check_defined(self, "logsumexp", "self");
  ops::check_floating_input(self, "logsumexp");
  const auto dims = ops::reduction_dims(dim, self.dim(), "logsumexp");
  const Tensor rk = ops::reduce_keepdim(self, dims, ReduceOp::LogSumExp, {}, self.dtype());
  const Tensor r = rk.reshape(ops::reduced_shape(self.sizes(), dims, keepdim));
  const Shape kept = rk.sizes();
  autograd::SavedTensor sx(self, "logsumexp"), sr(rk, "logsumexp");
  return autograd::record(r, "LogsumexpBackward", {self}, [=](const Tensor& g) {
    return std::vector<Tensor>{mul(unsqueeze_reduced(g, kept), exp(sub(sx.get(), sr.get())))};
  });
}

Tensor norm(const Tensor& self, const Scalar& p) { return norm(self, p, {}, false); }

Tensor norm(const Tensor& self, const std::optional<Scalar>& p_in, IntArrayRef dim, bool keepdim) {
  MINIDL_AUTOCAST(norm, self, p_in, dim, keepdim);
  ops::check_defined(self, "norm", "self");
  ops::check_floating_input(self, "norm");
  const double p = p_in ? p_in->to_double() : 2.0;
  MINIDL_CHECK(!std::isnan(p), ValueError, "norm: expected a number for argument 'p', found nan");
  const auto dims = ops::reduction_dims(dim, self.dim(), "norm");
  const double inf = std::numeric_limits<double>::infinity();
  ReduceOp op = ReduceOp::NormP;
  if (p == 2) op = ReduceOp::Norm2;
  if (p == 1) op = ReduceOp::Norm1;
  if (p == 0) op = ReduceOp::Norm0;
  if (p == inf) op = ReduceOp::NormInf;
  if (p == -inf) op = ReduceOp::NormNegInf;
  if (std::isinf(p)) ops::check_nonempty(self, dims, "norm");
  ReduceParams params;
  params.p = p;
  const Tensor rk = ops::reduce_keepdim(self, dims, op, params, self.dtype());
  const Tensor r = rk.reshape(ops::reduced_shape(self.sizes(), dims, keepdim));
  const Shape kept = rk.sizes();
  autograd::SavedTensor sx(self, "norm"), sr(rk, "norm");
  return autograd::record(r, "NormBackward", {self}, [=](const Tensor& g_in) {
    // PyTorch's norm_backward, with masked_fill(v, mask, 0) written as a product with a safe reciprocal.
    const Tensor x = sx.get(), nrm = sr.get(), g = unsqueeze_reduced(g_in, kept);
    if (p == 0) return std::vector<Tensor>{zeros_like(x)};
    if (p == 1) return std::vector<Tensor>{mul(sign_of(x), g)};
    if (p == 2) return std::vector<Tensor>{mul(mul(x, safe_reciprocal(nrm)), g)};
    if (std::isinf(p)) {  // split evenly among the elements of largest (smallest) magnitude, NaNs included
      const Tensor ax = abs(x);
      const Tensor mask = logical_or(eq(ax, nrm), ne(ax, ax)).to(x.dtype());
      return std::vector<Tensor>{mul(sign_of(x), mul(div(g, sum(mask, dims, true)), mask))};
    }
    if (p < 1) {  // sgn(x) |x|^(p-1) (0 at x = 0) * g * norm^(1-p)
      const Tensor zero = eq(x, 0).to(x.dtype());
      const Tensor scaled = mul(mul(sign_of(x), pow(add(abs(x), zero), p - 1)), sub(ones_like(zero), zero));
      return std::vector<Tensor>{mul(mul(scaled, g), pow(nrm, 1 - p))};
    }
    const Tensor scaled = p < 2 ? mul(sign_of(x), pow(abs(x), p - 1)) : mul(x, pow(abs(x), p - 2));
    return std::vector<Tensor>{mul(scaled, mul(g, safe_reciprocal(pow(nrm, p - 1))))};
  });
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

Tensor Tensor::sum(std::optional<DType> dtype) const { return minidl::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dim, bool keepdim, std::optional<DType> dtype) const {
  return minidl::sum(*this, dim, keepdim, dtype);
}
Tensor Tensor::prod(std::optional<DType> dtype) const { return minidl::prod(*this, dtype); }
Tensor Tensor::prod(std::int64_t dim, bool keepdim, std::optional<DType> dtype) const {
  return minidl::prod(*this, dim, keepdim, dtype);
}
Tensor Tensor::mean(std::optional<DType> dtype) const { return minidl::mean(*this, dtype); }
Tensor Tensor::mean(IntArrayRef dim, bool keepdim, std::optional<DType> dtype) const {
  return minidl::mean(*this, dim, keepdim, dtype);
}
Tensor Tensor::var(IntArrayRef dim, bool unbiased, bool keepdim) const {
  return minidl::var(*this, dim, unbiased, keepdim);
}
Tensor Tensor::var(IntArrayRef dim, const std::optional<Scalar>& correction, bool keepdim) const {
  return minidl::var(*this, dim, correction, keepdim);
}
Tensor Tensor::std(IntArrayRef dim, bool unbiased, bool keepdim) const {
  return minidl::std(*this, dim, unbiased, keepdim);
}
Tensor Tensor::std(IntArrayRef dim, const std::optional<Scalar>& correction, bool keepdim) const {
  return minidl::std(*this, dim, correction, keepdim);
}
Tensor Tensor::logsumexp(IntArrayRef dim, bool keepdim) const { return minidl::logsumexp(*this, dim, keepdim); }
Tensor Tensor::norm(const Scalar& p) const { return minidl::norm(*this, p); }
Tensor Tensor::norm(const std::optional<Scalar>& p, IntArrayRef dim, bool keepdim) const {
  return minidl::norm(*this, p, dim, keepdim);
}

}  // namespace minidl
