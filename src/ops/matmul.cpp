// Matrix products: (n, k)·(k, m), batched (..., n, k)·(..., k, m) with equal batch dims, and batched·2-D
// (as a Linear layer applies to every row). The backward products use the kernels' transpose flags, so no
// transposed copies are made.
#include "ops/op_utils.h"

namespace minidl {

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  ops::check_same(a_in, b_in, "matmul");
  const Tensor a = ops::dense(a_in), b = ops::dense(b_in);
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
  autograd::SavedTensor sa(a, "matmul"), sb(b, "matmul");

  if (b.dim() == 2) {
    // Fold a's batch into its rows: one (B*m, k)·(k, n) product.
    const std::int64_t rows = ops::prod(a.sizes(), 0, a.sizes().size() - 1);
    Tensor out = ops::gemm(a, b, 1, rows, n, k, false, false, out_shape);
    return autograd::record(out, "MmBackward", {a, b}, [=](const Tensor& g) {
      const Tensor av = sa.get(), bv = sb.get();
      return std::vector<Tensor>{need_a ? ops::gemm(g, bv, 1, rows, k, n, false, true, av.sizes()) : Tensor(),
                                 need_b ? ops::gemm(av, g, 1, k, n, rows, true, false, bv.sizes()) : Tensor()};
    });
  }
  MINIDL_CHECK(a_batch == b_batch, ValueError, "matmul: batch dimensions must match, found ", shape_str(a.sizes()),
               " and ", shape_str(b.sizes()));
  const std::int64_t batch = shape_numel(a_batch);
  Tensor out = ops::gemm(a, b, batch, m, n, k, false, false, out_shape);
  return autograd::record(out, "BmmBackward", {a, b}, [=](const Tensor& g) {
    const Tensor av = sa.get(), bv = sb.get();
    return std::vector<Tensor>{need_a ? ops::gemm(g, bv, batch, m, k, n, false, true, av.sizes()) : Tensor(),
                               need_b ? ops::gemm(av, g, batch, k, n, m, true, false, bv.sizes()) : Tensor()};
  });
}

Tensor Tensor::matmul(const Tensor& other) const { return minidl::matmul(*this, other); }

}  // namespace minidl
