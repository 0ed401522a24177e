// x.index({...}), index_put_, masked_select and nonzero. Indexing runs in two steps, as PyTorch's does: the basic
// entries (integers, slices, None, Ellipsis) are applied as views of x, and the tensor entries are collected with
// the dim of that view each one indexes (a bool mask becomes its nonzero() coordinates, one index tensor per dim
// it covers). With no tensor entry the view is the result; otherwise one gather over the view (ops/index_access.h),
// whose gradient is index_put with accumulate into zeros. index_put_ writes through the same view.
#include <cstring>

#include "autocast/policy.h"
#include "autograd/inplace.h"
#include "minidl/indexing.h"
#include "ops/index_access.h"
#include "ops/op_utils.h"

namespace minidl {
namespace indexing {

Slice::Slice(std::optional<std::int64_t> start, std::optional<std::int64_t> stop, std::optional<std::int64_t> step) {
  step_ = step.value_or(1);
  MINIDL_CHECK(step_ != 0, ValueError, "Slice: the step cannot be zero");
  start_ = start.value_or(step_ < 0 ? INT64_MAX : 0);
  stop_ = stop.value_or(step_ < 0 ? INT64_MIN : INT64_MAX);
}

TensorIndex::TensorIndex(const char* str) : type_(TensorIndexType::Ellipsis) {
  MINIDL_CHECK(str != nullptr && std::strcmp(str, "...") == 0, ValueError,
               "TensorIndex: expected \"...\" to stand for an ellipsis, found \"", str == nullptr ? "" : str, "\"");
}

}  // namespace indexing

namespace {

using autograd::SavedTensor;
using indexing::TensorIndex;

/// An index tensor and the dim of the (viewed) tensor it indexes.
struct Positioned {
  std::int64_t dim;
  Tensor index;  // int64, on the tensor's device
};

bool is_mask(DType t) { return t == kBool || t == kUInt8; }

/// Appends the index tensors of `t` used at `dim` of `x` (a mask: one per dim it covers); returns the dims used.
std::int64_t add_tensor_index(const Tensor& x, std::int64_t dim, const Tensor& t, std::vector<Positioned>& out,
                              const char* op) {
  if (is_mask(t.dtype())) {
    for (std::int64_t j = 0; j < t.dim(); ++j) {
      MINIDL_CHECK(dim + j < x.dim() && t.size(j) == x.size(dim + j), IndexError, op, ": the shape of the mask ",
                   shape_str(t.sizes()), " at index ", j, " does not match the shape of the indexed tensor ",
                   shape_str(x.sizes()), " at index ", dim + j);
    }
    const Tensor coords = nonzero(t.to(x.device()));
    for (std::int64_t j = 0; j < t.dim(); ++j) out.push_back({dim + j, coords.select(1, j)});
    return t.dim();
  }
  MINIDL_CHECK(t.dtype() == kInt64 || t.dtype() == kInt32, IndexError, op,
               ": tensors used as indices must be int64, "
               "int32, bool or uint8 tensors, found ",
               t.dtype());
  MINIDL_CHECK(dim < x.dim(), IndexError, op, ": too many indices for tensor of dimension ", x.dim());
  out.push_back({dim, t.detach().to(x.device()).to(kInt64)});
  return 1;
}

/// x after the basic entries, and the tensor entries with the dims of that view they index.
struct Indexed {
  Tensor view;
  std::vector<Positioned> tensors;
};

Indexed apply_indices(const Tensor& self, const std::vector<TensorIndex>& indices, const char* op) {
  ops::check_defined(self, op, "self");
  std::int64_t consumed = 0;
  bool ellipsis = false;
  for (const TensorIndex& e : indices) {
    if (e.is_integer() || e.is_slice()) ++consumed;
    if (e.is_tensor()) {
      ops::check_defined(e.tensor(), op, "indices");
      consumed += is_mask(e.tensor().dtype()) ? e.tensor().dim() : 1;
    }
    if (e.is_ellipsis()) {
      MINIDL_CHECK(!ellipsis, IndexError, op, ": an index can only have a single ellipsis ('...')");
      ellipsis = true;
    }
  }
  MINIDL_CHECK(consumed <= self.dim(), IndexError, op, ": too many indices for tensor of dimension ", self.dim(), " (",
               consumed, " dims indexed)");
  Indexed r{self, {}};
  std::int64_t dim = 0;
  for (const TensorIndex& e : indices) {
    switch (e.type()) {
      case indexing::TensorIndexType::None:
        r.view = r.view.unsqueeze(dim++);
        break;
      case indexing::TensorIndexType::Ellipsis:
        dim += self.dim() - consumed;
        break;
      case indexing::TensorIndexType::Integer: {
        const std::int64_t n = r.view.size(dim), i = e.integer();
        MINIDL_CHECK(i >= -n && i < n, IndexError, op, ": index ", i, " is out of range for dimension ", dim,
                     " of size ", n, " (expected a value in [", -n, ", ", n, "))");
        r.view = r.view.select(dim, i);
        break;
      }
      case indexing::TensorIndexType::Slice: {
        const indexing::Slice& s = e.slice();
        MINIDL_CHECK(s.step() > 0, ValueError, op, ": slice step must be greater than zero, found ", s.step());
        r.view = r.view.slice(dim++, s.start(), s.stop(), s.step());
        break;
      }
      case indexing::TensorIndexType::Boolean:
        // As PyTorch: a new dim of size 1, indexed by [0] (true) or by nothing (false).
        r.view = r.view.unsqueeze(dim);
        r.tensors.push_back({dim++, e.boolean() ? zeros({1}, TensorOptions(kInt64).device(self.device()))
                                                : empty({0}, TensorOptions(kInt64).device(self.device()))});
        break;
      case indexing::TensorIndexType::Tensor: {
        Tensor t = e.tensor();
        if (t.dim() == 0 && is_mask(t.dtype())) {  // a 0-d mask acts as a bool
          r.view = r.view.unsqueeze(dim);
          t = t.reshape({1});
        }
        dim += add_tensor_index(r.view, dim, t, r.tensors, op);
        break;
      }
    }
  }
  return r;
}

/// The index tensors of PyTorch's index_put_(indices, ...) list: entry i indexes dim i (a mask the dims it covers),
/// an undefined entry leaves its dim whole.
std::vector<Positioned> positions_of(const Tensor& self, const std::vector<Tensor>& list, const char* op) {
  ops::check_defined(self, op, "self");
  std::vector<Positioned> out;
  std::int64_t dim = 0;
  for (const Tensor& t : list) {
    MINIDL_CHECK(dim < self.dim() || (t.defined() && is_mask(t.dtype()) && t.dim() == 0), IndexError, op,
                 ": too many indices for tensor of dimension ", self.dim(), " (", list.size(), " given)");
    dim += t.defined() ? add_tensor_index(self, dim, t, out, op) : 1;
  }
  return out;
}

/// The access of x indexed by `tensors`: the result's shape, x's strides over it and the index arguments. The
/// index tensors broadcast together; their dims stand where the first indexed dim stood when the indexed dims are
/// adjacent, else in front.
struct Access {
  Shape shape;
  Shape data_strides;
  std::vector<ops::IndexArg> args;
};

Access advanced_access(const Tensor& x, const std::vector<Positioned>& tensors, const char* op) {
  Shape b = tensors.front().index.sizes();
  bool adjacent = true;
  for (std::size_t k = 1; k < tensors.size(); ++k) {
    const Shape& s = tensors[k].index.sizes();
    const std::size_t n = std::max(b.size(), s.size());
    Shape out(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t da = i < n - b.size() ? 1 : b[i - (n - b.size())];
      const std::int64_t db = i < n - s.size() ? 1 : s[i - (n - s.size())];
      MINIDL_CHECK(da == db || da == 1 || db == 1, IndexError, op,
                   ": shape mismatch: the index tensors cannot be "
                   "broadcast together (shape ",
                   shape_str(b), " against indices[", k, "] of shape ", shape_str(s), ")");
      out[i] = da == 1 ? db : da;
    }
    b = out;
    adjacent = adjacent && tensors[k].dim == tensors[k - 1].dim + 1;
  }
  const std::int64_t first = tensors.front().dim, last = tensors.back().dim;
  std::vector<bool> indexed(static_cast<std::size_t>(x.dim()), false);
  for (const Positioned& p : tensors) indexed[static_cast<std::size_t>(p.dim)] = true;
  Access a;
  std::size_t b_at = 0;  // where the broadcast dims start in the result
  const auto add_rest = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t d = from; d < to; ++d) {
      if (indexed[static_cast<std::size_t>(d)]) continue;
      a.shape.push_back(x.size(d));
      a.data_strides.push_back(x.stride(d));
    }
  };
  if (adjacent) {
    add_rest(0, first);
    b_at = a.shape.size();
    a.shape.insert(a.shape.end(), b.begin(), b.end());
    a.data_strides.insert(a.data_strides.end(), b.size(), 0);
    add_rest(last + 1, x.dim());
  } else {
    a.shape = b;
    a.data_strides.assign(b.size(), 0);
    add_rest(0, x.dim());
  }
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k].index;
    const Shape bs = kernels::broadcast_strides(t.sizes(), t.strides(), b);
    Shape strides(a.shape.size(), 0);
    std::copy(bs.begin(), bs.end(), strides.begin() + static_cast<std::ptrdiff_t>(b_at));
    a.args.push_back({t, strides, tensors[k].dim, "indices[" + std::to_string(k) + "]"});
  }
  return a;
}

Tensor& put_positions_(Tensor& self, const std::vector<Positioned>& tensors, const Tensor& values_in, bool accumulate,
                       const char* op);

/// x indexed by the tensors (not yet a view: one gather); differentiable w.r.t. x.
Tensor index_positions(const Tensor& x, const std::vector<Positioned>& tensors) {
  const Access a = advanced_access(x, tensors, "index");
  Tensor out = ops::index_gather(x, a.shape, a.data_strides, a.args, true, "index");
  const Shape in_shape = x.sizes();
  return autograd::record(out, "IndexBackward", {x}, [tensors, in_shape](const Tensor& g) {
    Tensor dx = zeros(in_shape, TensorOptions(g.dtype()).device(g.device()));
    put_positions_(dx, tensors, g, true, "index_put_");
    return std::vector<Tensor>{dx};
  });
}

Tensor& put_positions_(Tensor& self, const std::vector<Positioned>& tensors, const Tensor& values_in, bool accumulate,
                       const char* op) {
  ops::check_defined(values_in, op, "values");
  MINIDL_CHECK(values_in.dtype() == self.dtype(), TypeError, op, ": expected 'values' of the dtype of 'self' (",
               self.dtype(), "), found ", values_in.dtype());
  MINIDL_CHECK(values_in.device() == self.device() || values_in.dim() == 0, TypeError, op,
               ": expected 'values' on the device of 'self' (", self.device(), "), found ", values_in.device());
  const Tensor values = values_in.to(self.device());
  const Access a = advanced_access(self, tensors, op);
  const Shape& vs = values.sizes();
  bool fits = vs.size() <= a.shape.size();
  for (std::size_t i = 0; fits && i < vs.size(); ++i) {
    const std::int64_t want = a.shape[a.shape.size() - vs.size() + i];
    fits = vs[i] == want || vs[i] == 1;
  }
  MINIDL_CHECK(fits, ValueError, op, ": shape mismatch: 'values' of shape ", shape_str(vs),
               " cannot be broadcast to the indexing result of shape ", shape_str(a.shape));
  autograd::check_inplace_allowed(self, op);
  ops::check_no_internal_overlap(self, op, "self");
  const autograd::InplaceRecord rec(self, op, accumulate ? "IndexPutAccumulate_Backward" : "IndexPut_Backward",
                                    {values});
  ops::index_scatter(self, a.shape, a.data_strides, values, kernels::broadcast_strides(vs, values.strides(), a.shape),
                     a.args, true, accumulate, op);
  autograd::bump_version(self);
  const bool values_grad = values.requires_grad();
  rec.finish(self, [=](const Tensor& g) {
    Tensor g_self = g;
    if (!accumulate) {
      g_self = g.clone();
      put_positions_(g_self, tensors, zeros({}, TensorOptions(g.dtype()).device(g.device())), false, "index_put_");
    }
    return std::vector<Tensor>{g_self, values_grad ? sum_to(index_positions(g, tensors), vs) : Tensor()};
  });
  return self;
}

Tensor scalar_like(const Tensor& self, const Scalar& value) {
  return full({}, value, TensorOptions(self.dtype()).device(self.device()));
}

}  // namespace

Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  const Indexed r = apply_indices(*this, indices, "index");
  return r.tensors.empty() ? r.view : index_positions(r.view, r.tensors);
}

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  return index(std::vector<TensorIndex>(indices));
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& values) {
  Indexed r = apply_indices(*this, indices, "index_put_");
  if (r.tensors.empty()) {
    r.view.copy_(values);
  } else {
    put_positions_(r.view, r.tensors, values, false, "index_put_");
  }
  return *this;
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Scalar& value) {
  Indexed r = apply_indices(*this, indices, "index_put_");
  if (r.tensors.empty()) {
    r.view.fill_(value);
  } else {
    put_positions_(r.view, r.tensors, scalar_like(*this, value), false, "index_put_");
  }
  return *this;
}

Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& values) {
  return index_put_(std::vector<TensorIndex>(indices), values);
}

Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Scalar& value) {
  return index_put_(std::vector<TensorIndex>(indices), value);
}

Tensor& Tensor::index_put_(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const std::vector<Positioned> tensors = positions_of(*this, indices, "index_put_");
  if (tensors.empty()) {
    // Every dim whole: the values broadcast over self.
    if (accumulate) return add_(values);
    return copy_(values);
  }
  return put_positions_(*this, tensors, values, accumulate, "index_put_");
}

Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) const {
  return minidl::index_put(*this, indices, values, accumulate);
}

Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  MINIDL_AUTOCAST(index_put, self, indices, values, accumulate);
  ops::check_defined(self, "index_put", "self");
  return self.clone().index_put_(indices, values, accumulate);
}

Tensor masked_select(const Tensor& self, const Tensor& mask) {
  ops::check_defined(self, "masked_select", "self");
  ops::check_defined(mask, "masked_select", "mask");
  MINIDL_CHECK(is_mask(mask.dtype()), TypeError, "masked_select: expected 'mask' of dtype bool (or uint8), found ",
               mask.dtype());
  MINIDL_CHECK(mask.device() == self.device(), TypeError, "masked_select: expected 'mask' on the device of 'self' (",
               self.device(), "), found ", mask.device());
  Shape shape = broadcast_shapes(self.sizes(), mask.sizes(), "masked_select");
  Tensor x = self.expand(shape), m = mask.expand(shape);
  if (shape.empty()) {
    x = x.reshape({1});
    m = m.reshape({1});
  }
  std::vector<Positioned> tensors;
  add_tensor_index(x, 0, m, tensors, "masked_select");
  return index_positions(x, tensors);
}

Tensor nonzero(const Tensor& self) {
  ops::check_defined(self, "nonzero", "self");
  const Tensor x = ops::dense(self.detach());
  std::int64_t count = 0;
  if (x.is_cuda()) {
#if MINIDL_CUDA_ENABLED
    const gpu::DeviceGuard guard(x.device().index());
    count = gpu::count_nonzero(x);
#else
    detail::throw_cuda_not_built();
#endif
  } else {
    count = cpu::count_nonzero(x);
  }
  Tensor out = empty({count, x.dim()}, TensorOptions(kInt64).device(x.device()));
  if (out.numel() > 0) MINIDL_ON_BACKEND(x.device(), nonzero(x, out));
  return out;
}

Tensor Tensor::masked_select(const Tensor& mask) const { return minidl::masked_select(*this, mask); }
Tensor argwhere(const Tensor& self) { return nonzero(self); }

Tensor Tensor::nonzero() const { return minidl::nonzero(*this); }
Tensor Tensor::argwhere() const { return minidl::nonzero(*this); }

}  // namespace minidl
