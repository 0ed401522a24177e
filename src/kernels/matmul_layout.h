#pragma once
// Where a batched matrix product's operands lie in memory: the geometry both backends' matmul kernels take
// (kernels/backend.h), which cuBLAS(Lt)'s strided-batched layouts and the CPU GEMM's strided views express
// directly. The op layer (src/ops/matmul.cpp) finds it from the tensors' strides, so transposed, sliced and
// broadcast operands reach the GEMM without a copy.
#include <cstdint>

namespace minidl {
class Tensor;
namespace kernels {

/// One operand of out[i] = op(a[i]) * op(b[i]), i < batch: matrix i starts batch_stride elements after matrix
/// i - 1 (0: one matrix serves the whole batch, a broadcast). The matrix is stored row-major with its rows `ld`
/// elements apart, and read as is, or transposed when `trans` (a: stored k x m; b: stored n x k). `ld` is at least
/// the stored matrix's row length, as BLAS requires.
struct MatmulOperand {
  bool trans = false;
  std::int64_t ld = 0;
  std::int64_t batch_stride = 0;
};

/// The product's sizes and operands; out is dense, (batch, m, n) row-major.
struct MatmulLayout {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  MatmulOperand a, b;

  /// Operands that are dense (batch, m, k) and (batch, k, n) blocks, or their transposes' blocks when trans.
  static MatmulLayout dense(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool trans_a,
                            bool trans_b) {
    return {batch, m, n, k, {trans_a, trans_a ? m : k, m * k}, {trans_b, trans_b ? k : n, k * n}};
  }
  /// Whether the operands are the dense blocks dense() describes (batch strides of a one-matrix batch aside).
  bool is_dense() const {
    const MatmulLayout d = dense(batch, m, n, k, a.trans, b.trans);
    return a.ld == d.a.ld && b.ld == d.b.ld &&
           (batch == 1 || (a.batch_stride == d.a.batch_stride && b.batch_stride == d.b.batch_stride));
  }
};

/// Work a GEMM's epilogue can do on the product's way out, saving a pass over it (cuBLASLt's epilogues). Each
/// tensor is contiguous, of out's dtype, or null (not wanted); at most one of bias_grad_a and bias_grad_b.
struct MatmulEpilogue {
  /// n values added to every row of out (linear's bias).
  const Tensor* bias = nullptr;
  /// Receives m values: row i's sum over k of op(a) (the bias gradient of a weight-gradient product
  /// dW = g^T x, where op(a) = g^T).
  Tensor* bias_grad_a = nullptr;
  /// Receives n values: column j's sum over k of op(b).
  Tensor* bias_grad_b = nullptr;
};

}  // namespace kernels
}  // namespace minidl
