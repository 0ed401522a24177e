// nn::MultiheadAttention: PyTorch's multi_head_attention_forward (sequence-first), composed from linear, views,
// cat, softmax and dropout, or from scaled_dot_product_attention when the weights are not wanted.
#include <cmath>
#include <limits>

#include "minidl/autograd.h"
#include "minidl/factories.h"
#include "minidl/joining.h"
#include "minidl/linalg.h"
#include "minidl/nn/init.h"
#include "minidl/nn/modules/attention.h"
#include "minidl/reduction.h"
#include "ops/op_utils.h"

namespace minidl {
namespace nn {
namespace F = functional;

namespace {
constexpr const char* kModule = "MultiheadAttention";

/// A bool mask (true = masked out) as the additive float mask PyTorch makes of it (-inf there, 0 elsewhere); a
/// float mask as it is.
Tensor additive_mask(const Tensor& mask, const Tensor& like, const char* arg) {
  if (!mask.defined()) return mask;
  MINIDL_CHECK(mask.device() == like.device(), TypeError, kModule, ": ", arg, " must be on the query's device ",
               like.device(), ", found ", mask.device());
  if (mask.dtype() == kBool) {
    return zeros(mask.sizes(), TensorOptions(like.dtype()).device(like.device()))
        .masked_fill(mask, -std::numeric_limits<double>::infinity());
  }
  MINIDL_CHECK(mask.dtype() == like.dtype(), TypeError, kModule, ": ", arg, " must be bool or of the query's dtype ",
               dtype_name(like.dtype()), ", found ", dtype_name(mask.dtype()));
  return mask;
}

/// m with one more column of zeros at the end of its last dim (PyTorch's pad(m, (0, 1))).
Tensor pad_column(const Tensor& m) {
  if (!m.defined()) return m;
  Shape s = m.sizes();
  s.back() = 1;
  return cat({m, zeros(s, TensorOptions(m.dtype()).device(m.device()))}, -1);
}
}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(MultiheadAttentionOptions o)
    : Module("MultiheadAttention"), options(std::move(o)) {
  const std::int64_t e = options.embed_dim(), h = options.num_heads();
  MINIDL_CHECK(e > 0 && h > 0 && options.kdim() > 0 && options.vdim() > 0, ValueError, kModule,
               ": embed_dim, num_heads, kdim and vdim must be positive, found ", e, ", ", h, ", ", options.kdim(), ", ",
               options.vdim());
  MINIDL_CHECK(e % h == 0, ValueError, kModule, ": embed_dim (", e, ") must be divisible by num_heads (", h, ")");
  MINIDL_CHECK(options.dropout() >= 0.0 && options.dropout() <= 1.0, ValueError, kModule,
               ": dropout must be in [0, 1], found ", options.dropout());
  head_dim = e / h;
  _qkv_same_embed_dim = options.kdim() == e && options.vdim() == e;
  if (_qkv_same_embed_dim) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({e, e}));
    k_proj_weight = register_parameter("k_proj_weight", empty({e, options.kdim()}));
    v_proj_weight = register_parameter("v_proj_weight", empty({e, options.vdim()}));
  }
  if (options.bias()) in_proj_bias = register_parameter("in_proj_bias", empty({3 * e}));
  if (options.add_bias_kv()) {
    bias_k = register_parameter("bias_k", empty({1, 1, e}));
    bias_v = register_parameter("bias_v", empty({1, 1, e}));
  }
  out_proj = register_module("out_proj", std::make_shared<LinearImpl>(LinearOptions(e, e).bias(options.bias())));
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  if (_qkv_same_embed_dim) {
    init::xavier_uniform_(in_proj_weight);
  } else {
    init::xavier_uniform_(q_proj_weight);
    init::xavier_uniform_(k_proj_weight);
    init::xavier_uniform_(v_proj_weight);
  }
  if (in_proj_bias.defined()) {
    init::constant_(in_proj_bias, 0.0);
    init::constant_(out_proj->bias, 0.0);
  }
  if (bias_k.defined()) init::xavier_normal_(bias_k);
  if (bias_v.defined()) init::xavier_normal_(bias_v);
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                           const Tensor& key_padding_mask, bool need_weights,
                                                           const Tensor& attn_mask_in, bool average_attn_weights) {
  ops::check_defined(query, kModule, "query");
  ops::check_defined(key, kModule, "key");
  ops::check_defined(value, kModule, "value");
  const std::int64_t E = options.embed_dim(), H = options.num_heads();
  MINIDL_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, ValueError, kModule,
               ": query, key and value must be (L, N, E), (S, N, kdim) and (S, N, vdim), found shapes ",
               shape_str(query.sizes()), ", ", shape_str(key.sizes()), " and ", shape_str(value.sizes()));
  const std::int64_t L = query.size(0), N = query.size(1);
  MINIDL_CHECK(query.size(2) == E, ValueError, kModule, ": query's last dim must be embed_dim ", E, ", found shape ",
               shape_str(query.sizes()));
  MINIDL_CHECK(key.size(2) == options.kdim() && value.size(2) == options.vdim(), ValueError, kModule,
               ": key's and value's last dims must be kdim ", options.kdim(), " and vdim ", options.vdim(),
               ", found shapes ", shape_str(key.sizes()), " and ", shape_str(value.sizes()));
  MINIDL_CHECK(key.size(0) == value.size(0) && key.size(1) == N && value.size(1) == N, ValueError, kModule,
               ": key and value must be (S, N, ...) with the query's batch size N = ", N, ", found shapes ",
               shape_str(key.sizes()), " and ", shape_str(value.sizes()));

  // Input projections; self-attention (one tensor for all three) takes one matmul and splits it.
  Tensor q, k, v;
  std::vector<Tensor> b = in_proj_bias.defined() ? in_proj_bias.chunk(3) : std::vector<Tensor>(3);
  if (_qkv_same_embed_dim && query.is_same(key) && key.is_same(value)) {
    const std::vector<Tensor> qkv = F::linear(query, in_proj_weight, in_proj_bias).chunk(3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else if (_qkv_same_embed_dim) {
    const std::vector<Tensor> w = in_proj_weight.chunk(3);
    q = F::linear(query, w[0], b[0]), k = F::linear(key, w[1], b[1]), v = F::linear(value, w[2], b[2]);
  } else {
    q = F::linear(query, q_proj_weight, b[0]);
    k = F::linear(key, k_proj_weight, b[1]);
    v = F::linear(value, v_proj_weight, b[2]);
  }

  Tensor attn_mask = additive_mask(attn_mask_in, q, "attn_mask");
  if (attn_mask.defined()) {
    const std::int64_t S0 = key.size(0);
    const bool ok =
        (attn_mask.dim() == 2 && attn_mask.size(0) == L && attn_mask.size(1) == S0) ||
        (attn_mask.dim() == 3 && attn_mask.size(0) == N * H && attn_mask.size(1) == L && attn_mask.size(2) == S0);
    MINIDL_CHECK(ok, ValueError, kModule, ": attn_mask must be (L, S) = (", L, ", ", S0,
                 ") or (N * num_heads, L, S) = (", N * H, ", ", L, ", ", S0, "), found shape ",
                 shape_str(attn_mask_in.sizes()));
    if (attn_mask.dim() == 2) attn_mask = attn_mask.unsqueeze(0);
  }
  Tensor padding = additive_mask(key_padding_mask, q, "key_padding_mask");
  if (padding.defined()) {
    MINIDL_CHECK(padding.dim() == 2 && padding.size(0) == N && padding.size(1) == key.size(0), ValueError, kModule,
                 ": key_padding_mask must be (N, S) = (", N, ", ", key.size(0), "), found shape ",
                 shape_str(key_padding_mask.sizes()));
  }
  if (bias_k.defined()) {
    k = cat({k, bias_k.repeat({1, N, 1})});
    v = cat({v, bias_v.repeat({1, N, 1})});
    attn_mask = pad_column(attn_mask);
    padding = pad_column(padding);
  }
  // Heads: (L, N, E) -> (N * H, L, head_dim), views of the projections.
  q = q.reshape({L, N * H, head_dim}).transpose(0, 1);
  k = k.reshape({k.size(0), N * H, head_dim}).transpose(0, 1);
  v = v.reshape({v.size(0), N * H, head_dim}).transpose(0, 1);
  if (options.add_zero_attn()) {
    const Tensor z = zeros({N * H, 1, head_dim}, TensorOptions(q.dtype()).device(q.device()));
    k = cat({k, z}, 1);
    v = cat({v, z}, 1);
    attn_mask = pad_column(attn_mask);
    padding = pad_column(padding);
  }
  const std::int64_t S = k.size(1);
  if (padding.defined()) {
    padding = padding.reshape({N, 1, 1, S}).expand({N, H, 1, S}).reshape({N * H, 1, S});
    attn_mask = attn_mask.defined() ? attn_mask + padding : padding;
  }
  const double p = is_training() ? options.dropout() : 0.0;

  Tensor out, weights;
  if (need_weights) {
    Tensor scores = matmul(q * (1.0 / std::sqrt(static_cast<double>(head_dim))), k.transpose(1, 2));
    if (attn_mask.defined()) scores = scores + attn_mask;
    weights = minidl::softmax(scores, -1);
    out = matmul(p > 0.0 ? F::dropout(weights, p, true) : weights, v);  // (N * H, L, head_dim)
    weights = weights.reshape({N, H, L, S});
    if (average_attn_weights) weights = weights.mean({1});
    out = out.transpose(0, 1).reshape({L, N, E});
  } else {
    if (attn_mask.defined())
      attn_mask = attn_mask.size(0) == 1 ? attn_mask.unsqueeze(0) : attn_mask.reshape({N, H, -1, S});
    out = F::scaled_dot_product_attention(q.reshape({N, H, L, head_dim}), k.reshape({N, H, S, head_dim}),
                                          v.reshape({N, H, S, head_dim}), attn_mask, p);
    out = out.permute({2, 0, 1, 3}).reshape({L, N, E});
  }
  return {F::linear(out, out_proj->weight, out_proj->bias), weights};
}

}  // namespace nn
}  // namespace minidl
