// gather, scatter, scatter_add and take_along_dim: one index tensor shaped like the iteration space, picking the
// coordinate along `dim` of the tensor it indexes (ops/index_access.h). The out-of-place scatters are a clone and
// the in-place op, so one backward rule (recorded by the in-place op) serves both:
//   gather:       self <- scatter_add(zeros, dim, index, g)
//   scatter_:     self <- g with the written elements zeroed; src <- gather(g, dim, index)
//   scatter_add_: self <- g;                                   src <- gather(g, dim, index)
// (src's gradient is zero-padded where src is larger than index). A 0-d tensor counts as one of one element,
// as in PyTorch.
#include "autocast/policy.h"
#include "autograd/inplace.h"
#include "minidl/indexing.h"
#include "ops/index_access.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

using autograd::SavedTensor;

/// t as at least one dim: a 0-d tensor viewed as one element (for the geometry only, not recorded).
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? t.detach().reshape({1}) : t; }
std::int64_t dims_of(const Tensor& t) { return std::max<std::int64_t>(t.dim(), 1); }
std::int64_t size_of(const Tensor& t, std::int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }

/// PyTorch's shape rules of gather and scatter: index has as many dims as self (and src), is no larger than src
/// anywhere, nor than self except along dim.
void check_index_shape(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  MINIDL_CHECK(dims_of(index) == dims_of(self), ValueError, op,
               ": expected 'index' to have as many dimensions as "
               "'self' (",
               self.dim(), "), found shape ", shape_str(index.sizes()));
  if (src != nullptr) {
    MINIDL_CHECK(dims_of(*src) == dims_of(self), ValueError, op,
                 ": expected 'src' to have as many dimensions as "
                 "'self' (",
                 self.dim(), "), found shape ", shape_str(src->sizes()));
  }
  for (std::int64_t d = 0; d < dims_of(self); ++d) {
    MINIDL_CHECK(d == dim || size_of(index, d) <= size_of(self, d), ValueError, op, ": expected 'index' (shape ",
                 shape_str(index.sizes()), ") to be no larger than 'self' (shape ", shape_str(self.sizes()),
                 ") in every dimension but dimension ", dim, "; dimension ", d, " is larger");
    MINIDL_CHECK(src == nullptr || size_of(index, d) <= size_of(*src, d), ValueError, op, ": expected 'index' (shape ",
                 shape_str(index.sizes()), ") to be no larger than 'src' (shape ", shape_str(src->sizes()),
                 ") in every dimension; dimension ", d, " is larger");
  }
}

/// The checked operands of a gather or scatter: index as int64 on self's device, dim wrapped.
struct Checked {
  Tensor index;
  std::int64_t dim;
};

Checked check_args(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  ops::check_defined(self, op, "self");
  Tensor ix = ops::index_operand(index, self.device(), false, op, "index");
  if (src != nullptr) {
    ops::check_defined(*src, op, "src");
    MINIDL_CHECK(src->dtype() == self.dtype(), TypeError, op, ": expected 'src' of the dtype of 'self' (", self.dtype(),
                 "), found ", src->dtype());
    MINIDL_CHECK(src->device() == self.device(), TypeError, op, ": expected 'src' on the device of 'self' (",
                 self.device(), "), found ", src->device());
  }
  const std::int64_t d = ops::wrap_dim(dim, self.dim(), op);
  if (ix.numel() > 0) check_index_shape(self, d, ix, src, op);
  return {ix, d};
}

std::vector<ops::IndexArg> index_args(const Tensor& index1d, std::int64_t dim) {
  return {{index1d, index1d.strides(), dim, "index"}};
}

Tensor gather_unchecked(const Tensor& self, std::int64_t dim, const Tensor& index, const char* op = "gather");

/// zeros of `shape` with g written into its leading corner: the gradient of a src larger than its index.
Tensor pad_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  Tensor z = zeros(shape, TensorOptions(g.dtype()).device(g.device()));
  Tensor corner = z;
  for (std::size_t d = 0; d < shape.size(); ++d) corner = corner.narrow(static_cast<std::int64_t>(d), 0, g.size(d));
  corner.copy_(g);
  return z;
}

/// The in-place scatters: values (src, or a 0-d value broadcast) written or added into self at index.
Tensor& scatter_inplace(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& values, bool is_src,
                        bool accumulate, const char* op, const char* node) {
  autograd::check_inplace_allowed(self, op);
  ops::check_no_internal_overlap(self, op, "self");
  const autograd::InplaceRecord rec(self, op, node, {is_src ? values : Tensor()});
  if (index.numel() > 0) {
    const Tensor data = at_least_1d(self), ix = at_least_1d(index);
    const Tensor v = is_src ? at_least_1d(values) : values;
    const Shape vstrides = is_src ? v.strides() : Shape(ix.sizes().size(), 0);
    ops::index_scatter(data, ix.sizes(), ops::strides_without(data, dim), v, vstrides, index_args(ix, dim), false,
                       accumulate, op);
  }
  autograd::bump_version(self);
  const SavedTensor saved(index, node);
  const bool src_grad = is_src && values.requires_grad();
  const Shape src_shape = is_src ? values.sizes() : Shape{};
  rec.finish(self, [=](const Tensor& g) {
    const Tensor ix = saved.get();
    Tensor g_self = accumulate ? g : g.scatter(dim, ix, 0);
    Tensor g_src = src_grad ? pad_to(gather_unchecked(g, dim, ix), src_shape) : Tensor();
    return std::vector<Tensor>{g_self, g_src};
  });
  return self;
}

Tensor gather_unchecked(const Tensor& self, std::int64_t dim, const Tensor& index, const char* op) {
  if (index.numel() == 0) return ops::empty_as(index.sizes(), self);
  const Tensor data = at_least_1d(self), ix = at_least_1d(index);
  Tensor out = ops::index_gather(data, ix.sizes(), ops::strides_without(data, dim), index_args(ix, dim), false, op);
  if (index.dim() == 0) out = out.reshape({});
  const SavedTensor saved(index, "GatherBackward");
  const Shape shape = self.sizes();
  return autograd::record(out, "GatherBackward", {self}, [=](const Tensor& g) {
    Tensor dself = zeros(shape, TensorOptions(g.dtype()).device(g.device()));
    dself.scatter_add_(dim, saved.get(), g);
    return std::vector<Tensor>{dself};
  });
}

Tensor scalar_value(const Tensor& self, const Scalar& value) {
  return full({}, value, TensorOptions(self.dtype()).device(self.device()));
}

}  // namespace

Tensor gather(const Tensor& self, std::int64_t dim, const Tensor& index, bool sparse_grad) {
  MINIDL_CHECK(!sparse_grad, ValueError, "gather: sparse_grad=true is not supported (minidl has no sparse tensors)");
  const Checked c = check_args(self, dim, index, nullptr, "gather");
  return gather_unchecked(self, c.dim, c.index);
}

Tensor& Tensor::scatter_(std::int64_t dim, const Tensor& index, const Tensor& src) {
  const Checked c = check_args(*this, dim, index, &src, "scatter_");
  return scatter_inplace(*this, c.dim, c.index, src, true, false, "scatter_", "Scatter_Backward");
}

Tensor& Tensor::scatter_(std::int64_t dim, const Tensor& index, const Scalar& value) {
  const Checked c = check_args(*this, dim, index, nullptr, "scatter_");
  return scatter_inplace(*this, c.dim, c.index, scalar_value(*this, value), false, false, "scatter_",
                         "ScatterValue_Backward");
}

Tensor& Tensor::scatter_add_(std::int64_t dim, const Tensor& index, const Tensor& src) {
  const Checked c = check_args(*this, dim, index, &src, "scatter_add_");
  return scatter_inplace(*this, c.dim, c.index, src, true, true, "scatter_add_", "ScatterAdd_Backward");
}

Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  check_args(self, dim, index, &src, "scatter");
  return self.clone().scatter_(dim, index, src);
}

Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  check_args(self, dim, index, nullptr, "scatter");
  return self.clone().scatter_(dim, index, value);
}

Tensor scatter_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  MINIDL_AUTOCAST(scatter_add, self, dim, index, src);
  check_args(self, dim, index, &src, "scatter_add");
  return self.clone().scatter_add_(dim, index, src);
}

Tensor take_along_dim(const Tensor& self, const Tensor& indices, std::optional<std::int64_t> dim) {
  ops::check_defined(self, "take_along_dim", "self");
  const Tensor ix = ops::index_operand(indices, self.device(), false, "take_along_dim", "indices");
  if (!dim) return gather_unchecked(self.reshape({-1}), 0, ix.reshape({-1}), "take_along_dim");
  MINIDL_CHECK(self.dim() == ix.dim(), ValueError,
               "take_along_dim: expected 'indices' to have as many dimensions as "
               "'self' (",
               self.dim(), "), found shape ", shape_str(ix.sizes()));
  const std::int64_t d = ops::wrap_dim(*dim, self.dim(), "take_along_dim");
  if (self.dim() == 0) return gather_unchecked(self, d, ix, "take_along_dim");
  const auto ud = static_cast<std::size_t>(d);
  Shape self_sizes = self.sizes();
  self_sizes[ud] = ix.size(d);
  const Shape shape = broadcast_shapes(self_sizes, ix.sizes(), "take_along_dim");
  Shape self_shape = shape;
  self_shape[ud] = self.size(d);
  return gather_unchecked(self.expand(self_shape), d, ix.expand(shape), "take_along_dim");
}

Tensor Tensor::gather(std::int64_t dim, const Tensor& index, bool sparse_grad) const {
  return minidl::gather(*this, dim, index, sparse_grad);
}
Tensor Tensor::scatter(std::int64_t dim, const Tensor& index, const Tensor& src) const {
  return minidl::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(std::int64_t dim, const Tensor& index, const Scalar& value) const {
  return minidl::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(std::int64_t dim, const Tensor& index, const Tensor& src) const {
  return minidl::scatter_add(*this, dim, index, src);
}
Tensor Tensor::take_along_dim(const Tensor& indices, std::optional<std::int64_t> dim) const {
  return minidl::take_along_dim(*this, indices, dim);
}

}  // namespace minidl
