// scaled_dot_product_attention: the argument checks, the composed reference path (the CPU's, and the GPU's for
// the cases the fused kernels do not take), and the route to the flash-attention kernels (src/cuda/
// flash_attention.cu) with their backward rule.
#include "autocast/policy.h"
#include "minidl/nn/functional/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "layers/layer_utils.h"
#include "minidl/autograd.h"
#include "minidl/factories.h"
#include "minidl/joining.h"
#include "minidl/linalg.h"
#include "minidl/nn/functional.h"
#include "minidl/reduction.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/flash_attention.h"
#endif

namespace minidl {
namespace cuda {
namespace {
std::atomic<bool> g_flash_attention{true};
}  // namespace
void set_flash_attention_enabled(bool enabled) { g_flash_attention = enabled; }
bool flash_attention_enabled() { return g_flash_attention; }
}  // namespace cuda

namespace nn {
namespace functional {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr double kInf = std::numeric_limits<double>::infinity();

/// The leading (batch) dims of a (..., rows, cols) operand.
Shape batch_shape(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

/// Checks the arguments; returns the shape of the scores (batch..., L, S).
Shape check_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                      bool is_causal, double scale) {
  ops::check_defined(q, kOp, "query");
  ops::check_defined(k, kOp, "key");
  ops::check_defined(v, kOp, "value");
  ops::check_floating(q, kOp);
  ops::check_same(q, k, kOp);
  ops::check_same(q, v, kOp);
  MINIDL_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, ValueError, kOp,
               ": query, key and value need shapes (..., L, E), (..., S, E) and (..., S, Ev), found ",
               shape_str(q.sizes()), ", ", shape_str(k.sizes()), " and ", shape_str(v.sizes()));
  MINIDL_CHECK(q.size(-1) == k.size(-1), ValueError, kOp, ": query's last dim E (", q.size(-1),
               ") must equal key's, found key of shape ", shape_str(k.sizes()), " for query of shape ",
               shape_str(q.sizes()));
  MINIDL_CHECK(k.size(-2) == v.size(-2), ValueError, kOp, ": key and value must have the same number of rows S, found ",
               "key of shape ", shape_str(k.sizes()), " and value of shape ", shape_str(v.sizes()));
  MINIDL_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, ValueError, kOp, ": dropout_p must be in [0, 1], found ",
               dropout_p);
  MINIDL_CHECK(std::isfinite(scale), ValueError, kOp, ": scale must be finite, found ", scale);
  Shape scores = broadcast_shapes(broadcast_shapes(batch_shape(q), batch_shape(k), kOp), batch_shape(v), kOp);
  scores.push_back(q.size(-2));
  scores.push_back(k.size(-2));
  if (mask.defined()) {
    MINIDL_CHECK(!is_causal, ValueError, kOp, ": attn_mask must not be given with is_causal=true");
    MINIDL_CHECK(mask.dtype() == kBool || mask.dtype() == q.dtype(), TypeError, kOp,
                 ": attn_mask must be bool or of query's dtype ", dtype_name(q.dtype()), ", found ",
                 dtype_name(mask.dtype()));
    MINIDL_CHECK(mask.device() == q.device(), TypeError, kOp, ": attn_mask must be on query's device ", q.device(),
                 ", found ", mask.device());
    bool fits = mask.dim() <= static_cast<std::int64_t>(scores.size());
    for (std::int64_t i = 1; fits && i <= mask.dim(); ++i) {
      const std::int64_t m = mask.size(-i), s = scores[scores.size() - static_cast<std::size_t>(i)];
      fits = m == s || m == 1;
    }
    MINIDL_CHECK(fits, ValueError, kOp, ": attn_mask of shape ", shape_str(mask.sizes()),
                 " does not broadcast to the attention scores' shape ", shape_str(scores));
  }
  return scores;
}

/// The composed path: softmax(q · kᵀ · scale + mask) · v from differentiable ops. A query with every key masked
/// out gets zero weights (PyTorch's _safe_softmax): its scores are replaced by zeros before the softmax, so that
/// neither its weights nor their gradients are NaN, and its weights by zeros after it.
Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                           bool is_causal, double scale) {
  Tensor scores = matmul(q * scale, k.transpose(-2, -1));
  if (is_causal) {
    const Tensor keep = ones({q.size(-2), k.size(-2)}, TensorOptions(kBool).device(q.device())).tril();
    scores = where(keep, scores, -kInf);
  }
  Tensor masked_rows;
  if (mask.defined()) {
    scores = mask.dtype() == kBool ? where(mask, scores, -kInf) : scores + mask;
    masked_rows = all(eq(scores, -kInf), -1, /*keepdim=*/true);
    scores = where(masked_rows, 0.0, scores);
  }
  Tensor weights = minidl::softmax(scores, -1);
  if (masked_rows.defined()) weights = where(masked_rows, 0.0, weights);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, /*training=*/true);
  return matmul(weights, v);
}

#if MINIDL_CUDA_ENABLED
/// The cases the flash kernels take: float32 on a GPU, no mask, no dropout, the same batch dims on all three
/// operands, head dims up to kFlashMaxHeadDim, and something to compute.
bool flash_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p) {
  const auto rows_fit = [](std::int64_t n) { return n > 0 && n <= gpu::kFlashMaxRows; };
  return q.device().is_cuda() && cuda::flash_attention_enabled() && q.dtype() == kFloat32 && !mask.defined() &&
         dropout_p == 0.0 && batch_shape(q) == batch_shape(k) && batch_shape(q) == batch_shape(v) && q.numel() > 0 &&
         rows_fit(q.size(-2)) && rows_fit(k.size(-2)) && q.size(-1) <= gpu::kFlashMaxHeadDim &&
         v.size(-1) <= gpu::kFlashMaxHeadDim && v.size(-1) > 0;
}

/// t (..., rows, cols) as (batch, heads, rows, cols) with contiguous cols: a view where the strides allow (the
/// head-split transpose does), else a copy.
Tensor as_4d(const Tensor& t) {
  const Shape b = batch_shape(t);
  Tensor r;
  if (b.size() == 0) {
    r = t.reshape({1, 1, t.size(-2), t.size(-1)});
  } else if (b.size() == 1) {
    r = t.unsqueeze(0);
  } else if (b.size() == 2) {
    r = t;
  } else {
    r = t.reshape({-1, b.back(), t.size(-2), t.size(-1)});
  }
  return r.size(3) > 1 && r.stride(3) != 1 ? r.contiguous() : r;
}

template <class P>
gpu::AttentionRows<P> rows_of(const Tensor& t4) {
  gpu::AttentionRows<P> r;
  r.data = t4.data_ptr<float>();
  r.batch_stride = t4.stride(0);
  r.head_stride = t4.stride(1);
  r.row_stride = t4.stride(2);
  return r;
}

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, double scale) {
  const Tensor q4 = as_4d(q), k4 = as_4d(k), v4 = as_4d(v);
  gpu::FlashAttentionShape s;
  s.batch = q4.size(0);
  s.heads = q4.size(1);
  s.L = static_cast<int>(q4.size(2));
  s.S = static_cast<int>(k4.size(2));
  s.E = static_cast<int>(q4.size(3));
  s.Ev = static_cast<int>(v4.size(3));
  s.scale = static_cast<float>(scale);
  s.causal = is_causal;
  Shape out_shape = batch_shape(q);
  out_shape.push_back(s.L);
  out_shape.push_back(s.Ev);
  const Tensor out = ops::empty_as(out_shape, q);
  const Tensor lse = ops::empty_as({s.batch * s.heads * s.L}, q);
  gpu::DeviceGuard guard(q.device().index());
  gpu::flash_attention_forward(s, rows_of<const float*>(q4), rows_of<const float*>(k4), rows_of<const float*>(v4),
                               rows_of<float*>(as_4d(out)), lse.data_ptr<float>());
  const autograd::SavedTensor sq(q4, kOp), sk(k4, kOp), sv(v4, kOp), so(out, kOp);
  const bool need_q = q.requires_grad(), need_k = k.requires_grad(), need_v = v.requires_grad();
  const Shape q_shape = q.sizes(), k_shape = k.sizes(), v_shape = v.sizes();
  return autograd::record(out, "ScaledDotProductFlashAttentionBackward", {q, k, v}, [=](const Tensor& g) {
    const Tensor q4 = sq.get(), k4 = sk.get(), v4 = sv.get();
    const Tensor delta = ops::dense((g * so.get()).sum({-1}));  // rowsum(dout * out), (batch..., L)
    const Tensor dq = ops::empty_as(q_shape, g), dk = ops::empty_as(k_shape, g), dv = ops::empty_as(v_shape, g);
    gpu::DeviceGuard guard(g.device().index());
    gpu::flash_attention_backward(s, rows_of<const float*>(q4), rows_of<const float*>(k4), rows_of<const float*>(v4),
                                  rows_of<const float*>(as_4d(g)), lse.data_ptr<float>(), delta.data_ptr<float>(),
                                  rows_of<float*>(as_4d(dq)), rows_of<float*>(as_4d(dk)), rows_of<float*>(as_4d(dv)));
    return std::vector<Tensor>{need_q ? dq : Tensor(), need_k ? dk : Tensor(), need_v ? dv : Tensor()};
  });
}
#endif

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  MINIDL_AUTOCAST(scaled_dot_product_attention, query, key, value, attn_mask, dropout_p, is_causal, scale);
  ops::check_defined(query, kOp, "query");
  const std::int64_t e = query.dim() > 0 ? query.size(-1) : 0;
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(e, 1)));
  check_arguments(query, key, value, attn_mask, dropout_p, is_causal, sc);
#if MINIDL_CUDA_ENABLED
  if (flash_applies(query, key, value, attn_mask, dropout_p)) return flash_attention(query, key, value, is_causal, sc);
#endif
  return reference_attention(query, key, value, attn_mask, dropout_p, is_causal, sc);
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
