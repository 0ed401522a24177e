#pragma once
// Joining and splitting tensors (cat, stack, split, chunk, unbind), reordering and repeating their elements (flip,
// roll, repeat_interleave; repeat is a Tensor method, as in LibTorch), triangles (tril, triu) and choosing elements
// by a mask (where, masked_fill), with LibTorch's names, overloads and argument order. Every dtype; each op is
// differentiable w.r.t. its floating tensor inputs.
#include <cstdint>
#include <optional>
#include <vector>

#include "minidl/scalar.h"
#include "minidl/tensor.h"

namespace minidl {

/// The tensors joined along dim, in the dtype they promote to (result_type over all of them). Each must have the
/// first's number of dims and sizes except along dim (ValueError naming the tensor's index and the dim); 1-d
/// tensors of size 0 are skipped, as PyTorch's legacy rule, and a 0-d tensor is a ValueError. One pass over memory:
/// on CUDA, contiguous inputs of the result dtype move in one launch (see kernels/backend.h), others are copied,
/// converting, into their slice of the result. The gradient of each input is its slice of the output's.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
/// Aliases of cat (torch::concat, torch::concatenate).
Tensor concat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
Tensor concatenate(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
/// The tensors, all of one shape, joined along a new dim (in [-(ndim + 1), ndim]).
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim = 0);

// Splitting: the pieces are views of self (they share its storage, nothing is copied). Their gradients meet in one
// buffer of self's shape, written once per piece, so unbinding a long dim costs one pass in backward too.
/// Pieces of split_size along dim, the last one smaller if the size does not divide (split_size 0 only for an
/// empty dim).
std::vector<Tensor> split(const Tensor& self, std::int64_t split_size, std::int64_t dim = 0);
/// Pieces of the given sizes, which must sum to self.size(dim).
std::vector<Tensor> split(const Tensor& self, const std::vector<std::int64_t>& split_sizes, std::int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& self, const std::vector<std::int64_t>& split_sizes,
                                     std::int64_t dim = 0);
/// At most `chunks` pieces of ceil(size / chunks) (fewer when the size is small, as PyTorch's chunk).
std::vector<Tensor> chunk(const Tensor& self, std::int64_t chunks, std::int64_t dim = 0);
/// self.select(dim, i) for every i.
std::vector<Tensor> unbind(const Tensor& self, std::int64_t dim = 0);
/// `sections` pieces along dim, the first size % sections of them one element longer (torch.tensor_split).
std::vector<Tensor> tensor_split(const Tensor& self, std::int64_t sections, std::int64_t dim = 0);
/// The pieces [0, indices[0]), [indices[0], indices[1]), ..., [indices.back(), size) along dim (indices clamped to
/// the dim, so pieces may be empty).
std::vector<Tensor> tensor_split(const Tensor& self, const std::vector<std::int64_t>& indices, std::int64_t dim = 0);
/// The tensors joined along dim 1 (dim 0 if they are 1-d), along dim 0 after making each at least 2-d (a 1-d tensor
/// of n elements is a 1 x n row), along dim 2 after making each at least 3-d (torch.hstack, vstack, dstack).
Tensor hstack(const std::vector<Tensor>& tensors);
Tensor vstack(const std::vector<Tensor>& tensors);
Tensor dstack(const std::vector<Tensor>& tensors);

/// The elements in reverse order along each of dims (a copy, as in PyTorch).
Tensor flip(const Tensor& self, const std::vector<std::int64_t>& dims);
/// Elements shifted by shifts[i] along dims[i] (negative shifts go backwards), wrapping around; with no dims,
/// self is flattened, rolled by its one shift and given back its shape.
Tensor roll(const Tensor& self, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims = {});
Tensor roll(const Tensor& self, std::int64_t shift);
Tensor roll(const Tensor& self, std::int64_t shift, std::int64_t dim);
/// Each element repeated `repeats` times in place along dim (of the flattened self without a dim): [a, b] with 2
/// gives [a, a, b, b]. output_size, if given, must be the resulting size along dim.
Tensor repeat_interleave(const Tensor& self, std::int64_t repeats, std::optional<std::int64_t> dim = std::nullopt,
                         std::optional<std::int64_t> output_size = std::nullopt);
/// Slice i along dim repeated repeats[i] times: `repeats` is an int64 or int32 tensor of one element (used for
/// every slice) or of self.size(dim) elements. Reads the repeats back to size the result (on CUDA: waits for the
/// stream), then gathers with index_select.
Tensor repeat_interleave(const Tensor& self, const Tensor& repeats, std::optional<std::int64_t> dim = std::nullopt,
                         std::optional<std::int64_t> output_size = std::nullopt);
/// The indices 0, 1, ... each repeated repeats[i] times (int64): repeat_interleave(tensor({2, 1})) is [0, 0, 1].
Tensor repeat_interleave(const Tensor& repeats, std::optional<std::int64_t> output_size = std::nullopt);
/// self repeated dims[i] times along dim i: fewer dims than self has are taken as ones in front, more add leading
/// dims (torch.tile; Tensor::repeat with that padding).
Tensor tile(const Tensor& self, const std::vector<std::int64_t>& dims);

/// The lower (tril) or upper (triu) triangle of the last two dims, the rest 0: element (i, j) stays when
/// j - i <= diagonal (tril) or j - i >= diagonal (triu). Needs at least 2 dims.
Tensor tril(const Tensor& self, std::int64_t diagonal = 0);
Tensor triu(const Tensor& self, std::int64_t diagonal = 0);

/// condition ? self : other elementwise, the three broadcast together; self and other promote as for arithmetic
/// (result_type). condition is bool (uint8 is taken as bool, as PyTorch still does). A 0-d CPU operand may join
/// CUDA ones.
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);
Tensor where(const Tensor& condition, const Scalar& self, const Tensor& other);
Tensor where(const Tensor& condition, const Tensor& self, const Scalar& other);
/// Two scalars give bool, int64 or float32 (the default dtype), from the higher of their kinds.
Tensor where(const Tensor& condition, const Scalar& self, const Scalar& other);

/// self with value where mask (bool) is true; self and mask broadcast together, and the result keeps self's dtype
/// (value converted to it). The Tensor form takes a 0-d value (differentiable, on self's device or the CPU).
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value);
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value);

}  // namespace minidl
