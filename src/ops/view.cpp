// View ops: each returns a tensor that shares its input's storage with other sizes, strides or storage offset,
// as PyTorch's views do, so nothing is copied (reshape copies only when no view can express its result, and
// contiguous() when the input is not). A view's backward maps the gradient of the view's shape back to the
// input's shape: a reshape or permute of it, a sum over expanded dims, or zeros with the gradient written into
// the viewed region.
#include <algorithm>
#include <numeric>

#include "autograd/node.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

std::int64_t elements_offset(const TensorImpl& i) {
  return static_cast<std::int64_t>(i.byte_offset / element_size(i.dtype));
}

/// A view of a's storage; its base is a's base (views of views point at the tensor that owns the storage).
Tensor make_view(const Tensor& a, Shape sizes, Shape strides, std::int64_t offset) {
  const TensorImpl& i = *a.unsafe_impl();
  auto impl = std::make_shared<TensorImpl>(i.storage, static_cast<std::size_t>(offset) * element_size(i.dtype),
                                           std::move(sizes), std::move(strides), i.dtype);
  impl->view_base = i.view_base ? i.view_base : a.impl_ptr();
  return Tensor(impl);
}

/// Strides that let `sizes` view a tensor of `old_sizes` / `old_strides` element for element in row-major
/// order, or an empty vector when none exist (PyTorch's computeStride: dims may be merged or split only within
/// runs of dims that are contiguous with each other).
Shape view_strides(const Shape& old_sizes, const Shape& old_strides, const Shape& sizes) {
  if (strides_are_contiguous(old_sizes, old_strides) || shape_numel(sizes) == 0) return contiguous_strides(sizes);
  Shape strides(sizes.size());
  auto view_d = static_cast<std::int64_t>(sizes.size()) - 1;
  std::int64_t chunk_base = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (auto d = static_cast<std::int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    const auto u = static_cast<std::size_t>(d);
    tensor_numel *= old_sizes[u];
    if (d == 0 || (old_sizes[u - 1] != 1 && old_strides[u - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[static_cast<std::size_t>(view_d)] == 1)) {
        strides[static_cast<std::size_t>(view_d)] = view_numel * chunk_base;
        view_numel *= sizes[static_cast<std::size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return {};
      if (d > 0) {
        chunk_base = old_strides[u - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1 ? strides : Shape{};
}

/// `shape_in` with a -1 replaced by the size that makes it hold `numel` elements; checked.
Shape infer_size(const Shape& shape_in, std::int64_t numel, const Shape& from, const char* op) {
  Shape shape = shape_in;
  std::int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      MINIDL_CHECK(infer < 0, ValueError, op, ": only one dimension can be inferred (-1) in ", shape_str(shape_in));
      infer = static_cast<std::int64_t>(i);
    } else {
      MINIDL_CHECK(shape[i] >= 0, ValueError, op, ": invalid size ", shape[i], " in ", shape_str(shape_in));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    MINIDL_CHECK(known > 0 && numel % known == 0, ValueError, op, ": shape ", shape_str(shape_in),
                 " is invalid for input of size ", numel, " (shape ", shape_str(from), ")");
    shape[static_cast<std::size_t>(infer)] = numel / known;
  }
  MINIDL_CHECK(shape_numel(shape) == numel, ValueError, op, ": shape ", shape_str(shape_in),
               " is invalid for input of size ", numel, " (shape ", shape_str(from), ")");
  return shape;
}

/// The gradient of a view that picks a region of its input: zeros of the input's geometry with g written into
/// the same region (`region` applies the view op to the zeros).
template <class Region>
Tensor scatter_into_zeros(const Tensor& g, const Shape& in_shape, Region region) {
  Tensor dx = zeros(in_shape, TensorOptions(g.dtype()).device(g.device()));
  region(dx).copy_(g);
  return dx;
}

Tensor reshape_view(const Tensor& a, const Shape& shape, const Shape& strides) {
  Tensor out = make_view(a, shape, strides, elements_offset(*a.unsafe_impl()));
  const Shape in_shape = a.sizes();
  return autograd::record_strided(out, "ViewBackward", {a}, [in_shape](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(in_shape)};
  });
}

}  // namespace

Tensor view(const Tensor& a, const Shape& shape_in) {
  ops::check_defined(a, "view", "self");
  const Shape shape = infer_size(shape_in, a.numel(), a.sizes(), "view");
  const Shape strides = view_strides(a.sizes(), a.strides(), shape);
  MINIDL_CHECK(!strides.empty() || shape.empty(), ValueError, "view: size ", shape_str(shape_in),
               " is not compatible with the input's size ", shape_str(a.sizes()), " and strides ",
               shape_str(a.strides()), " (at least one dimension spans across two contiguous subspaces); use "
               ".reshape(...) instead");
  return reshape_view(a, shape, strides);
}

Tensor reshape(const Tensor& a, const Shape& shape_in) {
  ops::check_defined(a, "reshape", "self");
  const Shape shape = infer_size(shape_in, a.numel(), a.sizes(), "reshape");
  const Shape strides = view_strides(a.sizes(), a.strides(), shape);
  if (!strides.empty() || shape.empty()) return reshape_view(a, shape, strides);
  return a.contiguous().view(shape);
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

Tensor permute(const Tensor& a, const std::vector<std::int64_t>& dims) {
  ops::check_defined(a, "permute", "self");
  const std::int64_t n = a.dim();
  MINIDL_CHECK(static_cast<std::int64_t>(dims.size()) == n, ValueError, "permute: expected ", n,
               " dims for an input of shape ", shape_str(a.sizes()), ", found ", dims.size());
  std::vector<std::int64_t> order(dims.size());
  std::vector<bool> seen(dims.size(), false);
  Shape sizes(dims.size()), strides(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<std::size_t>(ops::wrap_dim(dims[i], n, "permute"));
    MINIDL_CHECK(!seen[d], ValueError, "permute: dim ", dims[i], " appears twice in the list of dims");
    seen[d] = true;
    order[i] = static_cast<std::int64_t>(d);
    sizes[i] = a.sizes()[d];
    strides[i] = a.strides()[d];
  }
  Tensor out = make_view(a, sizes, strides, a.storage_offset());
  std::vector<std::int64_t> inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    inverse[static_cast<std::size_t>(order[i])] = static_cast<std::int64_t>(i);
  return autograd::record_strided(out, "PermuteBackward", {a}, [inverse](const Tensor& g) {
    return std::vector<Tensor>{g.permute(inverse)};
  });
}

Tensor transpose(const Tensor& a, std::int64_t dim0, std::int64_t dim1) {
  ops::check_defined(a, "transpose", "self");
  if (a.dim() == 0) {
    ops::wrap_dim(dim0, 0, "transpose");
    ops::wrap_dim(dim1, 0, "transpose");
    return a.view({});
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(a.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[static_cast<std::size_t>(ops::wrap_dim(dim0, a.dim(), "transpose"))],
            order[static_cast<std::size_t>(ops::wrap_dim(dim1, a.dim(), "transpose"))]);
  return permute(a, order);
}

Tensor movedim(const Tensor& a, const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination) {
  ops::check_defined(a, "movedim", "self");
  MINIDL_CHECK(source.size() == destination.size(), ValueError, "movedim: Invalid source or destination dims: source (",
               shape_str(source), ") and destination (", shape_str(destination),
               ") must have the same number of elements");
  const std::int64_t n = a.dim();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n), -1);
  std::vector<bool> moved(static_cast<std::size_t>(n), false);
  for (std::size_t i = 0; i < source.size(); ++i) {
    const std::int64_t s = ops::wrap_dim(source[i], n, "movedim"), d = ops::wrap_dim(destination[i], n, "movedim");
    MINIDL_CHECK(!moved[static_cast<std::size_t>(s)], ValueError, "movedim: repeated dim in `source` (",
                 shape_str(source), ")");
    MINIDL_CHECK(order[static_cast<std::size_t>(d)] < 0, ValueError, "movedim: repeated dim in `destination` (",
                 shape_str(destination), ")");
    moved[static_cast<std::size_t>(s)] = true;
    order[static_cast<std::size_t>(d)] = s;
  }
  // The dims not moved fill the free positions in their order.
  std::int64_t next = 0;
  for (std::int64_t& o : order) {
    if (o >= 0) continue;
    while (moved[static_cast<std::size_t>(next)]) ++next;
    o = next++;
  }
  return permute(a, order);
}
Tensor movedim(const Tensor& a, std::int64_t source, std::int64_t destination) {
  return movedim(a, std::vector<std::int64_t>{source}, std::vector<std::int64_t>{destination});
}
Tensor moveaxis(const Tensor& a, const std::vector<std::int64_t>& source,
                const std::vector<std::int64_t>& destination) {
  return movedim(a, source, destination);
}
Tensor moveaxis(const Tensor& a, std::int64_t source, std::int64_t destination) {
  return movedim(a, source, destination);
}
Tensor swapaxes(const Tensor& a, std::int64_t axis0, std::int64_t axis1) { return transpose(a, axis0, axis1); }
Tensor swapdims(const Tensor& a, std::int64_t dim0, std::int64_t dim1) { return transpose(a, dim0, dim1); }

Tensor diagonal(const Tensor& a, std::int64_t offset, std::int64_t dim1, std::int64_t dim2) {
  ops::check_defined(a, "diagonal", "self");
  MINIDL_CHECK(a.dim() >= 2, ValueError, "diagonal: needs at least 2 dims, found shape ", shape_str(a.sizes()));
  const std::int64_t d1 = ops::wrap_dim(dim1, a.dim(), "diagonal"), d2 = ops::wrap_dim(dim2, a.dim(), "diagonal");
  MINIDL_CHECK(d1 != d2, ValueError, "diagonal: dim1 and dim2 cannot be the same dim (", dim1, " and ", dim2, ")");
  const std::int64_t n1 = a.size(d1), n2 = a.size(d2);
  // Element (i, i + offset): rows from max(0, -offset), columns from max(0, offset).
  const std::int64_t length =
      std::max<std::int64_t>(0, offset >= 0 ? std::min(n1, n2 - offset) : std::min(n1 + offset, n2));
  std::int64_t start = a.storage_offset();
  if (length > 0) start += offset >= 0 ? offset * a.stride(d2) : -offset * a.stride(d1);
  Shape sizes, strides;
  for (std::int64_t d = 0; d < a.dim(); ++d) {
    if (d == d1 || d == d2) continue;
    sizes.push_back(a.size(d));
    strides.push_back(a.stride(d));
  }
  sizes.push_back(length);
  strides.push_back(a.stride(d1) + a.stride(d2));
  Tensor out = make_view(a, sizes, strides, start);
  const Shape in_shape = a.sizes();
  return autograd::record_strided(out, "DiagonalBackward", {a}, [=](const Tensor& g) {
    return std::vector<Tensor>{
        scatter_into_zeros(g, in_shape, [&](const Tensor& z) { return z.diagonal(offset, d1, d2); })};
  });
}

Tensor slice(const Tensor& a, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step) {
  ops::check_defined(a, "slice", "self");
  MINIDL_CHECK(a.dim() > 0, IndexError, "slice: cannot slice a 0-d tensor");
  MINIDL_CHECK(step > 0, ValueError, "slice: step must be positive, found ", step);
  const auto d = static_cast<std::size_t>(ops::wrap_dim(dim, a.dim(), "slice"));
  const std::int64_t size = a.sizes()[d];
  // Python's rules: negative bounds count from the end, and bounds beyond the dim are clamped.
  const auto clamp = [size](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + size : v, 0, size); };
  const std::int64_t b = clamp(start), e = std::max(b, clamp(end));
  Shape sizes = a.sizes(), strides = a.strides();
  sizes[d] = (e - b + step - 1) / step;
  strides[d] *= step;
  Tensor out = make_view(a, sizes, strides, a.storage_offset() + b * a.strides()[d]);
  const Shape in_shape = a.sizes();
  const auto sd = static_cast<std::int64_t>(d);
  return autograd::record_strided(out, "SliceBackward", {a}, [=](const Tensor& g) {
    return std::vector<Tensor>{
        scatter_into_zeros(g, in_shape, [&](const Tensor& z) { return z.slice(sd, b, e, step); })};
  });
}

Tensor narrow(const Tensor& a, std::int64_t dim, std::int64_t start, std::int64_t length) {
  ops::check_defined(a, "narrow", "self");
  MINIDL_CHECK(a.dim() > 0, IndexError, "narrow: cannot narrow a 0-d tensor");
  const std::int64_t d = ops::wrap_dim(dim, a.dim(), "narrow");
  const std::int64_t size = a.size(d);
  MINIDL_CHECK(start >= -size && start <= size, IndexError, "narrow: start ", start, " is out of range for dim ", dim,
               " of size ", size);
  const std::int64_t s = start < 0 ? start + size : start;
  MINIDL_CHECK(length >= 0 && s + length <= size, IndexError, "narrow: start (", s, ") + length (", length,
               ") exceeds dim ", dim, " of size ", size, " (shape ", shape_str(a.sizes()), ")");
  return slice(a, d, s, s + length, 1);
}

Tensor select(const Tensor& a, std::int64_t dim, std::int64_t index) {
  ops::check_defined(a, "select", "self");
  MINIDL_CHECK(a.dim() > 0, IndexError, "select: cannot select from a 0-d tensor");
  const auto d = static_cast<std::size_t>(ops::wrap_dim(dim, a.dim(), "select"));
  const std::int64_t size = a.sizes()[d];
  MINIDL_CHECK(index >= -size && index < size, IndexError, "select: index ", index, " is out of range for dim ", dim,
               " of size ", size, " (shape ", shape_str(a.sizes()), ")");
  const std::int64_t i = index < 0 ? index + size : index;
  Shape sizes = a.sizes(), strides = a.strides();
  sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(d));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(d));
  Tensor out = make_view(a, sizes, strides, a.storage_offset() + i * a.strides()[d]);
  const Shape in_shape = a.sizes();
  const auto sd = static_cast<std::int64_t>(d);
  return autograd::record_strided(out, "SelectBackward", {a}, [=](const Tensor& g) {
    return std::vector<Tensor>{scatter_into_zeros(g, in_shape, [&](const Tensor& z) { return z.select(sd, i); })};
  });
}

Tensor expand(const Tensor& a, const Shape& sizes_in) {
  ops::check_defined(a, "expand", "self");
  const Shape& s = a.sizes();
  MINIDL_CHECK(sizes_in.size() >= s.size(), ValueError, "expand: the number of sizes provided (", sizes_in.size(),
               ") must be greater or equal to the number of dimensions in the tensor (", s.size(), ")");
  const std::size_t lead = sizes_in.size() - s.size();
  Shape sizes(sizes_in.size()), strides(sizes_in.size());
  for (std::size_t i = 0; i < sizes_in.size(); ++i) {
    if (i < lead) {
      MINIDL_CHECK(sizes_in[i] >= 0, ValueError, "expand: the expanded size ", sizes_in[i], " of new leading dim ", i,
                   " must be non-negative");
      sizes[i] = sizes_in[i];
      strides[i] = 0;
      continue;
    }
    const std::int64_t have = s[i - lead], want = sizes_in[i] == -1 ? have : sizes_in[i];
    MINIDL_CHECK(have == want || have == 1, ValueError, "expand: the expanded size of the tensor (", sizes_in[i],
                 ") must match the existing size (", have, ") at non-singleton dimension ", i, ". Target sizes: ",
                 shape_str(sizes_in), ". Tensor sizes: ", shape_str(s));
    sizes[i] = want;
    strides[i] = have == want ? a.strides()[i - lead] : 0;
  }
  Tensor out = make_view(a, sizes, strides, a.storage_offset());
  const Shape in_shape = s;
  return autograd::record_strided(out, "ExpandBackward", {a}, [in_shape](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, in_shape)};
  });
}

/// True when no two index tuples of (sizes, strides) reach the same element: with the dims sorted by stride,
/// each stride must exceed the span of the dims below it.
bool non_overlapping(const Shape& sizes, const Shape& strides) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return true;
    if (sizes[i] > 1) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return strides[x] < strides[y]; });
  std::int64_t span = 0;  // the highest offset reachable with the dims so far
  for (std::size_t i : order) {
    if (strides[i] <= span) return false;
    span += (sizes[i] - 1) * strides[i];
  }
  return true;
}

Tensor as_strided(const Tensor& a, const Shape& sizes, const Shape& strides, std::int64_t offset) {
  ops::check_defined(a, "as_strided", "self");
  MINIDL_CHECK(sizes.size() == strides.size(), ValueError, "as_strided: ", sizes.size(), " sizes but ", strides.size(),
               " strides");
  MINIDL_CHECK(offset >= 0, ValueError, "as_strided: storage_offset must be non-negative, found ", offset);
  std::int64_t last = offset;  // the highest element the view reaches (offset - 1 when it has none)
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    MINIDL_CHECK(sizes[i] >= 0, ValueError, "as_strided: size ", sizes[i], " of dim ", i, " is negative");
    MINIDL_CHECK(strides[i] >= 0, ValueError, "as_strided: stride ", strides[i], " of dim ", i, " is negative");
  }
  if (shape_numel(sizes) == 0) {
    last = offset - 1;
  } else {
    for (std::size_t i = 0; i < sizes.size(); ++i) last += (sizes[i] - 1) * strides[i];
  }
  const TensorImpl& i = *a.unsafe_impl();
  const auto capacity = static_cast<std::int64_t>(i.storage ? i.storage->nbytes() / element_size(i.dtype) : 0);
  MINIDL_CHECK(last < capacity, ValueError, "as_strided: sizes ", shape_str(sizes), ", strides ", shape_str(strides),
               " and offset ", offset, " reach element ", last, " of a storage of ", capacity, " elements");
  // The gradient is written into the viewed region of zeros shaped like the input, which needs the input to be
  // its storage's contiguous layout and every element to be viewed at most once.
  MINIDL_CHECK(!a.requires_grad() || (a.is_contiguous() && non_overlapping(sizes, strides)), ValueError,
               "as_strided: a gradient can flow only from a view that reaches each element at most once of a "
               "contiguous input (input contiguous: ", a.is_contiguous() ? "yes" : "no", ", sizes ",
               shape_str(sizes), ", strides ", shape_str(strides), ")");
  Tensor out = make_view(a, sizes, strides, offset);
  const Shape in_shape = a.sizes();
  const std::int64_t start = offset - a.storage_offset();
  return autograd::record_strided(out, "AsStridedBackward", {a}, [=](const Tensor& g) {
    return std::vector<Tensor>{
        scatter_into_zeros(g, in_shape, [&](const Tensor& z) { return z.as_strided(sizes, strides, start); })};
  });
}

Tensor squeeze(const Tensor& a) {
  ops::check_defined(a, "squeeze", "self");
  Shape sizes, strides;
  for (std::size_t i = 0; i < a.sizes().size(); ++i) {
    if (a.sizes()[i] == 1) continue;
    sizes.push_back(a.sizes()[i]);
    strides.push_back(a.strides()[i]);
  }
  return reshape_view(a, sizes, strides);
}

Tensor squeeze(const Tensor& a, std::int64_t dim) {
  ops::check_defined(a, "squeeze", "self");
  const auto d = static_cast<std::size_t>(ops::wrap_dim(dim, a.dim(), "squeeze"));
  if (a.dim() == 0 || a.sizes()[d] != 1) return reshape_view(a, a.sizes(), a.strides());
  Shape sizes = a.sizes(), strides = a.strides();
  sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(d));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(d));
  return reshape_view(a, sizes, strides);
}

Tensor unsqueeze(const Tensor& a, std::int64_t dim) {
  ops::check_defined(a, "unsqueeze", "self");
  const auto d = static_cast<std::size_t>(ops::wrap_dim(dim, a.dim() + 1, "unsqueeze"));
  Shape sizes = a.sizes(), strides = a.strides();
  // The new dim's stride: what a size-1 dim there would have in a contiguous layout of the rest.
  const std::int64_t st = d < sizes.size() ? sizes[d] * strides[d] : 1;
  sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(d), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(d), st);
  return reshape_view(a, sizes, strides);
}

Tensor Tensor::view(const Shape& shape) const { return minidl::view(*this, shape); }
Tensor Tensor::reshape(const Shape& shape) const { return minidl::reshape(*this, shape); }
Tensor Tensor::flatten(std::int64_t s, std::int64_t e) const { return minidl::flatten(*this, s, e); }
Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const { return minidl::transpose(*this, d0, d1); }
Tensor Tensor::t() const {
  MINIDL_CHECK(dim() <= 2, ValueError, "t: expects a tensor with <= 2 dimensions, but self is ", dim(), "-d");
  return dim() < 2 ? minidl::transpose(*this, 0, 0) : minidl::transpose(*this, 0, 1);
}
Tensor Tensor::permute(const std::vector<std::int64_t>& dims) const { return minidl::permute(*this, dims); }
Tensor Tensor::movedim(const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination) const {
  return minidl::movedim(*this, source, destination);
}
Tensor Tensor::movedim(std::int64_t source, std::int64_t destination) const {
  return minidl::movedim(*this, source, destination);
}
Tensor Tensor::moveaxis(const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination) const {
  return minidl::movedim(*this, source, destination);
}
Tensor Tensor::moveaxis(std::int64_t source, std::int64_t destination) const {
  return minidl::movedim(*this, source, destination);
}
Tensor Tensor::swapaxes(std::int64_t axis0, std::int64_t axis1) const { return minidl::transpose(*this, axis0, axis1); }
Tensor Tensor::swapdims(std::int64_t dim0, std::int64_t dim1) const { return minidl::transpose(*this, dim0, dim1); }
Tensor Tensor::diagonal(std::int64_t offset, std::int64_t dim1, std::int64_t dim2) const {
  return minidl::diagonal(*this, offset, dim1, dim2);
}
Tensor Tensor::narrow(std::int64_t d, std::int64_t s, std::int64_t l) const { return minidl::narrow(*this, d, s, l); }
Tensor Tensor::slice(std::int64_t d, std::int64_t s, std::int64_t e, std::int64_t st) const {
  return minidl::slice(*this, d, s, e, st);
}
Tensor Tensor::select(std::int64_t d, std::int64_t i) const { return minidl::select(*this, d, i); }
Tensor Tensor::expand(const Shape& sizes) const { return minidl::expand(*this, sizes); }
Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, std::int64_t offset) const {
  return minidl::as_strided(*this, sizes, strides, offset);
}
Tensor Tensor::squeeze() const { return minidl::squeeze(*this); }
Tensor Tensor::squeeze(std::int64_t dim) const { return minidl::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(std::int64_t dim) const { return minidl::unsqueeze(*this, dim); }

}  // namespace minidl
