#include "sampling.h"

namespace char_lstm {

using minidl::Tensor;

std::vector<std::int64_t> generate(CharLSTM& model, const std::vector<std::int64_t>& prompt, std::int64_t count,
                                   double temperature) {
  MINIDL_CHECK(!prompt.empty(), minidl::ValueError, "generate: the prompt is empty (give at least one character)");
  MINIDL_CHECK(temperature > 0, minidl::ValueError, "generate: temperature must be positive, found ", temperature);
  const minidl::Device device = model->parameters().front().device();
  const bool was_training = model->is_training();
  model->eval();
  minidl::NoGradGuard no_grad;
  std::vector<std::int64_t> tokens = prompt;
  Tensor input = minidl::from_vector(prompt, {static_cast<std::int64_t>(prompt.size()), 1}).to(device);
  std::optional<LSTMState> state;
  for (std::int64_t n = 0; n < count; ++n) {
    auto [logits, next] = model(input, state);
    state = next;
    const Tensor last = logits.select(0, -1).div(temperature);  // (1, V)
    input = minidl::multinomial(minidl::softmax(last, -1), 1);  // (1, 1): the next input, time-major
    tokens.push_back(input.cpu().item<std::int64_t>());
  }
  model->train(was_training);
  return tokens;
}

}  // namespace char_lstm
