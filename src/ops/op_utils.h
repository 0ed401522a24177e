#pragma once
// Argument checks and small helpers shared by the op entry points.
#include <cstdint>
#include <vector>

#include "core/tensor_impl.h"
#include "kernels/backend.h"
#include "minidl/ops.h"

namespace minidl {
namespace ops {

/// PyTorch's result_type of any number of operands (ops/type_promotion.cpp), each tensor defined.
DType result_type_of(const std::vector<Tensor>& tensors, const std::vector<Scalar>& scalars, const char* op);
/// Throws unless `t` is defined.
void check_defined(const Tensor& t, const char* op, const char* arg);
/// Throws TypeError naming the op and both operands unless they share device and dtype.
void check_same(const Tensor& a, const Tensor& b, const char* op);
/// Throws TypeError unless t has a floating dtype.
void check_floating(const Tensor& t, const char* op);
/// bfloat16 / float16 products on CUDA are refused (TypeError naming op) until the cuBLASLt 16-bit backward, which
/// gave wrong input gradients in its first GPU run (issue 25), is fixed: every product (matmul's family, linear)
/// calls this. Defined in ops/matmul.cpp.
void check_lowp_products(const Tensor& a, const char* op);
/// On the CPU, throws ValueError when an integral divisor holds a 0 (a GPU kernel gives 0 there instead: checking
/// would synchronise). Returns b.
const Tensor& check_integral_divisor(const Tensor& b, const char* op);
/// t made contiguous for a kernel that reads contiguous memory (an undefined t stays undefined): the one
/// documented contiguous() at the entry of such an op.
Tensor dense(const Tensor& t);
/// Whether a bool tensor holds a true element (reads it on the host).
bool any_true(const Tensor& mask);
/// Wraps a possibly negative dim into [0, ndim).
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op);
/// Sorted, unique, wrapped dims (all dims when `dims` is empty).
std::vector<std::int64_t> normalize_dims(const std::vector<std::int64_t>& dims, std::int64_t ndim, const char* op);
/// Product of shape[begin, end).
std::int64_t prod(const Shape& s, std::size_t begin, std::size_t end);
/// A new uninitialised tensor with t's dtype and device.
Tensor empty_as(const Shape& shape, const Tensor& t);
/// op(a)·op(b) on the backend, a and b viewed as (batch, rows, cols); result has out_shape.
Tensor gemm(const Tensor& a, const Tensor& b, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
            bool trans_a, bool trans_b, const Shape& out_shape);
/// `g` broadcast to `shape` (materialised).
Tensor expand_to(const Tensor& g, const Shape& shape);
/// A backward rule's elementwise gradient op(g, saved) (ReluGrad, SigmoidGrad, ...), both of g's shape.
Tensor binary_grad(kernels::BinaryOp op, const kernels::OpScalars& s, const Tensor& g, const Tensor& saved);
/// binary_grad written over g itself when nothing else can see g: the engine's incoming gradient of a backward
/// closure, with no other handle and no view of its storage (and anomaly detection off, which reads it after the
/// closure). A fused layer's backward (ConvReLU2d, LinearReLU) thus holds one gradient-sized buffer, not two,
/// while its convolution or GEMM backward runs, which lowers the step's peak by that buffer.
Tensor binary_grad_reusing(kernels::BinaryOp op, double alpha, const Tensor& g, const Tensor& saved);

}  // namespace ops
}  // namespace minidl
