#pragma once
// Indexing ops, as LibTorch names them: x.index({...}) and index_put_ with the indexing namespace's Slice, None,
// Ellipsis and TensorIndex; gather, scatter, scatter_add, index_add, index_select, masked_select, nonzero,
// take_along_dim. Every one takes the eight dtypes (the values of the accumulating ones add, bool ones or) and
// int64 indices (x.index / index_put_ / index_select / index_add also int32, converted first); autograd follows
// PyTorch's derivatives (the gradient of a gather is a scatter_add, and so on).
//
// Out-of-range indices are an IndexError naming the op, the argument, the value and the valid range. On CUDA the
// kernel itself checks and the op reads its verdict back after it, so such a call waits for the stream (except
// while a CUDA graph is captured: then nothing is read, and out-of-range elements are skipped). Negative indices
// count from the end where PyTorch allows it (x.index, index_put_); gather, scatter, scatter_add, index_select,
// index_add and take_along_dim reject them, as PyTorch does.
//
// Accumulation on CUDA (scatter_add, index_add, index_put_ with accumulate, and the backward of index, gather,
// index_select, masked_select, take_along_dim) uses atomics: floating sums then depend on the order in which the
// threads run, by rounding. With set_deterministic(true) they are summed in the CPU's order instead (a
// stable sort by destination first: slower). Integral sums are exact either way.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "minidl/scalar.h"
#include "minidl/tensor.h"

namespace minidl {
namespace indexing {

/// An absent Slice bound, or (as a TensorIndex) a new dim of size 1 (Python's None).
inline constexpr std::nullopt_t None = std::nullopt;

struct EllipsisIndexType {
  EllipsisIndexType() = default;
};
/// As many full slices as the dims the other indices leave (Python's ...).
inline constexpr EllipsisIndexType Ellipsis;

/// Python's start:stop:step. Absent bounds mean the whole dim; the step must be positive, as in PyTorch.
class Slice {
 public:
  Slice(std::optional<std::int64_t> start = std::nullopt, std::optional<std::int64_t> stop = std::nullopt,
        std::optional<std::int64_t> step = std::nullopt);
  std::int64_t start() const { return start_; }
  std::int64_t stop() const { return stop_; }
  std::int64_t step() const { return step_; }

 private:
  std::int64_t start_, stop_, step_;
};

enum class TensorIndexType { None, Ellipsis, Integer, Boolean, Slice, Tensor };

/// One entry of x.index({...}): None, Ellipsis (or "..."), an integer, a bool, a Slice, or a tensor (int64 /
/// int32 indices, or a bool / uint8 mask).
class TensorIndex {
 public:
  TensorIndex(std::nullopt_t) : type_(TensorIndexType::None) {}  // NOLINT(google-explicit-constructor)
  TensorIndex(EllipsisIndexType) : type_(TensorIndexType::Ellipsis) {}  // NOLINT(google-explicit-constructor)
  TensorIndex(const char* str);  // NOLINT(google-explicit-constructor): "..." only
  TensorIndex(std::int64_t integer) : type_(TensorIndexType::Integer), integer_(integer) {}  // NOLINT
  TensorIndex(int integer) : TensorIndex(static_cast<std::int64_t>(integer)) {}              // NOLINT
  template <class T, std::enable_if_t<std::is_same_v<T, bool>, int> = 0>
  TensorIndex(T boolean) : type_(TensorIndexType::Boolean), boolean_(boolean) {}  // NOLINT
  TensorIndex(Slice slice) : type_(TensorIndexType::Slice), slice_(slice) {}      // NOLINT
  TensorIndex(Tensor tensor) : type_(TensorIndexType::Tensor), tensor_(std::move(tensor)) {}  // NOLINT

  TensorIndexType type() const { return type_; }
  bool is_none() const { return type_ == TensorIndexType::None; }
  bool is_ellipsis() const { return type_ == TensorIndexType::Ellipsis; }
  bool is_integer() const { return type_ == TensorIndexType::Integer; }
  bool is_boolean() const { return type_ == TensorIndexType::Boolean; }
  bool is_slice() const { return type_ == TensorIndexType::Slice; }
  bool is_tensor() const { return type_ == TensorIndexType::Tensor; }
  std::int64_t integer() const { return integer_; }
  bool boolean() const { return boolean_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  TensorIndexType type_;
  std::int64_t integer_ = 0;
  bool boolean_ = false;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace indexing

// x.index({...}) (a method, tensor.h) follows Python's x[...]: integers and slices give views of x (no copy);
// None adds a dim of size 1; Ellipsis stands for the dims not named; bool True adds a dim of size 1 (False one of
// size 0). Index tensors (advanced indexing) broadcast together and pick elements, into a new tensor: their
// result dims stand where the first of them stood when they are adjacent, else in front (NumPy's rule). A bool
// mask is its nonzero() coordinates, one index tensor per dim it covers (reading the count back: a CUDA mask
// waits for the stream). Differentiable w.r.t. x: the gradient is index_put with accumulate into zeros.
// x.index_put_({...}, values) writes values (a Tensor of x's dtype broadcast to the indexed shape, or a Scalar)
// into those elements, in place; x.index_put_(indices, values, accumulate) takes one (possibly undefined, for
// "every element of this dim") index tensor per leading dim, as PyTorch's index_put_.

/// x.index_put_(indices, values, accumulate) on a copy of x: differentiable w.r.t. x and values.
Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);

/// out[i][j][k] = self[index[i][j][k]][j][k] (for dim 0; likewise for the others): out has index's shape, and
/// index (int64, as many dims as self) may be smaller than self in every dim but `dim`. Differentiable w.r.t. self
/// (its gradient: scatter_add into zeros). `sparse_grad` is accepted for LibTorch's signature; it must be false.
Tensor gather(const Tensor& self, std::int64_t dim, const Tensor& index, bool sparse_grad = false);
/// A copy of self with self[index[i][j][k]][j][k] = src[i][j][k] (for dim 0); index no larger than src in any
/// dim, nor than self but along `dim`; src of self's dtype. Repeated targets: one value wins, unspecified which
/// on CUDA. Gradients: self's is g with the written elements zeroed, src's is gather(g, dim, index).
Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src);
/// The same with every written element set to `value` (converted to self's dtype).
Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value);
/// scatter with += (repeats sum up); gradients: g for self, gather(g, dim, index) for src.
Tensor scatter_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src);
/// self with self[..., index[j], ...] += alpha * source[..., j, ...] along dim: index 1-d (or 0-d) int64 / int32
/// with source.size(dim) elements, source of self's dtype and self's shape elsewhere. Gradients: g for self,
/// alpha * index_select(g, dim, index) for source.
Tensor index_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);
/// The slices of `self` along `dim` named by `index`: out has self's shape with size(dim) replaced by
/// index.numel(), and out[..., j, ...] = self[..., index[j], ...]. `index` is an int64 (or int32) tensor of at
/// most one dimension on self's device; repeats are allowed, and a value outside [0, self.size(dim)) is an
/// IndexError naming its position (on CUDA this range check reads one value back, so the call waits for the
/// stream). Any dtype; differentiable w.r.t. a floating `self` (the gradient: index_add into zeros).
Tensor index_select(const Tensor& self, std::int64_t dim, const Tensor& index);
/// The elements of self where mask (bool, or uint8 as PyTorch still accepts) is true, self and mask broadcast
/// together, as a 1-d tensor in row-major order. The count is read back (a CUDA call waits for the stream).
/// Differentiable w.r.t. self.
Tensor masked_select(const Tensor& self, const Tensor& mask);
/// The coordinates of self's nonzero elements (NaN counts), int64 of shape (count, self.dim()), in row-major
/// order. The count is read back first: on CUDA the call waits for the stream.
Tensor nonzero(const Tensor& self);
/// nonzero under NumPy's name (torch.argwhere).
Tensor argwhere(const Tensor& self);
/// gather along `dim` with self and indices broadcast to each other except along dim (same number of dims
/// required); without dim, self.flatten() indexed by indices.flatten(). Differentiable w.r.t. self.
Tensor take_along_dim(const Tensor& self, const Tensor& indices, std::optional<std::int64_t> dim = std::nullopt);

}  // namespace minidl
