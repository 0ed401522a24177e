// Ops that reorder or repeat a tensor's elements, composed from views and the copy and cat kernels: flip reads its
// input through a view with negated strides (internal: minidl's public views keep strides non-negative, as
// PyTorch's do), roll is a cat of two slices per dim, repeat and repeat_interleave (int repeats) copy an expanded
// view, and repeat_interleave with a tensor of repeats is an index_select. Their gradients come from the same
// pieces: flip and roll back by the opposite motion, the rest through expand's sum and index_select's backward.
#include <algorithm>

#include "minidl/indexing.h"
#include "minidl/joining.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

/// Wrapped dims, each at most once.
std::vector<std::int64_t> unique_dims(const std::vector<std::int64_t>& dims, std::int64_t ndim, const char* op) {
  std::vector<std::int64_t> r;
  for (std::int64_t d : dims) {
    const std::int64_t w = ops::wrap_dim(d, ndim, op);
    MINIDL_CHECK(std::find(r.begin(), r.end(), w) == r.end(), ValueError, op, ": dim ", w,
                 " appears multiple times in the list of dims ", shape_str(dims));
    r.push_back(w);
  }
  return r;
}

/// A copy of the expanded view `e` (contiguous, never sharing e's storage) in the shape `shape`.
Tensor materialize(const Tensor& e, const Shape& shape) {
  return (e.is_contiguous() ? e.clone() : e.contiguous()).view(shape);
}

/// One roll along d, as a cat of the last `shift` slices and the others (no autograd: roll records its own).
Tensor roll_dim(const Tensor& t, std::int64_t shift, std::int64_t d) {
  const std::int64_t n = t.size(d);
  if (n == 0) return t;
  const std::int64_t s = ((shift % n) + n) % n;
  if (s == 0) return t;
  return cat({t.narrow(d, n - s, s), t.narrow(d, 0, n - s)}, d);
}

}  // namespace

Tensor flip(const Tensor& self, const std::vector<std::int64_t>& dims_in) {
  ops::check_defined(self, "flip", "self");
  const std::vector<std::int64_t> dims = unique_dims(dims_in, self.dim(), "flip");
  const TensorImpl& impl = *self.unsafe_impl();
  Shape strides = self.strides();
  auto offset = static_cast<std::int64_t>(impl.byte_offset / self.element_size());
  for (std::int64_t d : dims) {
    if (d >= self.dim() || self.size(d) < 2) continue;  // a 0-d tensor's dim 0, or nothing to reverse
    offset += (self.size(d) - 1) * strides[static_cast<std::size_t>(d)];
    strides[static_cast<std::size_t>(d)] = -strides[static_cast<std::size_t>(d)];
  }
  const Tensor reversed(std::make_shared<TensorImpl>(
      impl.storage, static_cast<std::size_t>(offset) * self.element_size(), self.sizes(), strides, self.dtype()));
  Tensor out = ops::empty_as(self.sizes(), self);
  MINIDL_ON_BACKEND(self.device(), copy(reversed, out));
  return autograd::record(out, "FlipBackward", {self}, [dims](const Tensor& g) {
    return std::vector<Tensor>{flip(g, dims)};
  });
}

Tensor roll(const Tensor& self, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims) {
  ops::check_defined(self, "roll", "self");
  if (dims.empty()) {
    MINIDL_CHECK(shifts.size() == 1, ValueError, "roll: shifts and dims must align: found ", shifts.size(),
                 " shifts and no dims (without dims, roll takes one shift and rolls the flattened tensor)");
    return roll(self.flatten(), shifts, {0}).view(self.sizes());
  }
  MINIDL_CHECK(shifts.size() == dims.size(), ValueError, "roll: shifts and dims must align: found ", shifts.size(),
               " shifts and ", dims.size(), " dims");
  MINIDL_CHECK(self.dim() > 0, IndexError, "roll: dims ", shape_str(dims), " given for a 0-d tensor");
  std::vector<std::int64_t> wrapped;
  for (std::int64_t d : dims) wrapped.push_back(ops::wrap_dim(d, self.dim(), "roll"));
  Tensor out;
  {
    NoGradGuard no_grad;
    out = self;
    for (std::size_t i = 0; i < wrapped.size(); ++i) out = roll_dim(out, shifts[i], wrapped[i]);
    if (out.is_same(self)) out = self.clone();  // nothing moved: still a new tensor
  }
  std::vector<std::int64_t> back;
  for (std::int64_t s : shifts) back.push_back(-s);
  return autograd::record(out, "RollBackward", {self}, [back, wrapped](const Tensor& g) {
    return std::vector<Tensor>{roll(g, back, wrapped)};
  });
}

Tensor roll(const Tensor& self, std::int64_t shift) { return roll(self, std::vector<std::int64_t>{shift}); }
Tensor roll(const Tensor& self, std::int64_t shift, std::int64_t dim) {
  return roll(self, std::vector<std::int64_t>{shift}, std::vector<std::int64_t>{dim});
}

Tensor Tensor::repeat(const std::vector<std::int64_t>& repeats) const {
  ops::check_defined(*this, "repeat", "self");
  const auto ndim = static_cast<std::size_t>(dim());
  MINIDL_CHECK(repeats.size() >= ndim, ValueError, "repeat: the number of repeats (", repeats.size(),
               ") can not be smaller than the number of dimensions of the tensor (", ndim, ", shape ",
               shape_str(sizes()), ")");
  const std::size_t lead = repeats.size() - ndim;
  // Dim i becomes the pair (repeats[i], size[i]): the view expands a size-1 dim before each, the copy lays it out.
  Shape pairs, expanded, result;
  for (std::size_t i = 0; i < repeats.size(); ++i) {
    MINIDL_CHECK(repeats[i] >= 0, ValueError, "repeat: expected non-negative repeats, found ", shape_str(repeats));
    const std::int64_t s = i < lead ? 1 : sizes()[i - lead];
    pairs.insert(pairs.end(), {1, s});
    expanded.insert(expanded.end(), {repeats[i], s});
    result.push_back(repeats[i] * s);
  }
  return materialize(reshape(pairs).expand(expanded), result);
}

Tensor repeat_interleave(const Tensor& self, std::int64_t repeats, std::optional<std::int64_t> dim,
                         std::optional<std::int64_t> output_size) {
  ops::check_defined(self, "repeat_interleave", "self");
  MINIDL_CHECK(repeats >= 0, ValueError, "repeat_interleave: repeats can not be negative, found ", repeats);
  MINIDL_CHECK(!dim || self.dim() > 0, IndexError, "repeat_interleave: dim ", *dim, " given for a 0-d tensor");
  const Tensor x = dim ? self : self.flatten();
  const std::int64_t d = dim ? ops::wrap_dim(*dim, self.dim(), "repeat_interleave") : 0;
  Shape result = x.sizes();
  result[static_cast<std::size_t>(d)] *= repeats;
  MINIDL_CHECK(!output_size || *output_size == result[static_cast<std::size_t>(d)], ValueError,
               "repeat_interleave: output_size ", output_size.value_or(0), " does not match the result's size ",
               result[static_cast<std::size_t>(d)], " along dim ", d);
  Shape expanded = x.sizes();
  expanded.insert(expanded.begin() + d + 1, repeats);
  return materialize(x.unsqueeze(d + 1).expand(expanded), result);
}

Tensor repeat_interleave(const Tensor& repeats, std::optional<std::int64_t> output_size) {
  ops::check_defined(repeats, "repeat_interleave", "repeats");
  MINIDL_CHECK(repeats.dtype() == kInt64 || repeats.dtype() == kInt32, TypeError,
               "repeat_interleave: expected 'repeats' of dtype int64 or int32, found ", repeats.dtype());
  MINIDL_CHECK(repeats.dim() == 1, ValueError, "repeat_interleave: expected 'repeats' to be a 1-d tensor, found shape ",
               shape_str(repeats.sizes()));
  const std::vector<std::int64_t> counts = repeats.to(kInt64).to_vector<std::int64_t>();
  std::vector<std::int64_t> index;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    MINIDL_CHECK(counts[i] >= 0, ValueError, "repeat_interleave: repeats can not be negative, found repeats[", i,
                 "] = ", counts[i]);
    index.insert(index.end(), static_cast<std::size_t>(counts[i]), static_cast<std::int64_t>(i));
  }
  const auto total = static_cast<std::int64_t>(index.size());
  MINIDL_CHECK(!output_size || *output_size == total, ValueError, "repeat_interleave: output_size ",
               output_size.value_or(0), " does not match the sum of the repeats, ", total);
  return from_vector(index, {total}, TensorOptions(kInt64).device(repeats.device()));
}

Tensor repeat_interleave(const Tensor& self, const Tensor& repeats, std::optional<std::int64_t> dim,
                         std::optional<std::int64_t> output_size) {
  ops::check_defined(self, "repeat_interleave", "self");
  ops::check_defined(repeats, "repeat_interleave", "repeats");
  MINIDL_CHECK(repeats.dtype() == kInt64 || repeats.dtype() == kInt32, TypeError,
               "repeat_interleave: expected 'repeats' of dtype int64 or int32, found ", repeats.dtype());
  MINIDL_CHECK(repeats.dim() <= 1, ValueError, "repeat_interleave: expected 'repeats' to be 0-d or 1-d, found shape ",
               shape_str(repeats.sizes()));
  if (repeats.numel() == 1) return repeat_interleave(self, repeats.to(kInt64).item<std::int64_t>(), dim, output_size);
  MINIDL_CHECK(!dim || self.dim() > 0, IndexError, "repeat_interleave: dim ", *dim, " given for a 0-d tensor");
  const Tensor x = dim ? self : self.flatten();
  const std::int64_t d = dim ? ops::wrap_dim(*dim, self.dim(), "repeat_interleave") : 0;
  MINIDL_CHECK(repeats.numel() == x.size(d), ValueError, "repeat_interleave: repeats must have the same size as the "
               "input along dim ", d, ": found ", repeats.numel(), " repeats for size ", x.size(d), " (shape ",
               shape_str(x.sizes()), ")");
  return index_select(x, d, repeat_interleave(repeats.reshape({-1}), output_size).to(self.device()));
}

Tensor Tensor::flip(const std::vector<std::int64_t>& dims) const { return minidl::flip(*this, dims); }
Tensor Tensor::roll(const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims) const {
  return minidl::roll(*this, shifts, dims);
}
Tensor Tensor::roll(std::int64_t shift) const { return minidl::roll(*this, shift); }
Tensor Tensor::roll(std::int64_t shift, std::int64_t dim) const { return minidl::roll(*this, shift, dim); }
Tensor Tensor::repeat_interleave(std::int64_t repeats, std::optional<std::int64_t> dim,
                                 std::optional<std::int64_t> output_size) const {
  return minidl::repeat_interleave(*this, repeats, dim, output_size);
}
Tensor Tensor::repeat_interleave(const Tensor& repeats, std::optional<std::int64_t> dim,
                                 std::optional<std::int64_t> output_size) const {
  return minidl::repeat_interleave(*this, repeats, dim, output_size);
}

}  // namespace minidl
