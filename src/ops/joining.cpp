// Joining (cat, stack) and splitting (split, chunk, unbind). cat writes every input into its slice of the result in
// one pass, and its backward hands each input the matching slice (a view) of the gradient. The pieces of a split are
// views of the input; their backward rules write into one gradient buffer of the input's shape (record_pieces).
#include "autograd/node.h"
#include "autocast/policy.h"
#include "kernels/joining.h"
#include "minidl/joining.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

/// PyTorch's legacy rule: a 1-d tensor without elements may join tensors of any shape, and is left out.
bool skipped_by_cat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

/// Views of `self` given to the user as the pieces of a split: `region(buffer, k)` is piece k's region of a
/// tensor of self's shape. The engine's nodes have one output each, so every piece gets a node of its own; a node
/// per piece that returned zeros of self's shape with its gradient inside would cost a full-size buffer and sum
/// per piece (quadratic for unbind over a long dim). Instead the pieces' nodes write their gradients (of any
/// strides) into one shared buffer and pass an empty token to a common node, which the engine runs after all of
/// them (it counts their edges), zero-fills the regions of the pieces that got no gradient, and hands the buffer on
/// as self's gradient: one pass over self's elements, as PyTorch's cat of the pieces' gradients.
template <class Region>
std::vector<Tensor> record_pieces(const Tensor& self, std::vector<Tensor> pieces, Region region, const char* node) {
  if (!autograd::grad_mode_enabled() || !self.requires_grad()) return pieces;
  const TensorOptions options = TensorOptions(self.dtype()).device(self.device());
  const Shape shape = self.sizes();
  struct Gradient {
    Tensor buffer;
    std::vector<bool> written;  // per piece
  };
  auto grad = std::make_shared<Gradient>();
  grad->written.assign(pieces.size(), false);
  const Tensor token = empty({0}, options);
  const Tensor gather = autograd::record(empty({0}, options), node, {self}, [grad, region](const Tensor&) {
    Tensor g = std::move(grad->buffer);
    grad->buffer = Tensor();
    for (std::size_t k = 0; k < grad->written.size(); ++k) {
      if (!grad->written[k]) region(g, static_cast<std::int64_t>(k)).zero_();
      grad->written[k] = false;
    }
    return std::vector<Tensor>{g};
  });
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    pieces[k] = autograd::record_strided(pieces[k], node, {gather}, [=](const Tensor& g) {
      if (!grad->buffer.defined()) grad->buffer = empty(shape, options);
      region(grad->buffer, static_cast<std::int64_t>(k)).copy_(g);
      grad->written[k] = true;
      return std::vector<Tensor>{token};
    });
  }
  return pieces;
}

/// self split along dim into pieces of the given sizes (checked by the callers).
std::vector<Tensor> split_pieces(const Tensor& self, std::int64_t dim, const std::vector<std::int64_t>& sizes) {
  std::vector<Tensor> pieces;
  std::vector<std::int64_t> starts;
  {
    NoGradGuard no_grad;
    std::int64_t start = 0;
    for (std::int64_t size : sizes) {
      pieces.push_back(self.narrow(dim, start, size));
      starts.push_back(start);
      start += size;
    }
  }
  return record_pieces(
      self, std::move(pieces),
      [dim, starts, sizes](const Tensor& t, std::int64_t k) {
        const auto i = static_cast<std::size_t>(k);
        return t.narrow(dim, starts[i], sizes[i]);
      },
      "SplitBackward");
}

std::int64_t split_dim(const Tensor& self, std::int64_t dim, const char* op) {
  ops::check_defined(self, op, "self");
  MINIDL_CHECK(self.dim() > 0, ValueError, op, ": expected a tensor with at least one dimension, found a 0-d tensor");
  return ops::wrap_dim(dim, self.dim(), op);
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  MINIDL_AUTOCAST(cat, tensors, dim);
  MINIDL_CHECK(!tensors.empty(), ValueError, "cat: expected a non-empty list of tensors");
  const Tensor* ref = nullptr;  // the first tensor that is not skipped: it sets the rank and the sizes
  DType dtype = DType::Bool;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    MINIDL_CHECK(t.defined(), ValueError, "cat: tensor ", k, " of the list is undefined");
    MINIDL_CHECK(t.dim() > 0, ValueError, "cat: tensor ", k, " of the list is 0-d; a zero-dimensional tensor cannot "
                 "be concatenated (unsqueeze it, or use stack)");
    MINIDL_CHECK(t.device() == tensors[0].device(), TypeError, "cat: expected all tensors on one device, found ",
                 tensors[0].device(), " (tensor 0) and ", t.device(), " (tensor ", k, ")");
    dtype = k == 0 ? t.dtype() : promote_types(dtype, t.dtype());
    if (!ref && !skipped_by_cat(t)) ref = &t;
  }
  const Device device = tensors[0].device();
  const TensorOptions options = TensorOptions(dtype).device(device);
  const std::int64_t d = ref ? ops::wrap_dim(dim, ref->dim(), "cat") : 0;
  Shape shape = ref ? ref->sizes() : Shape{0};
  shape[static_cast<std::size_t>(d)] = 0;
  std::vector<std::int64_t> starts(tensors.size(), 0);
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    if (skipped_by_cat(t)) continue;
    MINIDL_CHECK(t.dim() == ref->dim(), ValueError, "cat: tensors must have the same number of dimensions: tensor ",
                 k, " has ", t.dim(), " (shape ", shape_str(t.sizes()), "), the first has ", ref->dim(), " (shape ",
                 shape_str(ref->sizes()), ")");
    for (std::int64_t i = 0; i < t.dim(); ++i) {
      MINIDL_CHECK(i == d || t.size(i) == ref->size(i), ValueError, "cat: sizes of tensors must match except in "
                   "dimension ", d, ": expected size ", ref->size(i), " in dimension ", i, " but found size ",
                   t.size(i), " for tensor ", k, " of the list (shape ", shape_str(t.sizes()), ")");
    }
    starts[k] = shape[static_cast<std::size_t>(d)];
    shape[static_cast<std::size_t>(d)] += t.size(d);
  }
  Tensor out = empty(shape, options);
  // Inputs in the result's dtype and laid out as rows (kernels/joining.h) go to the one cat kernel; the others are
  // converted and copied into their slice by the copy kernel, which reads any strides.
  std::vector<Tensor> direct;
  std::vector<std::int64_t> direct_starts;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    if (skipped_by_cat(t) || t.numel() == 0) continue;
    if (t.dtype() == dtype && kernels::cat_row_stride(t, d) >= 0) {
      direct.push_back(t);
      direct_starts.push_back(starts[k]);
      continue;
    }
    Tensor slice;
    {
      NoGradGuard no_grad;
      slice = out.narrow(d, starts[k], t.size(d));
    }
    MINIDL_ON_BACKEND(device, copy(t, slice));
  }
  if (!direct.empty()) MINIDL_ON_BACKEND(device, cat(direct, direct_starts, d, out));

  std::vector<Shape> sizes;
  std::vector<DType> dtypes;
  std::vector<bool> need;
  for (const Tensor& t : tensors) {
    sizes.push_back(t.sizes());
    dtypes.push_back(t.dtype());
    need.push_back(t.requires_grad());
  }
  return autograd::record_strided(out, "CatBackward", tensors, [=](const Tensor& g) {
    std::vector<Tensor> grads(sizes.size());
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      if (!need[k]) continue;
      const bool skipped = sizes[k].size() == 1 && sizes[k][0] == 0;
      const Tensor slice = skipped ? empty({0}, TensorOptions(g.dtype()).device(g.device()))
                                   : g.narrow(d, starts[k], sizes[k][static_cast<std::size_t>(d)]);
      grads[k] = slice.dtype() == dtypes[k] ? slice : slice.to(dtypes[k]);
    }
    return grads;
  });
}

Tensor concat(const std::vector<Tensor>& tensors, std::int64_t dim) { return cat(tensors, dim); }
Tensor concatenate(const std::vector<Tensor>& tensors, std::int64_t dim) { return cat(tensors, dim); }

Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim) {
  MINIDL_AUTOCAST(stack, tensors, dim);
  MINIDL_CHECK(!tensors.empty(), ValueError, "stack: expected a non-empty list of tensors");
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    MINIDL_CHECK(tensors[k].defined(), ValueError, "stack: tensor ", k, " of the list is undefined");
    MINIDL_CHECK(tensors[k].sizes() == tensors[0].sizes(), ValueError, "stack: expects each tensor to be equal size, "
                 "but found ", shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[k].sizes()),
                 " at entry ", k);
  }
  const std::int64_t d = ops::wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> unsqueezed;
  for (const Tensor& t : tensors) unsqueezed.push_back(t.unsqueeze(d));
  return cat(unsqueezed, d);
}

std::vector<Tensor> split(const Tensor& self, std::int64_t split_size, std::int64_t dim) {
  const std::int64_t d = split_dim(self, dim, "split");
  const std::int64_t size = self.size(d);
  MINIDL_CHECK(split_size >= 0, ValueError, "split: expected a non-negative split_size, found ", split_size);
  MINIDL_CHECK(split_size > 0 || size == 0, ValueError, "split: split_size can be 0 only for a dimension of size 0, "
               "but dimension ", d, " has size ", size);
  const std::int64_t count = split_size == 0 ? 1 : std::max<std::int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(count), split_size);
  sizes.back() = size - split_size * (count - 1);
  return split_pieces(self, d, sizes);
}

std::vector<Tensor> split_with_sizes(const Tensor& self, const std::vector<std::int64_t>& split_sizes,
                                     std::int64_t dim) {
  const std::int64_t d = split_dim(self, dim, "split_with_sizes");
  std::int64_t sum = 0;
  for (std::int64_t s : split_sizes) {
    MINIDL_CHECK(s >= 0, ValueError, "split_with_sizes: expected split_sizes to have only non-negative entries, "
                 "found ", shape_str(split_sizes));
    sum += s;
  }
  MINIDL_CHECK(sum == self.size(d), ValueError, "split_with_sizes: expected split_sizes to sum exactly to ",
               self.size(d), " (the size of dimension ", d, " of the input, shape ", shape_str(self.sizes()),
               "), found ", shape_str(split_sizes));
  return split_pieces(self, d, split_sizes);
}

std::vector<Tensor> split(const Tensor& self, const std::vector<std::int64_t>& split_sizes, std::int64_t dim) {
  return split_with_sizes(self, split_sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& self, std::int64_t chunks, std::int64_t dim) {
  const std::int64_t d = split_dim(self, dim, "chunk");
  MINIDL_CHECK(chunks > 0, ValueError, "chunk: expected `chunks` to be greater than 0, found ", chunks);
  const std::int64_t size = self.size(d), split_size = (size + chunks - 1) / chunks;
  // An empty dim gives `chunks` empty pieces (split would give one).
  if (size == 0) return split_with_sizes(self, std::vector<std::int64_t>(static_cast<std::size_t>(chunks), 0), d);
  return split(self, split_size, d);
}

std::vector<Tensor> unbind(const Tensor& self, std::int64_t dim) {
  ops::check_defined(self, "unbind", "self");
  MINIDL_CHECK(self.dim() > 0, IndexError, "unbind: dimension specified as ", dim, " but the tensor has no "
               "dimensions");
  const std::int64_t d = ops::wrap_dim(dim, self.dim(), "unbind");
  std::vector<Tensor> pieces;
  {
    NoGradGuard no_grad;
    for (std::int64_t i = 0; i < self.size(d); ++i) pieces.push_back(self.select(d, i));
  }
  return record_pieces(
      self, std::move(pieces), [d](const Tensor& t, std::int64_t k) { return t.select(d, k); }, "UnbindBackward");
}

std::vector<Tensor> Tensor::split(std::int64_t split_size, std::int64_t dim) const {
  return minidl::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(const std::vector<std::int64_t>& split_sizes, std::int64_t dim) const {
  return minidl::split(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::split_with_sizes(const std::vector<std::int64_t>& split_sizes, std::int64_t dim) const {
  return minidl::split_with_sizes(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::chunk(std::int64_t chunks, std::int64_t dim) const {
  return minidl::chunk(*this, chunks, dim);
}
std::vector<Tensor> Tensor::unbind(std::int64_t dim) const { return minidl::unbind(*this, dim); }

}  // namespace minidl
