// Shape ops. reshape and its relatives are views (new shape, same storage); transpose materialises.
#include "ops/op_utils.h"

namespace minidl {

Tensor reshape(const Tensor& a, const Shape& shape_in) {
  ops::check_defined(a, "reshape", "self");
  Shape shape = shape_in;
  std::int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      MINIDL_CHECK(infer < 0, ValueError, "reshape: only one dimension can be inferred (-1) in ", shape_str(shape_in));
      infer = static_cast<std::int64_t>(i);
    } else {
      MINIDL_CHECK(shape[i] >= 0, ValueError, "reshape: invalid size ", shape[i], " in ", shape_str(shape_in));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    MINIDL_CHECK(known > 0 && a.numel() % known == 0, ValueError, "reshape: shape ", shape_str(shape_in),
                 " is invalid for input of size ", a.numel());
    shape[static_cast<std::size_t>(infer)] = a.numel() / known;
  }
  MINIDL_CHECK(shape_numel(shape) == a.numel(), ValueError, "reshape: shape ", shape_str(shape_in),
               " is invalid for input of size ", a.numel(), " (shape ", shape_str(a.sizes()), ")");
  const TensorImpl* i = a.unsafe_impl();
  Tensor out(std::make_shared<TensorImpl>(i->storage, i->byte_offset, shape, i->dtype));
  const Shape in_shape = a.sizes();
  return autograd::record(out, "ReshapeBackward", {a}, [in_shape](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(in_shape)};
  });
}

Tensor flatten(const Tensor& a, std::int64_t start_dim, std::int64_t end_dim) {
  ops::check_defined(a, "flatten", "self");
  if (a.dim() == 0) return a.reshape({1});
  const std::int64_t s = ops::wrap_dim(start_dim, a.dim(), "flatten"), e = ops::wrap_dim(end_dim, a.dim(), "flatten");
  MINIDL_CHECK(s <= e, ValueError, "flatten: start_dim (", start_dim, ") must not come after end_dim (", end_dim, ")");
  Shape shape(a.sizes().begin(), a.sizes().begin() + s);
  shape.push_back(ops::prod(a.sizes(), static_cast<std::size_t>(s), static_cast<std::size_t>(e) + 1));
  shape.insert(shape.end(), a.sizes().begin() + e + 1, a.sizes().end());
  return a.reshape(shape);
}

Tensor transpose(const Tensor& a, std::int64_t dim0, std::int64_t dim1) {
  ops::check_defined(a, "transpose", "self");
  std::int64_t d0 = ops::wrap_dim(dim0, a.dim(), "transpose"), d1 = ops::wrap_dim(dim1, a.dim(), "transpose");
  if (d0 == d1 || a.dim() < 2) return a.reshape(a.sizes());
  if (d0 > d1) std::swap(d0, d1);
  const Shape& s = a.sizes();
  const auto u0 = static_cast<std::size_t>(d0), u1 = static_cast<std::size_t>(d1);
  Shape out_shape = s;
  std::swap(out_shape[u0], out_shape[u1]);
  Tensor out = ops::empty_as(out_shape, a);
  MINIDL_ON_BACKEND(a.device(), transpose(a, out, ops::prod(s, 0, u0), s[u0], ops::prod(s, u0 + 1, u1), s[u1],
                                          ops::prod(s, u1 + 1, s.size())));
  return autograd::record(out, "TransposeBackward", {a}, [d0, d1](const Tensor& g) {
    return std::vector<Tensor>{transpose(g, d0, d1)};
  });
}

Tensor Tensor::reshape(const Shape& shape) const { return minidl::reshape(*this, shape); }
Tensor Tensor::flatten(std::int64_t s, std::int64_t e) const { return minidl::flatten(*this, s, e); }
Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const { return minidl::transpose(*this, d0, d1); }

Tensor Tensor::unsqueeze(std::int64_t dim) const {
  const std::int64_t d = ops::wrap_dim(dim, this->dim() + 1, "unsqueeze");
  Shape s = sizes();
  s.insert(s.begin() + d, 1);
  return reshape(s);
}

Tensor Tensor::squeeze(std::int64_t dim) const {
  const std::int64_t d = ops::wrap_dim(dim, this->dim(), "squeeze");
  Shape s = sizes();
  if (s.empty() || s[static_cast<std::size_t>(d)] != 1) return reshape(s);
  s.erase(s.begin() + d);
  return reshape(s);
}

}  // namespace minidl
