#include "model.h"

#include <cmath>
#include <sstream>

namespace gpt {

namespace F = minidl::nn::functional;
namespace nn = minidl::nn;
using minidl::Tensor;

namespace {

constexpr double kInitStd = 0.02;

nn::Linear linear(std::int64_t in, std::int64_t out, bool bias, double std) {
  nn::Linear l(nn::LinearOptions(in, out).bias(bias));
  minidl::NoGradGuard no_grad;
  nn::init::normal_(l->weight, 0.0, std);
  if (bias) nn::init::zeros_(l->bias);
  return l;
}

nn::LayerNorm layer_norm(const GPTConfig& c) { return nn::LayerNorm(nn::LayerNormOptions({c.n_embd}).bias(c.bias)); }

/// The residual projections' init (GPT-2's scaling by the number of residual additions).
double proj_std(const GPTConfig& c) { return kInitStd / std::sqrt(2.0 * static_cast<double>(c.n_layer)); }

}  // namespace

std::map<std::string, std::string> GPTConfig::to_metadata() const {
  const auto s = [](auto v) {
    std::ostringstream o;
    o.precision(17);
    o << v;
    return o.str();
  };
  return {{"gpt.vocab_size", s(vocab_size)},
          {"gpt.block_size", s(block_size)},
          {"gpt.n_layer", s(n_layer)},
          {"gpt.n_head", s(n_head)},
          {"gpt.n_embd", s(n_embd)},
          {"gpt.dropout", s(dropout)},
          {"gpt.bias", bias ? "true" : "false"}};
}

GPTConfig GPTConfig::from_metadata(const std::map<std::string, std::string>& m, const std::string& file) {
  const auto get = [&](const std::string& key) -> const std::string& {
    const auto it = m.find(key);
    if (it == m.end()) throw minidl::FormatError(file + ": no " + key + " in the metadata (not a gpt_train file?)");
    return it->second;
  };
  const auto integer = [&](const std::string& key) {
    const std::string& v = get(key);
    std::size_t used = 0;
    std::int64_t r = 0;
    try {
      r = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != v.size() || r < 1) {
      throw minidl::FormatError(file + ": " + key + " = \"" + v + "\" is not a positive integer");
    }
    return r;
  };
  GPTConfig c;
  c.vocab_size = integer("gpt.vocab_size");
  c.block_size = integer("gpt.block_size");
  c.n_layer = integer("gpt.n_layer");
  c.n_head = integer("gpt.n_head");
  c.n_embd = integer("gpt.n_embd");
  try {
    c.dropout = std::stod(get("gpt.dropout"));
  } catch (const std::logic_error&) {
    throw minidl::FormatError(file + ": gpt.dropout = \"" + get("gpt.dropout") + "\" is not a number");
  }
  const std::string& b = get("gpt.bias");
  if (b != "true" && b != "false") throw minidl::FormatError(file + ": gpt.bias = \"" + b + "\" is not true/false");
  c.bias = b == "true";
  return c;
}

bool GPTConfig::operator==(const GPTConfig& o) const {
  return vocab_size == o.vocab_size && block_size == o.block_size && n_layer == o.n_layer && n_head == o.n_head &&
         n_embd == o.n_embd && bias == o.bias;  // dropout is a training choice, not part of the weights
}

std::string GPTConfig::str() const {
  std::ostringstream o;
  o << n_layer << " layers, " << n_head << " heads, " << n_embd << " wide, context " << block_size << ", vocabulary "
    << vocab_size << ", dropout " << dropout << (bias ? ", biases" : ", no biases");
  return o.str();
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GPTConfig& c)
    : n_head_(c.n_head), n_embd_(c.n_embd), dropout_(c.dropout) {
  MINIDL_CHECK(c.n_embd % c.n_head == 0, minidl::ValueError, "CausalSelfAttention: n_head ", c.n_head,
               " does not divide n_embd ", c.n_embd);
  c_attn = register_module("c_attn", linear(c.n_embd, 3 * c.n_embd, c.bias, kInitStd));
  c_proj = register_module("c_proj", linear(c.n_embd, c.n_embd, c.bias, proj_std(c)));
  resid_dropout = register_module("resid_dropout", nn::Dropout(c.dropout));
}

Tensor CausalSelfAttentionImpl::forward(const Tensor& x) {
  const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  const std::vector<Tensor> qkv = c_attn(x).split(n_embd_, 2);
  const auto heads = [&](const Tensor& t) { return t.view({B, T, n_head_, C / n_head_}).transpose(1, 2); };
  const Tensor y = F::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), {},
                                                   is_training() ? dropout_ : 0.0, /*is_causal=*/true);
  return resid_dropout(c_proj(y.transpose(1, 2).contiguous().view({B, T, C})));
}

MLPImpl::MLPImpl(const GPTConfig& c) {
  c_fc = register_module("c_fc", linear(c.n_embd, 4 * c.n_embd, c.bias, kInitStd));
  c_proj = register_module("c_proj", linear(4 * c.n_embd, c.n_embd, c.bias, proj_std(c)));
  dropout = register_module("dropout", nn::Dropout(c.dropout));
}

Tensor MLPImpl::forward(const Tensor& x) { return dropout(c_proj(F::gelu(c_fc(x)))); }

BlockImpl::BlockImpl(const GPTConfig& c) {
  // nanoGPT's registration order (ln_1, attn, ln_2, mlp) is its parameters' order.
  ln_1 = register_module("ln_1", layer_norm(c));
  attn = register_module("attn", CausalSelfAttention(c));
  ln_2 = register_module("ln_2", layer_norm(c));
  mlp = register_module("mlp", MLP(c));
}

Tensor BlockImpl::forward(const Tensor& x) {
  const Tensor h = x + attn(ln_1(x));
  return h + mlp(ln_2(h));
}

TransformerImpl::TransformerImpl(const GPTConfig& c) {
  wte = register_module("wte", nn::Embedding(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", nn::Embedding(c.block_size, c.n_embd));
  {
    minidl::NoGradGuard no_grad;
    nn::init::normal_(wte->weight, 0.0, kInitStd);
    nn::init::normal_(wpe->weight, 0.0, kInitStd);
  }
  drop = register_module("drop", nn::Dropout(c.dropout));
  h = register_module("h", nn::ModuleList());
  for (std::int64_t i = 0; i < c.n_layer; ++i) h->push_back(Block(c));
  ln_f = register_module("ln_f", layer_norm(c));
}

GPTImpl::GPTImpl(const GPTConfig& c) : config_(c) {
  MINIDL_CHECK(c.vocab_size >= 1 && c.block_size >= 1 && c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1,
               minidl::ValueError, "GPT: every size must be positive, found ", c.str());
  transformer = register_module("transformer", Transformer(c));
}

Tensor GPTImpl::forward(const Tensor& idx) {
  MINIDL_CHECK(idx.dim() == 2 && idx.dtype() == minidl::kInt64, minidl::ValueError,
               "GPT: expected int64 token indices (B, T), found ", idx.dtype(), " of shape ",
               minidl::shape_str(idx.sizes()));
  const std::int64_t T = idx.size(1);
  MINIDL_CHECK(T <= config_.block_size, minidl::ValueError, "GPT: cannot forward a sequence of length ", T,
               ": the block size is only ", config_.block_size);
  const Tensor pos = minidl::arange(T, minidl::TensorOptions(minidl::kInt64).device(idx.device()));
  Tensor x = transformer->drop(transformer->wte(idx) + transformer->wpe(pos));
  for (std::size_t i = 0; i < transformer->h->size(); ++i) x = transformer->h->at<BlockImpl>(i).forward(x);
  // The head is tied to the token embedding (nanoGPT's weight tying): no weight of its own.
  return F::linear(transformer->ln_f(x), transformer->wte->weight);
}

Tensor GPTImpl::loss(const Tensor& logits, const Tensor& targets) {
  return F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.reshape({-1}));
}

std::int64_t GPTImpl::num_params(bool non_embedding) const {
  std::int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  if (non_embedding) n -= transformer->wpe->weight.numel();
  return n;
}

}  // namespace gpt
