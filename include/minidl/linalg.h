#pragma once
// Linear algebra: matrix products (LibTorch's names, overloads and argument order; PyTorch's semantics) and
// einsum. Every product takes operands of one dtype and device: float32 and float64 on both devices, int64, int32
// and uint8 on the CPU (integer sums wrap, as PyTorch's); bfloat16 and float16 are a TypeError for now. Transposed,
// sliced and broadcast operands reach the GEMM through its strides and transpose flags, without copies, wherever
// BLAS's layouts allow (an operand whose last two dims have no unit stride, or whose batch strides cannot be one
// stride, is copied once). All are differentiable (floating operands).
#include <string>
#include <vector>

#include "minidl/scalar.h"
#include "minidl/tensor.h"

namespace minidl {

/// torch.matmul: 1-D·1-D is the dot product (a 0-d tensor); a 1-D first operand is a row (k) and a 1-D second one
/// a column (k), their dim removed from the result; otherwise (..., m, k)·(..., k, n) with the batch dims
/// broadcast against each other (NumPy's rule), giving (broadcast batch..., m, n). Batch dims over which the
/// second operand is broadcast are folded into the GEMM's rows (a (B, T, C)·(C, D) product is one GEMM), a
/// broadcast batch is a batch stride of 0. ValueError for 0-d operands, mismatched inner sizes or batch dims that
/// do not broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
/// (n, k)·(k, m) of two 2-D tensors.
Tensor mm(const Tensor& a, const Tensor& b);
/// (b, n, k)·(b, k, m) of two 3-D tensors with the same batch size (no broadcasting).
Tensor bmm(const Tensor& a, const Tensor& b);
/// (n, k) matrix times (k) vector: (n).
Tensor mv(const Tensor& mat, const Tensor& vec);
/// The inner product of two 1-D tensors of the same size: a 0-d tensor.
Tensor dot(const Tensor& a, const Tensor& b);
/// The outer product of two 1-D tensors, (n)·(m) -> (n, m); dtypes promote as for mul.
Tensor outer(const Tensor& a, const Tensor& b);
/// outer's older name.
Tensor ger(const Tensor& a, const Tensor& b);
/// beta * input + alpha * mm(mat1, mat2); input broadcasts to the product's (n, m). With beta = 0 input is not
/// read (its NaNs do not propagate), as in PyTorch. Integer operands take integer beta and alpha only.
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
             const Scalar& alpha = 1);
/// beta * input + alpha * bmm(batch1, batch2); input broadcasts to (b, n, m).
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
               const Scalar& alpha = 1);
/// beta * input + alpha * mv(mat, vec); input broadcasts to (n).
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const Scalar& beta = 1,
             const Scalar& alpha = 1);

/// Einstein summation (torch.einsum): "ij,jk->ik", "bhqd,bhkd->bhqk", "...ij,...jk", "ii->i" (a diagonal), "ii"
/// (a trace), "ij->" and so on. Subscripts are letters (a-z, A-Z); "..." stands for the dims not named, broadcast
/// across the operands as NumPy does. Without "->" the output holds "..." followed by the letters that appear
/// once, in alphabetical order (uppercase first); with it, letters left out of the output are summed, and so are
/// the "..." dims when the output has no "...". A letter repeated in one operand takes that operand's diagonal.
/// Size-1 dims broadcast. The operands are contracted left to right, each pair as one matmul (after permutes
/// and reshapes, which copy only where the permuted layout requires it); one dtype and device for all operands.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors);

}  // namespace minidl
