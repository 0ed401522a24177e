// Matrix products: (n, k)·(k, m), batched (..., n, k)·(..., k, m) with equal batch dims, and batched·2-D
// (as a Linear layer applies to every row). An operand that is the transpose of a contiguous block (x.t(),
// k.transpose(-2, -1)) goes to the GEMM as that block with its transpose flag, and the backward products use the
// flags too, so no transposed copies are made.
#include "ops/op_utils.h"

namespace minidl {
namespace {

/// A GEMM operand: a contiguous (..., rows, cols) block, read transposed when `trans`.
struct Operand {
  Tensor mem;
  bool trans;
};

/// t itself when contiguous; the block t is the last-two-dims transpose of, read transposed; else a contiguous copy.
/// `allow_trans` false: the caller folds the batch into rows, which a transposed block cannot give.
Operand gemm_operand(const Tensor& t, bool allow_trans) {
  if (t.is_contiguous()) return {t.detach(), false};
  if (allow_trans) {
    const Tensor block = t.detach().transpose(-1, -2);
    if (block.is_contiguous()) return {block, true};
  }
  return {t.detach().contiguous(), false};
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  ops::check_same(a, b, "matmul");
  ops::check_floating(a, "matmul");
  MINIDL_CHECK(a.dim() >= 2 && b.dim() >= 2, ValueError, "matmul: both operands need at least 2 dimensions, found ",
               shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  const std::int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  MINIDL_CHECK(b.size(-2) == k, ValueError, "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
               " cannot be multiplied (", m, "x", k, " and ", b.size(-2), "x", n, ")");
  const Shape a_batch(a.sizes().begin(), a.sizes().end() - 2), b_batch(b.sizes().begin(), b.sizes().end() - 2);
  Shape out_shape = a_batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  const Shape a_shape = a.sizes(), b_shape = b.sizes();
  const bool fold = b.dim() == 2;
  const Operand A = gemm_operand(a, !fold || a.dim() == 2), B = gemm_operand(b, true);
  const bool ta = A.trans, tb = B.trans;
  autograd::SavedTensor sa(A.mem, "matmul"), sb(B.mem, "matmul");

  if (fold) {
    // Fold a's batch into its rows: one (B*m, k)·(k, n) product.
    const std::int64_t rows = ops::prod(a_shape, 0, a_shape.size() - 1);
    Tensor out = ops::gemm(A.mem, B.mem, 1, rows, n, k, ta, tb, out_shape);
    return autograd::record(out, "MmBackward", {a, b}, [=](const Tensor& g) {
      // d(a) = g·op(b)^T, d(b) = op(a)^T·g: a transposed operand's block is read with the flag flipped.
      const Tensor av = sa.get(), bv = sb.get();
      return std::vector<Tensor>{need_a ? ops::gemm(g, bv, 1, rows, k, n, false, !tb, a_shape) : Tensor(),
                                 need_b ? ops::gemm(av, g, 1, k, n, rows, !ta, false, b_shape) : Tensor()};
    });
  }
  MINIDL_CHECK(a_batch == b_batch, ValueError, "matmul: batch dimensions must match, found ", shape_str(a_shape),
               " and ", shape_str(b_shape));
  const std::int64_t batch = shape_numel(a_batch);
  Tensor out = ops::gemm(A.mem, B.mem, batch, m, n, k, ta, tb, out_shape);
  return autograd::record(out, "BmmBackward", {a, b}, [=](const Tensor& g) {
    const Tensor av = sa.get(), bv = sb.get();
    return std::vector<Tensor>{need_a ? ops::gemm(g, bv, batch, m, k, n, false, !tb, a_shape) : Tensor(),
                               need_b ? ops::gemm(av, g, batch, k, n, m, !ta, false, b_shape) : Tensor()};
  });
}

Tensor Tensor::matmul(const Tensor& other) const { return minidl::matmul(*this, other); }

}  // namespace minidl
