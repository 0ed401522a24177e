#pragma once
// The plumbing of the reduction ops (src/ops/reduce.cpp, extremum.cpp, logical_reduce.cpp): dim lists, result
// shapes, and one entry that runs a backend reduction over any set of dims.
#include <cstdint>
#include <vector>

#include "kernels/reduce.h"
#include "ops/op_utils.h"

namespace minidl {
namespace ops {

/// The dims a reduction covers: wrapped, sorted, unique; every dim for an empty list (none for a 0-d tensor, whose
/// dim 0 or -1 is accepted as PyTorch does).
std::vector<std::int64_t> reduction_dims(IntArrayRef dims, std::int64_t ndim, const char* op);
/// s with the reduced dims as size 1 (keepdim) or dropped.
Shape reduced_shape(const Shape& s, const std::vector<std::int64_t>& dims, bool keepdim);
/// The number of elements each result element reduces.
std::int64_t reduced_count(const Shape& s, const std::vector<std::int64_t>& dims);

/// `a` (any strides) reduced over `dims` (from reduction_dims) by the backend's reducer `op`, with the reduced dims
/// kept as size 1, in `out_dtype`. One pass when the dims form one run of neighbours (size-1 dims aside); for
/// several runs, Sum, Prod, Max, Min, Any and All reduce run by run (intermediates at full precision), the other
/// ops read a copy with the reduced dims moved last. `indices` (Max, Min over one dim) receives the positions.
Tensor reduce_keepdim(const Tensor& a, const std::vector<std::int64_t>& dims, kernels::ReduceOp op,
                      const kernels::ReduceParams& params, DType out_dtype, Tensor* indices = nullptr);

/// Throws ValueError naming `op` when a reduction without an identity (max, min, ...) has no elements to reduce.
void check_nonempty(const Tensor& a, const std::vector<std::int64_t>& dims, const char* op);
/// Throws TypeError naming `op` unless `a` is floating (mean, var, std, logsumexp, norm).
void check_floating_input(const Tensor& a, const char* op);

}  // namespace ops
}  // namespace minidl
