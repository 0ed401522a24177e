#pragma once
// The differentiable primitive ops. Each has one entry point that checks its arguments and routes to the CPU
// (Eigen) or CUDA implementation; binary ops broadcast like NumPy.
#include <cstdint>
#include <vector>

#include "minidl/reduction.h"
#include "minidl/scalar.h"
#include "minidl/tensor.h"

namespace minidl {

// Type promotion (PyTorch's rules): the dtype a binary op of these operands computes in and returns.
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);
/// Whether an op may write a result of dtype `from` into a tensor of dtype `to` (in-place ops, out=): not a
/// floating value into an integral tensor, not a non-bool into a bool tensor.
bool can_cast(DType from, DType to);

// Binary ops broadcast their operands and promote their dtypes (result_type). Integral operands compute in
// integers (wrapping on overflow), except div and pow with a floating exponent, which give float32.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);  // a - alpha * b
Tensor mul(const Tensor& a, const Tensor& b);
/// True division: integral operands give float32.
Tensor div(const Tensor& a, const Tensor& b);
/// Python's a // b (rounds towards -inf); integral division by zero is a ValueError on the CPU.
Tensor floor_divide(const Tensor& a, const Tensor& b);
/// Python's a % b (takes the divisor's sign).
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
/// Elementwise maximum / minimum; a NaN on either side gives NaN.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Scalar& s);
Tensor sub(const Tensor& a, const Scalar& s);
Tensor mul(const Tensor& a, const Scalar& s);
Tensor div(const Tensor& a, const Scalar& s);
Tensor floor_divide(const Tensor& a, const Scalar& s);
Tensor remainder(const Tensor& a, const Scalar& s);
Tensor pow(const Tensor& a, double exponent);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor relu(const Tensor& a);
/// ReLU in place (torch::relu_): `a` is overwritten and returned; recorded for autograd like Tensor::mul_.
Tensor& relu_(Tensor& a);
/// leaky_relu in place (torch::leaky_relu_): `a` is overwritten and returned.
Tensor& leaky_relu_(Tensor& a, double negative_slope = 0.01);
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);
Tensor gelu(const Tensor& a);  // exact (erf) form, as PyTorch's default
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);

// Views: the result shares a's storage (writes through it are seen by a) and nothing is copied.
/// The same elements in another shape (one size may be -1); ValueError when a's strides do not allow it.
Tensor view(const Tensor& a, const Shape& shape);
/// view() when a's strides allow it, else a contiguous copy in the new shape.
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor flatten(const Tensor& a, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
Tensor transpose(const Tensor& a, std::int64_t dim0, std::int64_t dim1);
/// Dim i of the result is dim dims[i] of a.
Tensor permute(const Tensor& a, const std::vector<std::int64_t>& dims);
/// Dims source[i] of a moved to positions destination[i], the other dims keeping their order (torch.movedim);
/// moveaxis is its alias, swapaxes and swapdims transpose's.
Tensor movedim(const Tensor& a, const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination);
Tensor movedim(const Tensor& a, std::int64_t source, std::int64_t destination);
Tensor moveaxis(const Tensor& a, const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination);
Tensor moveaxis(const Tensor& a, std::int64_t source, std::int64_t destination);
Tensor swapaxes(const Tensor& a, std::int64_t axis0, std::int64_t axis1);
Tensor swapdims(const Tensor& a, std::int64_t dim0, std::int64_t dim1);
/// The diagonal of dims dim1 and dim2 (element (i, i + offset), below the main one for offset < 0) as a view whose
/// last dim runs along it; the two dims leave the shape.
Tensor diagonal(const Tensor& a, std::int64_t offset = 0, std::int64_t dim1 = 0, std::int64_t dim2 = 1);
/// A 1-d a as the `diagonal`-th diagonal of a square matrix of zeros; a 2-d a's `diagonal`-th diagonal as a new
/// 1-d tensor (torch.diag).
Tensor diag(const Tensor& a, std::int64_t diagonal = 0);
/// The sum of a 2-d a's main diagonal (0-d; integral inputs give int64, as sum).
Tensor trace(const Tensor& a);
/// Elements start, start + step, ... below end along dim (Python's slice rules: negative bounds count from the
/// end, bounds are clamped; step > 0).
Tensor slice(const Tensor& a, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1);
/// length elements from start along dim (IndexError beyond the dim).
Tensor narrow(const Tensor& a, std::int64_t dim, std::int64_t start, std::int64_t length);
/// Index `index` of dim, which disappears.
Tensor select(const Tensor& a, std::int64_t dim, std::int64_t index);
/// Size-1 dims (and new leading dims) repeated to `sizes` with stride 0; -1 keeps a size.
Tensor expand(const Tensor& a, const Shape& sizes);
/// Any geometry in a's storage (checked against the storage's size); offset in elements from the storage start.
Tensor as_strided(const Tensor& a, const Shape& sizes, const Shape& strides, std::int64_t storage_offset);
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, std::int64_t dim);
Tensor unsqueeze(const Tensor& a, std::int64_t dim);

// Reductions (sum, mean, max, argmax, sum_to, ...), scans and sorting: minidl/reduction.h.

/// Numerically stable (finite for logits of ±1000).
Tensor softmax(const Tensor& a, std::int64_t dim);
Tensor log_softmax(const Tensor& a, std::int64_t dim);

// Comparisons and logical ops: bool results (not differentiable); operands promoted as for arithmetic.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);
/// Any dtype: nonzero is true.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
/// Shape that `a` and `b` broadcast to; throws ValueError naming `op` if they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
inline Tensor operator+(const Tensor& a, const Scalar& s) { return add(a, s); }
inline Tensor operator+(const Scalar& s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, const Scalar& s) { return sub(a, s); }
inline Tensor operator-(const Scalar& s, const Tensor& a) { return add(neg(a), s); }
inline Tensor operator*(const Tensor& a, const Scalar& s) { return mul(a, s); }
inline Tensor operator*(const Scalar& s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, const Scalar& s) { return div(a, s); }
inline Tensor operator/(const Scalar& s, const Tensor& a) { return mul(pow(a, -1.0), s); }
inline Tensor operator%(const Tensor& a, const Scalar& s) { return remainder(a, s); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }

}  // namespace minidl
