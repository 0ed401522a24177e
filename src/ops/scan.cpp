// cumsum and cumprod along one dim: integral and bool inputs give int64 (or `dtype`), 16-bit floats accumulate in
// float32. cumsum's gradient is the reverse cumsum of the incoming one; cumprod's is exact with zeros in the input
// (kernels/scan.h), as PyTorch's.
#include "autocast/policy.h"
#include "ops/op_utils.h"

namespace minidl {

using kernels::ScanOp;

namespace {

struct Layout {
  std::int64_t outer, n, inner;
};

Layout layout_of(const Shape& s, std::int64_t d) {
  if (s.empty()) return {1, 1, 1};
  const auto u = static_cast<std::size_t>(d);
  return {ops::prod(s, 0, u), s[u], ops::prod(s, u + 1, s.size())};
}

Tensor scan_forward(const Tensor& a, std::int64_t d, ScanOp op, bool reverse) {
  const Layout l = layout_of(a.sizes(), d);
  Tensor out = empty(a.sizes(), TensorOptions(is_integral(a.dtype(), true) ? kInt64 : a.dtype()).device(a.device()));
  MINIDL_ON_BACKEND(a.device(), scan(op, reverse, a, l.outer, l.n, l.inner, out));
  return out;
}

/// The running sum from the first (or, reversed, the last) element; each direction is the other's gradient.
Tensor cumsum_along(const Tensor& a, std::int64_t d, bool reverse) {
  return autograd::record(scan_forward(a, d, ScanOp::Sum, reverse), "CumsumBackward", {a},
                          [d, reverse](const Tensor& g) { return std::vector<Tensor>{cumsum_along(g, d, !reverse)}; });
}

/// `self` in `dtype` when given, made contiguous, and the wrapped dim.
std::pair<Tensor, std::int64_t> scan_input(const Tensor& self, std::int64_t dim, std::optional<DType> dtype,
                                           const char* op) {
  ops::check_defined(self, op, "self");
  const std::int64_t d = ops::wrap_dim(dim, self.dim(), op);
  return {ops::dense(dtype ? self.to(*dtype) : self), d};
}

}  // namespace

Tensor cumsum(const Tensor& self, std::int64_t dim, std::optional<DType> dtype) {
  MINIDL_AUTOCAST(cumsum, self, dim, dtype);
  const auto [a, d] = scan_input(self, dim, dtype, "cumsum");
  const Tensor r = cumsum_along(a, d, false);
  return dtype && r.dtype() != *dtype ? r.to(*dtype) : r;
}

Tensor cumprod(const Tensor& self, std::int64_t dim, std::optional<DType> dtype) {
  MINIDL_AUTOCAST(cumprod, self, dim, dtype);
  const auto [a, d] = scan_input(self, dim, dtype, "cumprod");
  autograd::SavedTensor sa(a, "cumprod");
  const Layout l = layout_of(a.sizes(), d);
  const Tensor r =
      autograd::record(scan_forward(a, d, ScanOp::Prod, false), "CumprodBackward", {a}, [sa, l](const Tensor& g) {
        Tensor dx = ops::empty_as(g.sizes(), g);
        MINIDL_ON_BACKEND(g.device(), cumprod_backward(sa.get(), g, l.outer, l.n, l.inner, dx));
        return std::vector<Tensor>{dx};
      });
  return dtype && r.dtype() != *dtype ? r.to(*dtype) : r;
}

Tensor Tensor::cumsum(std::int64_t dim, std::optional<DType> dtype) const { return minidl::cumsum(*this, dim, dtype); }
Tensor Tensor::cumprod(std::int64_t dim, std::optional<DType> dtype) const {
  return minidl::cumprod(*this, dim, dtype);
}

}  // namespace minidl
