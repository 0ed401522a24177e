// max, min, argmax, argmin, amax, amin: the reductions that select an element, every dtype. The dim forms of max
// and min return (values, indices) and send the gradient to the selected element; the all-element forms and
// amax / amin split it evenly among tied elements (PyTorch's evenly_distribute_backward, scale_grad_by_count).
#include "ops/reduce_utils.h"

namespace minidl {

using kernels::ReduceOp;

namespace {

struct Extremum {
  Tensor values, indices;  // the reduced dim kept as size 1
  std::vector<std::int64_t> dims;
};

/// The maximum (largest) or minimum over one dim, with its first position.
Extremum extremum_over(const Tensor& a, std::int64_t dim, bool largest, const char* op) {
  ops::check_defined(a, op, "self");
  Extremum e;
  const std::int64_t d = ops::wrap_dim(dim, a.dim(), op);
  if (a.dim() > 0) e.dims = {d};
  ops::check_nonempty(a, e.dims, op);
  e.values = ops::reduce_keepdim(a, e.dims, largest ? ReduceOp::Max : ReduceOp::Min, {}, a.dtype(), &e.indices);
  return e;
}

std::tuple<Tensor, Tensor> extremum_dim(const Tensor& a, std::int64_t dim, bool keepdim, bool largest, const char* op,
                                        const char* node) {
  Extremum e = extremum_over(a, dim, largest, op);
  const Shape shape = ops::reduced_shape(a.sizes(), e.dims, keepdim), in_shape = a.sizes();
  const Tensor indices = e.indices.reshape(shape);
  const std::size_t d = e.dims.empty() ? 0 : static_cast<std::size_t>(e.dims[0]);
  const std::int64_t outer = e.dims.empty() ? a.numel() : ops::prod(in_shape, 0, d);
  const std::int64_t n = e.dims.empty() ? 1 : in_shape[d];
  const std::int64_t inner = e.dims.empty() ? 1 : ops::prod(in_shape, d + 1, in_shape.size());
  autograd::SavedTensor si(e.indices, op);
  Tensor values = autograd::record(e.values.reshape(shape), node, {a}, [=](const Tensor& g) {
    Tensor dx = ops::empty_as(in_shape, g);
    MINIDL_ON_BACKEND(g.device(), scatter_reduced(g, si.get(), outer, n, inner, dx));
    return std::vector<Tensor>{dx};
  });
  return {values, indices};
}

/// amax / amin (and max() / min() over every element): the gradient split evenly among the elements equal to
/// the result (the NaNs, when it is NaN).
Tensor extremum_dims(const Tensor& a, const std::vector<std::int64_t>& dims, bool keepdim, bool largest, const char* op,
                     const char* node) {
  ops::check_nonempty(a, dims, op);
  const Tensor rk = ops::reduce_keepdim(a, dims, largest ? ReduceOp::Max : ReduceOp::Min, {}, a.dtype());
  autograd::SavedTensor sa(a, op), sr(rk, op);
  const Shape kept = rk.sizes();
  return autograd::record(rk.reshape(ops::reduced_shape(a.sizes(), dims, keepdim)), node, {a}, [=](const Tensor& g) {
    const Tensor x = sa.get(), r = sr.get();
    const Tensor mask = logical_or(eq(x, r), logical_and(ne(x, x), ne(r, r))).to(g.dtype());
    const Tensor share = div(g.reshape(kept), sum(mask, dims, true));
    return std::vector<Tensor>{mul(mask, share)};
  });
}

std::vector<std::int64_t> every_dim(const Tensor& a) {
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < a.dim(); ++d) dims.push_back(d);
  return dims;
}

Tensor arg_extremum(const Tensor& a, std::optional<std::int64_t> dim, bool keepdim, bool largest, const char* op) {
  ops::check_defined(a, op, "self");
  if (dim) {
    Extremum e = extremum_over(a, *dim, largest, op);
    return e.indices.reshape(ops::reduced_shape(a.sizes(), e.dims, keepdim));
  }
  const Tensor flat = extremum_over(a.reshape({-1}), 0, largest, op).indices;
  return keepdim ? flat.reshape(Shape(a.sizes().size(), 1)) : flat.reshape({});
}

}  // namespace

std::tuple<Tensor, Tensor> max(const Tensor& self, std::int64_t dim, bool keepdim) {
  return extremum_dim(self, dim, keepdim, true, "max", "MaxBackward");
}
std::tuple<Tensor, Tensor> min(const Tensor& self, std::int64_t dim, bool keepdim) {
  return extremum_dim(self, dim, keepdim, false, "min", "MinBackward");
}
Tensor max(const Tensor& self) {
  ops::check_defined(self, "max", "self");
  return extremum_dims(self, every_dim(self), false, true, "max", "MaxAllBackward");
}
Tensor min(const Tensor& self) {
  ops::check_defined(self, "min", "self");
  return extremum_dims(self, every_dim(self), false, false, "min", "MinAllBackward");
}
Tensor max(const Tensor& self, const Tensor& other) { return maximum(self, other); }
Tensor min(const Tensor& self, const Tensor& other) { return minimum(self, other); }

Tensor amax(const Tensor& self, IntArrayRef dim, bool keepdim) {
  ops::check_defined(self, "amax", "self");
  return extremum_dims(self, ops::reduction_dims(dim, self.dim(), "amax"), keepdim, true, "amax", "AmaxBackward");
}
Tensor amin(const Tensor& self, IntArrayRef dim, bool keepdim) {
  ops::check_defined(self, "amin", "self");
  return extremum_dims(self, ops::reduction_dims(dim, self.dim(), "amin"), keepdim, false, "amin", "AminBackward");
}

Tensor argmax(const Tensor& self, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_extremum(self, dim, keepdim, true, "argmax");
}
Tensor argmin(const Tensor& self, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_extremum(self, dim, keepdim, false, "argmin");
}

Tensor Tensor::max() const { return minidl::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(std::int64_t dim, bool keepdim) const {
  return minidl::max(*this, dim, keepdim);
}
Tensor Tensor::max(const Tensor& other) const { return minidl::max(*this, other); }
Tensor Tensor::min() const { return minidl::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(std::int64_t dim, bool keepdim) const {
  return minidl::min(*this, dim, keepdim);
}
Tensor Tensor::min(const Tensor& other) const { return minidl::min(*this, other); }
Tensor Tensor::argmax(std::optional<std::int64_t> dim, bool keepdim) const {
  return minidl::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<std::int64_t> dim, bool keepdim) const {
  return minidl::argmin(*this, dim, keepdim);
}
Tensor Tensor::amax(IntArrayRef dim, bool keepdim) const { return minidl::amax(*this, dim, keepdim); }
Tensor Tensor::amin(IntArrayRef dim, bool keepdim) const { return minidl::amin(*this, dim, keepdim); }

}  // namespace minidl
