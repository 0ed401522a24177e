#pragma once
// The op layer's side of the indexed accesses (kernels/index_geometry.h): it turns an iteration shape, the
// operands' strides over it and the index tensors into a geometry, runs the backend kernel, and turns a reported
// out-of-range index into an IndexError naming the op, the argument, the value, its position and the valid range.
// gather, scatter, index_select, index_add, x.index(...) and index_put_ are each one call of these two.
#include <cstdint>
#include <string>
#include <vector>

#include "minidl/tensor.h"

namespace minidl {
namespace ops {

/// One index tensor of an access.
struct IndexArg {
  Tensor index;                       // int64, on the data's device, any strides
  std::vector<std::int64_t> strides;  // its strides over the iteration shape (0 where it is broadcast)
  std::int64_t dim;                   // the dim of the data tensor it picks
  std::string name;                   // the argument, for messages: "index", "indices[1]"
};

/// A new contiguous tensor of `shape` (data's dtype) with element i = data at offset data_strides . i plus the
/// indices' part. Not recorded for autograd.
Tensor index_gather(const Tensor& data, const Shape& shape, const Shape& data_strides,
                    const std::vector<IndexArg>& indices, bool wrap_negative, const char* op);
/// Writes (accumulate: adds) values, read with values_strides over `shape`, into data at those offsets, in place.
/// Not recorded for autograd and no version bump (the caller does both).
void index_scatter(const Tensor& data, const Shape& shape, const Shape& data_strides, const Tensor& values,
                   const Shape& values_strides, const std::vector<IndexArg>& indices, bool wrap_negative,
                   bool accumulate, const char* op);

/// `t`'s strides with dim `dim` set to 0 (an index supplies that coordinate).
Shape strides_without(const Tensor& t, std::int64_t dim);
/// Throws ValueError unless no two elements of t share memory (an in-place write's target, as PyTorch checks).
void check_no_internal_overlap(const Tensor& t, const char* op, const char* arg);
/// An int64 index on `device`: int64 kept (moved if needed), int32 converted; other dtypes are a TypeError
/// naming `op`, `arg` and the accepted dtypes (`int32_ok` says whether int32 is one).
Tensor index_operand(const Tensor& index, Device device, bool int32_ok, const char* op, const char* arg);

}  // namespace ops
}  // namespace minidl
