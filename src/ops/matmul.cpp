// Matrix products with PyTorch's semantics (minidl/linalg.h), all through one planner, `product`, that turns
// op(a)·op(b) over broadcast batch dims into as few GEMM calls as the strides allow, usually one:
//   - the last two dims of an operand are read through the GEMM's row stride and transpose flag when one of their
//     strides is 1 (x.t(), k.transpose(-2, -1), a narrow of the last dim), else copied once;
//   - a batch dim over which b is broadcast joins a's rows (m), when a's rows continue evenly across it: a
//     (B, T, C)·(C, D) product is one (B*T, C)·(C, D) GEMM;
//   - a batch dim the result sums over (a gradient of a broadcast operand) joins the contraction (k) when both
//     operands continue evenly across it: the weight gradient of that product is one (C, B*T)·(B*T, D) GEMM;
//   - the remaining batch dims become one batch with a stride per operand, 0 where it is broadcast, when the
//     strides allow; outer dims that do not merge with the rest are looped over, one GEMM call per index (a
//     head-split q·kᵀ), when each call has work enough; otherwise the operands that prevent it are materialised at
//     the broadcast shape, as PyTorch does for every broadcast batch.
// The backward products are the same planner on the saved operands' transposed views, summed to each operand's
// batch shape, so they need no transposed copies either.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "autocast/policy.h"
#include "minidl/linalg.h"
#include "autograd/node.h"
#include "core/env_switch.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

using i64 = std::int64_t;
using kernels::MatmulOperand;

/// How the GEMM reads a rows x cols matrix whose element (r, c) is at r * rs + c * cs: as is (unit column stride,
/// rows ld apart) or as the transpose of a row-major block (unit row stride); nullopt when neither stride is 1.
std::optional<MatmulOperand> matrix_operand(i64 rows, i64 cols, i64 rs, i64 cs) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<i64>(cols, 1))) {
    return MatmulOperand{false, rows == 1 ? std::max<i64>(cols, 1) : rs, 0};
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<i64>(rows, 1))) {
    return MatmulOperand{true, cols == 1 ? std::max<i64>(rows, 1) : cs, 0};
  }
  return std::nullopt;
}

/// t's last two dims as a GEMM operand, with t itself, or a contiguous copy when the GEMM cannot read them.
std::pair<Tensor, MatmulOperand> gemm_operand(const Tensor& t) {
  const i64 rows = t.size(-2), cols = t.size(-1);
  if (const auto o = matrix_operand(rows, cols, t.stride(-2), t.stride(-1))) return {t, *o};
  const Tensor c = t.contiguous();
  return {c, *matrix_operand(rows, cols, c.stride(-2), c.stride(-1))};
}

Shape batch_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

/// Size and stride of t's batch dim aligned with dim d of a batch of `nd` dims (size 1, stride 0 where t has none).
std::pair<i64, i64> batch_dim(const Tensor& t, std::size_t d, std::size_t nd) {
  const std::size_t tb = static_cast<std::size_t>(t.dim()) - 2;
  if (d + tb < nd) return {1, 0};
  const std::size_t td = d + tb - nd;
  return {t.sizes()[td], t.sizes()[td] == 1 ? 0 : t.strides()[td]};
}

/// One batch dim of the product: its size, the operands' strides along it (0: broadcast), and whether the result
/// keeps it (else sums over it).
struct BatchDim {
  i64 size, sa, sb;
  bool kept;
};

/// op(a)·op(b), a (..., m, k) and b (..., k, n) of at least 2 dims with batch dims that broadcast, summed over the
/// broadcast batch down to `result_batch` (sum_to's rule; the broadcast batch itself for a plain product). Records
/// nothing: the callers own the autograd.
Tensor product(Tensor a, Tensor b, const Shape& result_batch) {
  const i64 m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const Shape full = broadcast_shapes(batch_of(a), batch_of(b), "matmul");
  const std::size_t nd = full.size();
  Shape out_shape = result_batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  const auto kept = [&](std::size_t d) {  // whether the result keeps dim d of `full`
    const std::size_t r = result_batch.size();
    return d + r >= nd && result_batch[d + r - nd] == full[d];
  };
  if (shape_numel(full) == 0 || m == 0 || n == 0 || k == 0) {
    return zeros(out_shape, TensorOptions(a.dtype()).device(a.device()));
  }

  // A dim summed over where one operand is broadcast is summed in the other first: sum_j x y[j] = x sum_j y[j].
  for (std::size_t d = 0; d < nd; ++d) {
    if (kept(d) || full[d] == 1) continue;
    const bool a_has = batch_dim(a, d, nd).first > 1, b_has = batch_dim(b, d, nd).first > 1;
    if (a_has != b_has) {
      Tensor& t = a_has ? a : b;
      t = t.sum({static_cast<i64>(d + static_cast<std::size_t>(t.dim()) - 2 - nd)}, true);
    }
  }

  auto [A, la] = gemm_operand(a);
  auto [B, lb] = gemm_operand(b);
  std::vector<BatchDim> dims;
  for (std::size_t d = 0; d < nd; ++d) {
    const auto [size_a, sa] = batch_dim(A, d, nd);
    const auto [size_b, sb] = batch_dim(B, d, nd);
    const i64 size = std::max(size_a, size_b);
    if (size > 1) dims.push_back({size, sa, sb, kept(d)});
  }

  // Summed dims along which both operands continue their contraction evenly join k. A row-major a of one row has
  // a free row stride, which grows with k.
  i64 kk = k, mm = m;
  const bool a_free = !la.trans && m == 1;
  for (bool folded = true; folded;) {
    folded = false;
    for (auto it = dims.begin(); it != dims.end(); ++it) {
      const i64 a_col = la.trans ? la.ld : 1, b_row = lb.trans ? 1 : lb.ld;
      const bool a_fits = la.trans || a_free || la.ld >= kk * it->size;
      const bool b_fits = !lb.trans || lb.ld >= kk * it->size;
      if (!it->kept && it->sa == kk * a_col && it->sb == kk * b_row && a_fits && b_fits) {
        kk *= it->size;
        if (a_free) la.ld = std::max(la.ld, kk);
        dims.erase(it);
        folded = true;
        break;
      }
    }
  }
  const bool summed_left = std::any_of(dims.begin(), dims.end(), [](const BatchDim& d) { return !d.kept; });
  if (summed_left) return sum_to(product(A, B, full), out_shape);

  // Innermost batch dims over which b is broadcast join m when a's rows continue evenly across them.
  while (!dims.empty() && dims.back().sb == 0 && !la.trans) {
    const BatchDim& d = dims.back();
    if (mm == 1 && d.sa >= kk) la.ld = d.sa;  // a single row: its stride is free
    if (d.sa != mm * la.ld) break;
    mm *= d.size;
    dims.pop_back();
  }

  // The rest must be one batch stride per operand: dims merge where an operand's outer stride is its inner
  // stride times the inner size.
  const auto merges_from = [&](std::size_t first, auto stride) {
    for (std::size_t i = first + 1; i < dims.size(); ++i) {
      if (stride(dims[i - 1]) != stride(dims[i]) * dims[i].size) return false;
    }
    return true;
  };
  const auto sa_of = [](const BatchDim& d) { return d.sa; };
  const auto sb_of = [](const BatchDim& d) { return d.sb; };
  std::size_t outer = 0;  // the outer dims that keep the rest from merging
  while (outer < dims.size() && !(merges_from(outer, sa_of) && merges_from(outer, sb_of))) ++outer;
  i64 calls = 1, batch = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) (i < outer ? calls : batch) *= dims[i].size;
  // Dims that do not merge (the (batch, head) dims of a head split of one (B, T, 3C) buffer) are looped over, a
  // GEMM call per index, where each call has work enough for its launch; else the operands that prevent merging
  // are materialised at the broadcast shape, as PyTorch does for every broadcast batch.
  constexpr double kMinCallWork = 1 << 16;  // multiply-adds
  if (outer > 0 && static_cast<double>(batch) * mm * n * kk < kMinCallWork) {
    const bool a_merges = merges_from(0, sa_of), b_merges = merges_from(0, sb_of);
    const auto materialise = [&](const Tensor& t) {
      Shape s = full;
      s.push_back(t.size(-2));
      s.push_back(t.size(-1));
      return t.expand(s).contiguous();
    };
    return product(a_merges ? A : materialise(A), b_merges ? B : materialise(B), result_batch);
  }
  la.batch_stride = dims.empty() ? 0 : dims.back().sa;
  lb.batch_stride = dims.empty() ? 0 : dims.back().sb;
  Tensor out = ops::empty_as(out_shape, A);
  const kernels::MatmulLayout layout{batch, mm, n, kk, la, lb};
  if (outer == 0) {
    MINIDL_ON_BACKEND(A.device(), matmul(A, B, out, layout));
    return out;
  }
  // The result is dense, so call c writes the c-th block of batch * mm * n elements; the operands' matrices of
  // call c start at its outer indices times their strides.
  const auto at = [](const Tensor& t, const Shape& sizes, const Shape& strides, i64 offset) {
    return t.as_strided(sizes, strides, t.storage_offset() + offset);
  };
  for (i64 c = 0; c < calls; ++c) {
    i64 off_a = 0, off_b = 0;
    for (std::size_t i = outer, rest = static_cast<std::size_t>(c); i-- > 0;) {
      const i64 idx = static_cast<i64>(rest) % dims[i].size;
      rest /= static_cast<std::size_t>(dims[i].size);
      off_a += idx * dims[i].sa;
      off_b += idx * dims[i].sb;
    }
    Tensor o = at(out, {batch, mm, n}, {mm * n, n, 1}, c * batch * mm * n);
    MINIDL_ON_BACKEND(A.device(), matmul(at(A, {1}, {1}, off_a), at(B, {1}, {1}, off_b), o, layout));
  }
  return out;
}

/// The dtype and device rules every product shares: one dtype for both operands (as PyTorch: bfloat16 @ float32 is a
/// TypeError, not a promotion); bfloat16 and float16 accumulate in float32 on both backends.
void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  ops::check_same(a, b, op);
  const DType dt = a.dtype();
  MINIDL_CHECK(dt != kBool, TypeError, op, ": bool operands are not supported (as in PyTorch); convert them first");
  MINIDL_CHECK(!(a.is_cuda() && is_integral(dt, false)), TypeError, op, ": ", dt,
               " operands are supported on the CPU only (as in PyTorch); found them on ", a.device());
  ops::check_lowp_products(a, op);
}

/// matmul of operands of at least 2 dims, with its backward rule.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  MINIDL_CHECK(a.size(-1) == b.size(-2), ValueError, "matmul: shapes ", shape_str(a.sizes()), " and ",
               shape_str(b.sizes()), " cannot be multiplied (", a.size(-2), "x", a.size(-1), " and ", b.size(-2), "x",
               b.size(-1), ")");
  const Shape a_batch = batch_of(a), b_batch = batch_of(b);
  std::size_t nd = std::max(a_batch.size(), b_batch.size());
  for (std::size_t d = 0; d < nd; ++d) {
    const i64 sa = d + a_batch.size() < nd ? 1 : a_batch[d + a_batch.size() - nd];
    const i64 sb = d + b_batch.size() < nd ? 1 : b_batch[d + b_batch.size() - nd];
    MINIDL_CHECK(sa == sb || sa == 1 || sb == 1, ValueError, "matmul: the batch dimensions ", shape_str(a_batch),
                 " and ", shape_str(b_batch), " of shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
                 " do not broadcast (", sa, " vs ", sb, ")");
  }
  const Tensor av = a.detach(), bv = b.detach();
  Tensor out = product(av, bv, broadcast_shapes(a_batch, b_batch, "matmul"));
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  if (!need_a && !need_b) return out;
  autograd::SavedTensor saved_a(av, "matmul"), saved_b(bv, "matmul");
  return autograd::record_strided(out, "MatmulBackward", {a, b}, [=](const Tensor& g) {
    // d(a) = g·b^T and d(b) = a^T·g, each summed over the batch dims its operand was broadcast along.
    const Tensor x = saved_a.get(), y = saved_b.get(), gv = g.detach();
    return std::vector<Tensor>{need_a ? product(gv, y.transpose(-1, -2), a_batch) : Tensor(),
                               need_b ? product(x.transpose(-1, -2), gv, b_batch) : Tensor()};
  });
}

/// `input` must broadcast to `shape` itself (addmm's input broadcasts to the product, never beyond it).
void check_broadcasts_to(const Tensor& input, const Shape& shape, const char* op) {
  const Shape& in = input.sizes();
  bool ok = in.size() <= shape.size();
  for (std::size_t i = 0; ok && i < in.size(); ++i) {
    const i64 d = in[in.size() - 1 - i];
    ok = d == 1 || d == shape[shape.size() - 1 - i];
  }
  MINIDL_CHECK(ok, ValueError, op, ": input of shape ", shape_str(in), " does not broadcast to the product's shape ",
               shape_str(shape));
}

/// beta * input + alpha * prod, with PyTorch's rules: beta = 0 ignores input, and integer tensors take integer
/// scalars only.
Tensor add_scaled(const Tensor& input, const Tensor& prod, const Scalar& beta, const Scalar& alpha, const char* op) {
  ops::check_same(input, prod, op);
  if (!is_floating_point(prod.dtype())) {
    MINIDL_CHECK(!beta.is_floating_point() && !alpha.is_floating_point(), TypeError, op,
                 ": for integral input tensors, beta and alpha must not be floating point numbers (found beta ",
                 beta.to_double(), ", alpha ", alpha.to_double(), ")");
  }
  if (beta.to_double() == 0.0) return alpha.to_double() == 1.0 ? prod : mul(prod, alpha);
  return add(beta.to_double() == 1.0 ? input : mul(input, beta), prod, alpha);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(matmul, a, b);
  check_operands(a, b, "matmul");
  MINIDL_CHECK(a.dim() >= 1 && b.dim() >= 1, ValueError, "matmul: both arguments need at least 1 dimension, found ",
               a.dim(), "-d and ", b.dim(), "-d (shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), ")");
  // A vector is a row on the left and a column on the right, and that dim leaves the result.
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a, b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  MINIDL_CHECK(a2.size(-1) == b2.size(-2), ValueError, "matmul: shapes ", shape_str(a.sizes()), " and ",
               shape_str(b.sizes()), " cannot be multiplied (", a2.size(-2), "x", a2.size(-1), " and ", b2.size(-2),
               "x", b2.size(-1), ")");
  Tensor out = matmul_nd(a2, b2);
  if (b.dim() == 1) out = out.squeeze(-1);
  if (a.dim() == 1) out = out.squeeze(b.dim() == 1 ? -1 : -2);
  return out;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(mm, a, b);
  check_operands(a, b, "mm");
  MINIDL_CHECK(a.dim() == 2 && b.dim() == 2, ValueError, "mm: expected two 2-D matrices, found shapes ",
               shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  MINIDL_CHECK(a.size(1) == b.size(0), ValueError, "mm: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
               " cannot be multiplied (", a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  return matmul_nd(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(bmm, a, b);
  check_operands(a, b, "bmm");
  MINIDL_CHECK(a.dim() == 3 && b.dim() == 3, ValueError, "bmm: expected two 3-D tensors, found shapes ",
               shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  MINIDL_CHECK(a.size(0) == b.size(0), ValueError,
               "bmm: batch1 and batch2 must have the same number of batches, "
               "found shapes ",
               shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  MINIDL_CHECK(a.size(2) == b.size(1), ValueError, "bmm: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
               " cannot be multiplied (", a.size(1), "x", a.size(2), " and ", b.size(1), "x", b.size(2), ")");
  return matmul_nd(a, b);
}

Tensor mv(const Tensor& mat, const Tensor& vec) {
  MINIDL_AUTOCAST(mv, mat, vec);
  check_operands(mat, vec, "mv");
  MINIDL_CHECK(mat.dim() == 2 && vec.dim() == 1, ValueError,
               "mv: expected a 2-D matrix and a 1-D vector, found shapes ", shape_str(mat.sizes()), " and ",
               shape_str(vec.sizes()));
  MINIDL_CHECK(mat.size(1) == vec.size(0), ValueError, "mv: shapes ", shape_str(mat.sizes()), " and ",
               shape_str(vec.sizes()), " cannot be multiplied (", mat.size(0), "x", mat.size(1), " and ", vec.size(0),
               ")");
  return matmul(mat, vec);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(dot, a, b);
  check_operands(a, b, "dot");
  MINIDL_CHECK(a.dim() == 1 && b.dim() == 1, ValueError, "dot: expected two 1-D tensors, found shapes ",
               shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  MINIDL_CHECK(a.size(0) == b.size(0), ValueError, "dot: the vectors have different sizes, ", a.size(0), " and ",
               b.size(0));
  return matmul(a, b);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  ops::check_defined(a, "outer", "self");
  ops::check_defined(b, "outer", "vec2");
  MINIDL_CHECK(a.dim() == 1 && b.dim() == 1, ValueError, "outer: expected two 1-D tensors, found shapes ",
               shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  return mul(a.unsqueeze(1), b);
}

Tensor ger(const Tensor& a, const Tensor& b) { return outer(a, b); }

Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) {
  MINIDL_AUTOCAST(addmm, input, mat1, mat2, beta, alpha);
  ops::check_defined(input, "addmm", "input");
  const Tensor prod = mm(mat1, mat2);
  check_broadcasts_to(input, prod.sizes(), "addmm");
  return add_scaled(input, prod, beta, alpha, "addmm");
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  MINIDL_AUTOCAST(baddbmm, input, batch1, batch2, beta, alpha);
  ops::check_defined(input, "baddbmm", "input");
  const Tensor prod = bmm(batch1, batch2);
  check_broadcasts_to(input, prod.sizes(), "baddbmm");
  return add_scaled(input, prod, beta, alpha, "baddbmm");
}

Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha) {
  MINIDL_AUTOCAST(addmv, input, mat, vec, beta, alpha);
  ops::check_defined(input, "addmv", "input");
  const Tensor prod = mv(mat, vec);
  check_broadcasts_to(input, prod.sizes(), "addmv");
  return add_scaled(input, prod, beta, alpha, "addmv");
}

namespace ops {
void check_lowp_products(const Tensor& a, const char* op) {
  // MINIDL_CUDA_LOWP_PRODUCTS=1 runs them anyway: how the path is examined on a GPU until it is trusted (the
  // MatmulLowpGpu tests and bench/cublaslt_candidates).
  static const bool enabled = env_switch("MINIDL_CUDA_LOWP_PRODUCTS", false);
  MINIDL_CHECK(enabled || !(a.is_cuda() && is_reduced_floating_point(a.dtype())), TypeError, op, ": ", a.dtype(),
               " operands on CUDA are not enabled yet: the cuBLASLt 16-bit path gave wrong input gradients in its "
               "first GPU run (MatmulLowpGpu tests, issue 25); use float32 there, or the CPU "
               "(MINIDL_CUDA_LOWP_PRODUCTS=1 runs them regardless)");
}
}  // namespace ops

Tensor Tensor::matmul(const Tensor& other) const { return minidl::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& mat2) const { return minidl::mm(*this, mat2); }
Tensor Tensor::bmm(const Tensor& mat2) const { return minidl::bmm(*this, mat2); }
Tensor Tensor::mv(const Tensor& vec) const { return minidl::mv(*this, vec); }
Tensor Tensor::dot(const Tensor& other) const { return minidl::dot(*this, other); }
Tensor Tensor::outer(const Tensor& vec2) const { return minidl::outer(*this, vec2); }
Tensor Tensor::ger(const Tensor& vec2) const { return minidl::ger(*this, vec2); }
Tensor Tensor::addmm(const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) const {
  return minidl::addmm(*this, mat1, mat2, beta, alpha);
}
Tensor Tensor::baddbmm(const Tensor& batch1, const Tensor& batch2, const Scalar& beta, const Scalar& alpha) const {
  return minidl::baddbmm(*this, batch1, batch2, beta, alpha);
}
Tensor Tensor::addmv(const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha) const {
  return minidl::addmv(*this, mat, vec, beta, alpha);
}

}  // namespace minidl
