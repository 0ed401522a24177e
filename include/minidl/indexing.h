#pragma once
// Indexing ops: picking slices of a tensor by an index tensor.
#include <cstdint>

#include "minidl/tensor.h"

namespace minidl {

/// The slices of `self` along `dim` named by `index`: out has self's shape with size(dim) replaced by
/// index.numel(), and out[..., j, ...] = self[..., index[j], ...]. `index` is an int64 tensor of at most one
/// dimension on self's device; repeats are allowed, and a value outside [0, self.size(dim)) is an IndexError
/// naming its position (on CUDA this range check reads one value back, so the call waits for the stream).
/// Any dtype; differentiable w.r.t. a floating `self` (the gradient is summed back into the slices it came
/// from, repeats in index order, so it is deterministic on both backends).
Tensor index_select(const Tensor& self, std::int64_t dim, const Tensor& index);

}  // namespace minidl
