// index_select and its backward (an index_add into zeros). Each is the other's derivative, so gradients of
// any order come from the same two kernels (kernels/gather.h).
#include "minidl/indexing.h"

#include "kernels/backend.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

struct Layout {
  std::int64_t outer, n, inner;
};

Layout layout_of(const Shape& shape, std::int64_t dim) {
  const auto d = static_cast<std::size_t>(dim);
  return {ops::prod(shape, 0, d), shape[d], ops::prod(shape, d + 1, shape.size())};
}

Tensor select_unchecked(const Tensor& self, std::int64_t dim, const Tensor& index);

// Zeros of `shape` with the slices of `src` (index.numel() of them along dim) summed into rows index[j].
Tensor index_add_into_zeros(const Shape& shape, std::int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor dst = zeros(shape, TensorOptions(src.dtype()).device(src.device()));
  const Layout l = layout_of(shape, dim);
  MINIDL_ON_BACKEND(src.device(), index_add(src, index, dst, l.outer, l.n, l.inner));
  autograd::SavedTensor saved(index, "IndexAddBackward");
  return autograd::record(dst, "IndexAddBackward", {src}, [dim, saved](const Tensor& g) {
    return std::vector<Tensor>{select_unchecked(g, dim, saved.get())};
  });
}

// The forward once the arguments are known to be valid (the backward of index_add reuses an index that
// was checked when it was first selected with, and SavedTensor guarantees it has not changed since).
Tensor select_unchecked(const Tensor& self, std::int64_t dim, const Tensor& index) {
  Shape out_shape = self.sizes();
  out_shape[static_cast<std::size_t>(dim)] = index.numel();
  Tensor out = ops::empty_as(out_shape, self);
  const Layout l = layout_of(self.sizes(), dim);
  MINIDL_ON_BACKEND(self.device(), index_select(self, index, out, l.outer, l.n, l.inner));
  if (!is_floating_point(self.dtype())) return out;
  autograd::SavedTensor saved(index, "IndexSelectBackward");
  const Shape in_shape = self.sizes();
  return autograd::record(out, "IndexSelectBackward", {self}, [in_shape, dim, saved](const Tensor& g) {
    return std::vector<Tensor>{index_add_into_zeros(in_shape, dim, saved.get(), g)};
  });
}

}  // namespace

Tensor index_select(const Tensor& self, std::int64_t dim, const Tensor& index) {
  ops::check_defined(self, "index_select", "self");
  ops::check_defined(index, "index_select", "index");
  MINIDL_CHECK(self.dim() >= 1, ValueError, "index_select: expected 'self' to have at least one dimension, found a ",
               "0-d tensor");
  MINIDL_CHECK(index.dtype() == kInt64, TypeError, "index_select: expected 'index' of dtype int64, found ",
               index.dtype());
  MINIDL_CHECK(index.dim() <= 1, ValueError, "index_select: expected 'index' with at most one dimension, found shape ",
               shape_str(index.sizes()));
  MINIDL_CHECK(index.device() == self.device(), TypeError, "index_select: expected 'index' on the device of 'self' (",
               self.device(), "), found ", index.device());
  const std::int64_t d = ops::wrap_dim(dim, self.dim(), "index_select");
  const std::int64_t n = self.size(d);
  std::int64_t bad = -1;
  if (self.is_cuda()) {
#if MINIDL_CUDA_ENABLED
    gpu::DeviceGuard guard(self.device().index());
    bad = gpu::first_out_of_range(index, n);
#endif
  } else {
    bad = cpu::first_out_of_range(index, n);
  }
  if (bad >= 0) {
    const std::int64_t value = index.reshape({-1}).to_vector<std::int64_t>()[static_cast<std::size_t>(bad)];
    throw IndexError(detail::str("index_select: index[", bad, "] = ", value, " is out of range for dimension ", d,
                                 " of size ", n, " (self has shape ", shape_str(self.sizes()), ")"));
  }
  return select_unchecked(ops::dense(self), d, ops::dense(index));
}

}  // namespace minidl
