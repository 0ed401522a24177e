#pragma once
// The character language model: nn::Embedding(vocab, embed) -> nn::LSTM(embed, hidden, layers), time-major
// (T, B) -> nn::Linear(hidden, vocab). The modules carry the names of PyTorch's word_language_model RNNModel
// (encoder, rnn, decoder), so the parameters are encoder.weight, rnn.weight_ih_l0, ..., decoder.weight,
// decoder.bias, and a checkpoint loads into that model (rnn_type LSTM, no weight tying) or into
// reference/char_lstm.py's. Initialisation as RNNModel.init_weights: U(-0.1, 0.1) for the embedding and the
// decoder's weight, zero decoder bias, nn::LSTM's own U(-1/sqrt(hidden), 1/sqrt(hidden)).
#include <minidl/minidl.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace char_lstm {

/// (h, c), each (layers, batch, hidden): the LSTM state carried from one batch to the next.
using LSTMState = std::tuple<minidl::Tensor, minidl::Tensor>;

struct CharLSTMConfig {
  std::int64_t vocab_size = 65, embed = 128, hidden = 512, layers = 2;

  /// As a checkpoint's metadata (char_lstm.vocab_size, ...), and back; from_metadata throws FormatError naming a
  /// missing or malformed key.
  std::map<std::string, std::string> to_metadata() const;
  static CharLSTMConfig from_metadata(const std::map<std::string, std::string>& metadata, const std::string& file);
  bool operator==(const CharLSTMConfig& o) const;
  std::string str() const;
};

class CharLSTMImpl : public minidl::nn::Module {
 public:
  explicit CharLSTMImpl(const CharLSTMConfig& c);
  /// Logits (T, B, vocab_size) of int64 tokens (T, B), and the state after the last step. `state` is the state
  /// before the first step (zeros when absent).
  std::tuple<minidl::Tensor, LSTMState> forward(const minidl::Tensor& tokens, const std::optional<LSTMState>& state);
  /// The zero state of a batch of `batch_size` on `device`.
  LSTMState zero_state(std::int64_t batch_size, const minidl::Device& device) const;
  /// The mean cross entropy (nats per character) of logits (T, B, V) against targets (T, B).
  static minidl::Tensor loss(const minidl::Tensor& logits, const minidl::Tensor& targets);
  const CharLSTMConfig& config() const { return config_; }
  std::int64_t num_params() const;

  minidl::nn::Embedding encoder{nullptr};
  minidl::nn::LSTM rnn{nullptr};
  minidl::nn::Linear decoder{nullptr};

 private:
  CharLSTMConfig config_;
};
MINIDL_MODULE(CharLSTM);

}  // namespace char_lstm
