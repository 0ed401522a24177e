#pragma once
// nn::MultiheadAttention (LibTorch's MultiheadAttentionImpl): sequence-first (L, N, E) inputs, PyTorch's parameter
// names and initialisation.
#include <tuple>

#include "minidl/nn/functional/attention.h"
#include "minidl/nn/modules.h"

namespace minidl {
namespace nn {

struct MultiheadAttentionOptions {
  /// kdim and vdim default to embed_dim.
  MultiheadAttentionOptions(std::int64_t embed_dim, std::int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads), kdim_(embed_dim), vdim_(embed_dim) {}
  MINIDL_ARG(std::int64_t, embed_dim);
  MINIDL_ARG(std::int64_t, num_heads);
  MINIDL_ARG(double, dropout) = 0.0;        // on the attention weights, in training mode
  MINIDL_ARG(bool, bias) = true;            // in_proj_bias and out_proj.bias
  MINIDL_ARG(bool, add_bias_kv) = false;    // learned bias_k, bias_v appended to the key and value sequences
  MINIDL_ARG(bool, add_zero_attn) = false;  // a zero key and value appended after the projection
  MINIDL_ARG(std::int64_t, kdim);
  MINIDL_ARG(std::int64_t, vdim);
};

/// Parameters as PyTorch's (state-dict compatible): in_proj_weight (3E, E) when kdim == vdim == E, else
/// q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim); in_proj_bias (3E); bias_k, bias_v
/// (1, 1, E) with add_bias_kv; out_proj (Linear E -> E). Initialised as PyTorch: xavier_uniform_ for the input
/// projections, zeros for in_proj_bias and out_proj.bias, xavier_normal_ for bias_k and bias_v, Linear's default
/// for out_proj.weight.
class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(std::int64_t embed_dim, std::int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiheadAttentionImpl(MultiheadAttentionOptions options);

  /// query (L, N, E), key (S, N, kdim), value (S, N, vdim) -> (attn_output (L, N, E), attn_weights). The weights
  /// are (N, L, S) averaged over the heads, (N, num_heads, L, S) with average_attn_weights = false, and undefined
  /// with need_weights = false, which runs scaled_dot_product_attention (the fused kernels on a GPU).
  /// key_padding_mask (N, S): bool (true = ignore that key) or float (added). attn_mask (L, S) or
  /// (N * num_heads, L, S): bool (true = not allowed) or float (added). Note the bool masks' sense is the
  /// opposite of scaled_dot_product_attention's, as in PyTorch.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true);
  void reset_parameters();

  MultiheadAttentionOptions options;
  bool _qkv_same_embed_dim;
  std::int64_t head_dim;
  Tensor in_proj_weight, in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight, bias_k, bias_v;
  std::shared_ptr<LinearImpl> out_proj;
};
MINIDL_MODULE(MultiheadAttention);

}  // namespace nn
}  // namespace minidl
