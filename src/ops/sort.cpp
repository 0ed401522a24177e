// sort, argsort and topk along one dim, every dtype. The backends order contiguous rows, so a dim other than the
// last is moved last for them (one copy in, one out). The gradient of the values goes back to the positions they
// came from.
#include <algorithm>

#include "ops/op_utils.h"

namespace minidl {
namespace {

struct Rows {
  Tensor x;                 // (rows, n), contiguous
  std::int64_t d, n, rows;  // the wrapped dim, its size, the number of rows
};

Rows rows_of(const Tensor& self, std::int64_t dim, const char* op) {
  ops::check_defined(self, op, "self");
  Rows r;
  r.d = ops::wrap_dim(dim, self.dim(), op);
  r.n = self.dim() == 0 ? 1 : self.size(r.d);
  NoGradGuard no_grad;
  const Tensor moved = self.dim() == 0 || r.d == self.dim() - 1 ? self : self.transpose(r.d, -1);
  r.x = ops::dense(moved);
  r.rows = self.dim() == 0 ? 1 : ops::prod(moved.sizes(), 0, moved.sizes().size() - 1);
  return r;
}

/// A (rows, k) result laid out as self with dim d of size k.
Tensor restore(const Tensor& t, const Tensor& self, std::int64_t d, std::int64_t k) {
  if (self.dim() == 0) return t.reshape({});
  Shape moved = self.sizes();
  std::swap(moved[static_cast<std::size_t>(d)], moved.back());
  moved.back() = k;
  const Tensor r = t.reshape(moved);
  return d == self.dim() - 1 ? r : r.transpose(d, -1).contiguous();
}

/// Records the values' backward: the gradient scattered along d to the positions in `indices`.
Tensor record_selected(const Tensor& values, const Tensor& self, std::int64_t d, const Tensor& indices,
                       const char* node) {
  const Shape in_shape = self.sizes();
  const std::size_t u = static_cast<std::size_t>(d);
  const std::int64_t outer = self.dim() == 0 ? 1 : ops::prod(in_shape, 0, u);
  const std::int64_t n = self.dim() == 0 ? 1 : in_shape[u];
  const std::int64_t inner = self.dim() == 0 ? 1 : ops::prod(in_shape, u + 1, in_shape.size());
  autograd::SavedTensor si(indices, node);
  return autograd::record(values, node, {self}, [=](const Tensor& g) {
    Tensor dx = ops::empty_as(in_shape, g);
    MINIDL_ON_BACKEND(g.device(), scatter_reduced(g, si.get(), outer, n, inner, dx));
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& self, std::int64_t dim, bool descending) {
  const Rows r = rows_of(self, dim, "sort");
  Tensor values = ops::empty_as(r.x.sizes(), r.x);
  Tensor indices = empty(r.x.sizes(), TensorOptions(kInt64).device(r.x.device()));
  MINIDL_ON_BACKEND(r.x.device(), sort(r.x, r.rows, r.n, descending, values, indices));
  {
    NoGradGuard no_grad;
    values = restore(values, self, r.d, r.n);
    indices = restore(indices, self, r.d, r.n);
  }
  return {record_selected(values, self, r.d, indices, "SortBackward"), indices};
}

std::tuple<Tensor, Tensor> sort(const Tensor& self, std::optional<bool>, std::int64_t dim, bool descending) {
  return sort(self, dim, descending);
}

Tensor argsort(const Tensor& self, std::int64_t dim, bool descending) {
  NoGradGuard no_grad;
  return std::get<1>(sort(self, dim, descending));
}

std::tuple<Tensor, Tensor> topk(const Tensor& self, std::int64_t k, std::int64_t dim, bool largest, bool sorted) {
  const Rows r = rows_of(self, dim, "topk");
  MINIDL_CHECK(k >= 0 && k <= r.n, IndexError, "topk: argument 'k' (", k, ") is out of range for dimension ", r.d,
               " of size ", r.n, " (expected 0 <= k <= ", r.n, ")");
  Tensor values = empty({r.rows, k}, TensorOptions(self.dtype()).device(self.device()));
  Tensor indices = empty({r.rows, k}, TensorOptions(kInt64).device(self.device()));
  MINIDL_ON_BACKEND(r.x.device(), topk(r.x, r.rows, r.n, k, largest, sorted, values, indices));
  {
    NoGradGuard no_grad;
    values = restore(values, self, r.d, k);
    indices = restore(indices, self, r.d, k);
  }
  return {record_selected(values, self, r.d, indices, "TopkBackward"), indices};
}

std::tuple<Tensor, Tensor> Tensor::topk(std::int64_t k, std::int64_t dim, bool largest, bool sorted) const {
  return minidl::topk(*this, k, dim, largest, sorted);
}
std::tuple<Tensor, Tensor> Tensor::sort(std::int64_t dim, bool descending) const {
  return minidl::sort(*this, dim, descending);
}
std::tuple<Tensor, Tensor> Tensor::sort(std::optional<bool> stable, std::int64_t dim, bool descending) const {
  return minidl::sort(*this, stable, dim, descending);
}
Tensor Tensor::argsort(std::int64_t dim, bool descending) const { return minidl::argsort(*this, dim, descending); }

}  // namespace minidl
