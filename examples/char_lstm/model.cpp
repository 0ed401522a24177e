#include "model.h"

#include <sstream>

namespace char_lstm {

namespace F = minidl::nn::functional;
namespace nn = minidl::nn;
using minidl::Tensor;

namespace {
/// word_language_model's init_weights range.
constexpr double kInitRange = 0.1;
}  // namespace

std::map<std::string, std::string> CharLSTMConfig::to_metadata() const {
  return {{"char_lstm.vocab_size", std::to_string(vocab_size)},
          {"char_lstm.embed", std::to_string(embed)},
          {"char_lstm.hidden", std::to_string(hidden)},
          {"char_lstm.layers", std::to_string(layers)}};
}

CharLSTMConfig CharLSTMConfig::from_metadata(const std::map<std::string, std::string>& m, const std::string& file) {
  const auto integer = [&](const std::string& key) {
    const auto it = m.find(key);
    if (it == m.end()) throw minidl::FormatError(file + ": no " + key + " in the metadata (not a char_lstm file?)");
    const std::string& v = it->second;
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
  CharLSTMConfig c;
  c.vocab_size = integer("char_lstm.vocab_size");
  c.embed = integer("char_lstm.embed");
  c.hidden = integer("char_lstm.hidden");
  c.layers = integer("char_lstm.layers");
  return c;
}

bool CharLSTMConfig::operator==(const CharLSTMConfig& o) const {
  return vocab_size == o.vocab_size && embed == o.embed && hidden == o.hidden && layers == o.layers;
}

std::string CharLSTMConfig::str() const {
  std::ostringstream o;
  o << "embedding " << embed << ", " << layers << " LSTM layer(s) of " << hidden << ", vocabulary " << vocab_size;
  return o.str();
}

CharLSTMImpl::CharLSTMImpl(const CharLSTMConfig& c) : config_(c) {
  MINIDL_CHECK(c.vocab_size >= 1 && c.embed >= 1 && c.hidden >= 1 && c.layers >= 1, minidl::ValueError,
               "CharLSTM: every size must be positive, found ", c.str());
  // Registration order is word_language_model's (encoder, rnn, decoder), and so the parameters' order.
  encoder = register_module("encoder", nn::Embedding(c.vocab_size, c.embed));
  rnn = register_module("rnn", nn::LSTM(nn::LSTMOptions(c.embed, c.hidden).num_layers(c.layers)));
  decoder = register_module("decoder", nn::Linear(c.hidden, c.vocab_size));
  minidl::NoGradGuard no_grad;
  nn::init::uniform_(encoder->weight, -kInitRange, kInitRange);
  nn::init::uniform_(decoder->weight, -kInitRange, kInitRange);
  nn::init::zeros_(decoder->bias);
}

std::tuple<Tensor, LSTMState> CharLSTMImpl::forward(const Tensor& tokens, const std::optional<LSTMState>& state) {
  MINIDL_CHECK(tokens.dim() == 2 && tokens.dtype() == minidl::kInt64, minidl::ValueError,
               "CharLSTM: expected int64 tokens (T, B), found ", tokens.dtype(), " of shape ",
               minidl::shape_str(tokens.sizes()));
  auto [out, next] = rnn(encoder(tokens), state);
  return {decoder(out), next};
}

LSTMState CharLSTMImpl::zero_state(std::int64_t batch_size, const minidl::Device& device) const {
  const auto o = minidl::TensorOptions(minidl::kFloat32).device(device);
  return {minidl::zeros({config_.layers, batch_size, config_.hidden}, o),
          minidl::zeros({config_.layers, batch_size, config_.hidden}, o)};
}

Tensor CharLSTMImpl::loss(const Tensor& logits, const Tensor& targets) {
  return F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.reshape({-1}));
}

std::int64_t CharLSTMImpl::num_params() const {
  std::int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

}  // namespace char_lstm
