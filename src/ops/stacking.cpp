// NumPy-style joining and splitting composed from cat, narrow and repeat: tensor_split, hstack, vstack, dstack and
// tile. Their pieces are views or cat's and repeat's results, so they run on every device and dtype those take and
// have their gradients.
#include <algorithm>

#include "minidl/joining.h"
#include "minidl/ops.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

/// The pieces [bounds[i], bounds[i + 1]) of self along dim, as views.
std::vector<Tensor> pieces(const Tensor& self, const std::vector<std::int64_t>& bounds, std::int64_t dim) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i)
    out.push_back(self.narrow(dim, bounds[i], bounds[i + 1] - bounds[i]));
  return out;
}

/// self with leading size-1 dims up to `ndim` dims (a 1-d tensor of n elements becomes 1 x n; for 3 dims,
/// 1 x n x 1 as NumPy's atleast_3d, which dstack uses).
Tensor at_least(const Tensor& self, std::int64_t ndim) {
  if (self.dim() >= ndim) return self;
  if (ndim == 3) {
    if (self.dim() == 0) return self.reshape({1, 1, 1});
    if (self.dim() == 1) return self.reshape({1, self.size(0), 1});
    return self.unsqueeze(-1);
  }
  Tensor t = self;
  while (t.dim() < ndim) t = t.unsqueeze(0);
  return t;
}

std::vector<Tensor> all_at_least(const std::vector<Tensor>& tensors, std::int64_t ndim, const char* op) {
  MINIDL_CHECK(!tensors.empty(), ValueError, op, ": expects a non-empty list of tensors");
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    MINIDL_CHECK(tensors[i].defined(), ValueError, op, ": tensor ", i, " of the list is undefined");
    out.push_back(at_least(tensors[i], ndim));
  }
  return out;
}

}  // namespace

std::vector<Tensor> tensor_split(const Tensor& self, std::int64_t sections, std::int64_t dim) {
  ops::check_defined(self, "tensor_split", "self");
  MINIDL_CHECK(self.dim() > 0, ValueError, "tensor_split: expected at least a 1-dimensional tensor");
  MINIDL_CHECK(sections > 0, ValueError, "tensor_split: number of sections must be larger than 0, got ", sections);
  const std::int64_t d = ops::wrap_dim(dim, self.dim(), "tensor_split"), size = self.size(d);
  std::vector<std::int64_t> bounds{0};
  for (std::int64_t i = 0; i < sections; ++i) bounds.push_back(bounds.back() + size / sections + (i < size % sections));
  return pieces(self, bounds, d);
}

std::vector<Tensor> tensor_split(const Tensor& self, const std::vector<std::int64_t>& indices, std::int64_t dim) {
  ops::check_defined(self, "tensor_split", "self");
  MINIDL_CHECK(self.dim() > 0, ValueError, "tensor_split: expected at least a 1-dimensional tensor");
  const std::int64_t d = ops::wrap_dim(dim, self.dim(), "tensor_split"), size = self.size(d);
  // Python slicing: a negative index counts from the end, and every bound is clamped to [previous bound, size].
  std::vector<std::int64_t> bounds{0};
  for (const std::int64_t i : indices) {
    bounds.push_back(std::clamp<std::int64_t>(i < 0 ? i + size : i, bounds.back(), size));
  }
  bounds.push_back(size);
  return pieces(self, bounds, d);
}

Tensor hstack(const std::vector<Tensor>& tensors) {
  const std::vector<Tensor> t = all_at_least(tensors, 1, "hstack");
  return cat(t, t[0].dim() == 1 ? 0 : 1);
}

Tensor vstack(const std::vector<Tensor>& tensors) { return cat(all_at_least(tensors, 2, "vstack"), 0); }

Tensor dstack(const std::vector<Tensor>& tensors) { return cat(all_at_least(tensors, 3, "dstack"), 2); }

Tensor tile(const Tensor& self, const std::vector<std::int64_t>& dims) {
  ops::check_defined(self, "tile", "self");
  std::vector<std::int64_t> reps(dims);
  if (static_cast<std::int64_t>(reps.size()) < self.dim()) reps.insert(reps.begin(), self.dim() - reps.size(), 1);
  return self.repeat(reps);
}

Tensor Tensor::tile(const std::vector<std::int64_t>& dims) const { return minidl::tile(*this, dims); }
std::vector<Tensor> Tensor::tensor_split(std::int64_t sections, std::int64_t dim) const {
  return minidl::tensor_split(*this, sections, dim);
}
std::vector<Tensor> Tensor::tensor_split(const std::vector<std::int64_t>& indices, std::int64_t dim) const {
  return minidl::tensor_split(*this, indices, dim);
}

}  // namespace minidl
