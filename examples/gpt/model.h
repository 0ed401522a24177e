#pragma once
// nanoGPT's GPT (karpathy/nanoGPT model.py) in minidl: token and position embeddings, dropout, n_layer
// pre-LayerNorm blocks (causal self-attention through scaled_dot_product_attention, a 4x GELU MLP, residuals),
// a final LayerNorm and a head tied to the token embedding. The modules are named as nanoGPT's, so the
// parameters are transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ... in nanoGPT's order, and a
// checkpoint loads into PyTorch's model (which also lists the tied head as lm_head.weight; safetensors keeps
// one name per tensor, this one). Initialisation as nanoGPT's: N(0, 0.02) for every linear and embedding
// weight, N(0, 0.02 / sqrt(2 n_layer)) for the residual projections (c_proj), zero biases, unit norms.
#include <minidl/minidl.h>

#include <cstdint>
#include <map>
#include <string>

namespace gpt {

struct GPTConfig {
  std::int64_t vocab_size = 65, block_size = 256, n_layer = 6, n_head = 6, n_embd = 384;
  double dropout = 0.0;
  bool bias = false;

  /// As a checkpoint's metadata (gpt.n_layer, ...), and back; from_metadata throws FormatError naming a missing
  /// or malformed key.
  std::map<std::string, std::string> to_metadata() const;
  static GPTConfig from_metadata(const std::map<std::string, std::string>& metadata, const std::string& file);
  bool operator==(const GPTConfig& o) const;
  std::string str() const;
};

class CausalSelfAttentionImpl : public minidl::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GPTConfig& c);
  minidl::Tensor forward(const minidl::Tensor& x) override;

  minidl::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  minidl::nn::Dropout resid_dropout{nullptr};

 private:
  std::int64_t n_head_, n_embd_;
  double dropout_;
};
MINIDL_MODULE(CausalSelfAttention);

class MLPImpl : public minidl::nn::Module {
 public:
  explicit MLPImpl(const GPTConfig& c);
  minidl::Tensor forward(const minidl::Tensor& x) override;

  minidl::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  minidl::nn::Dropout dropout{nullptr};
};
MINIDL_MODULE(MLP);

class BlockImpl : public minidl::nn::Module {
 public:
  explicit BlockImpl(const GPTConfig& c);
  minidl::Tensor forward(const minidl::Tensor& x) override;

  minidl::nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  minidl::nn::LayerNorm ln_2{nullptr};
  MLP mlp{nullptr};
};
MINIDL_MODULE(Block);

/// nanoGPT's `transformer` ModuleDict.
class TransformerImpl : public minidl::nn::Module {
 public:
  explicit TransformerImpl(const GPTConfig& c);

  minidl::nn::Embedding wte{nullptr}, wpe{nullptr};
  minidl::nn::Dropout drop{nullptr};
  minidl::nn::ModuleList h{nullptr};
  minidl::nn::LayerNorm ln_f{nullptr};
};
MINIDL_MODULE(Transformer);

class GPTImpl : public minidl::nn::Module {
 public:
  explicit GPTImpl(const GPTConfig& c);
  /// Logits (B, T, vocab_size) of int64 token indices (B, T), T <= block_size (else ValueError).
  minidl::Tensor forward(const minidl::Tensor& idx) override;
  /// The mean cross entropy of logits (B, T, V) against targets (B, T).
  static minidl::Tensor loss(const minidl::Tensor& logits, const minidl::Tensor& targets);
  const GPTConfig& config() const { return config_; }
  /// Parameters without the position embedding (nanoGPT's get_num_params()).
  std::int64_t num_params(bool non_embedding = true) const;

  Transformer transformer{nullptr};

 private:
  GPTConfig config_;
};
MINIDL_MODULE(GPT);

}  // namespace gpt
