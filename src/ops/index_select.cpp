// index_select and index_add: a 1-d index along one dim, broadcast over the others (ops/index_access.h). Each is
// the other's derivative (index_select's gradient is an index_add into zeros, index_add's source gradient an
// index_select), so gradients of any order come from the same two accesses. index_add is the in-place op and a
// clone; the backward rule is recorded by the in-place op.
#include "autograd/inplace.h"
#include "minidl/indexing.h"
#include "ops/index_access.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

using autograd::SavedTensor;

Tensor checked_index(const Tensor& self, const Tensor& index, const char* op) {
  ops::check_defined(self, op, "self");
  const Tensor ix = ops::index_operand(index, self.device(), true, op, "index");
  MINIDL_CHECK(ix.dim() <= 1, ValueError, op, ": expected 'index' with at most one dimension, found shape ",
               shape_str(ix.sizes()));
  return ix;
}

/// The index's strides over an iteration space of `ndim` dims: it walks `dim` alone.
Shape along(const Tensor& index, std::size_t ndim, std::int64_t dim) {
  Shape s(ndim, 0);
  if (index.dim() == 1) s[static_cast<std::size_t>(dim)] = index.stride(0);
  return s;
}

Tensor select_unchecked(const Tensor& self, std::int64_t dim, const Tensor& index) {
  if (self.dim() == 0) {
    const Tensor out = select_unchecked(self.reshape({1}), 0, index);
    return index.numel() == 1 ? out.reshape({}) : out;
  }
  Shape out_shape = self.sizes();
  out_shape[static_cast<std::size_t>(dim)] = index.numel();
  Tensor out = ops::index_gather(self, out_shape, ops::strides_without(self, dim),
                                 {{index, along(index, out_shape.size(), dim), dim, "index"}}, false, "index_select");
  const SavedTensor saved(index, "IndexSelectBackward");
  const Shape in_shape = self.sizes();
  return autograd::record(out, "IndexSelectBackward", {self}, [in_shape, dim, saved](const Tensor& g) {
    Tensor dself = zeros(in_shape, TensorOptions(g.dtype()).device(g.device()));
    dself.index_add_(dim, saved.get(), g);
    return std::vector<Tensor>{dself};
  });
}

}  // namespace

Tensor index_select(const Tensor& self, std::int64_t dim, const Tensor& index) {
  const Tensor ix = checked_index(self, index, "index_select");
  return select_unchecked(self, ops::wrap_dim(dim, self.dim(), "index_select"), ix);
}

Tensor& Tensor::index_add_(std::int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  const char* op = "index_add_";
  const Tensor ix = checked_index(*this, index, op);
  ops::check_defined(source, op, "source");
  MINIDL_CHECK(source.dtype() == dtype(), TypeError, op, ": expected 'source' of the dtype of 'self' (", dtype(),
               "), found ", source.dtype());
  MINIDL_CHECK(source.device() == device(), TypeError, op, ": expected 'source' on the device of 'self' (", device(),
               "), found ", source.device());
  MINIDL_CHECK(!alpha.is_floating_point() || is_floating_point(), TypeError, op, ": a floating 'alpha' (",
               alpha.to_double(), ") for a tensor of dtype ", dtype(), " (integral tensors take an integral alpha)");
  const std::int64_t d = ops::wrap_dim(dim, this->dim(), op);
  const Shape self_shape = this->dim() == 0 ? Shape{1} : sizes();
  const Tensor src1 = source.dim() == 0 ? source.detach().reshape({1}) : source.detach();
  MINIDL_CHECK(src1.sizes().size() == self_shape.size(), ValueError, op,
               ": expected 'source' to have as many "
               "dimensions as 'self' (",
               this->dim(), "), found shape ", shape_str(source.sizes()));
  for (std::size_t i = 0; i < self_shape.size(); ++i) {
    MINIDL_CHECK(static_cast<std::int64_t>(i) == d || src1.sizes()[i] == self_shape[i], ValueError, op,
                 ": expected 'source' (shape ", shape_str(source.sizes()), ") to match 'self' (shape ",
                 shape_str(sizes()), ") in every dimension but dimension ", d, "; dimension ", i, " differs");
  }
  MINIDL_CHECK(src1.size(d) == ix.numel(), ValueError, op, ": expected 'index' to hold source.size(", d,
               ") = ", src1.size(d), " elements, found ", ix.numel());
  autograd::check_inplace_allowed(*this, op);
  ops::check_no_internal_overlap(*this, op, "self");
  const double a = alpha.to_double();
  Tensor values = src1;
  if (a != 1.0) {
    const NoGradGuard no_grad;
    values = minidl::mul(src1, alpha).to(dtype());
  }
  // No alias of self may exist while the record checks that self's storage is its own.
  const autograd::InplaceRecord rec(*this, op, "IndexAdd_Backward", {source});
  const Tensor data = this->dim() == 0 ? detach().reshape({1}) : *this;
  ops::index_scatter(data, values.sizes(), ops::strides_without(data, d), values, values.strides(),
                     {{ix, along(ix, values.sizes().size(), d), d, "index"}}, false, true, op);
  autograd::bump_version(*this);
  const SavedTensor saved(ix, "IndexAdd_Backward");
  const bool source_grad = source.requires_grad();
  rec.finish(*this, [=](const Tensor& g) {
    Tensor g_source;
    if (source_grad) {
      g_source = minidl::index_select(g, d, saved.get());
      if (a != 1.0) g_source = minidl::mul(g_source, a);
    }
    return std::vector<Tensor>{g, g_source};
  });
  return *this;
}

Tensor index_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  ops::check_defined(self, "index_add", "self");
  return self.clone().index_add_(dim, index, source, alpha);
}

Tensor Tensor::index_add(std::int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) const {
  return minidl::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::index_select(std::int64_t dim, const Tensor& index) const {
  return minidl::index_select(*this, dim, index);
}

}  // namespace minidl
