#pragma once
// Text generation from the character LSTM: the prompt runs through the model from the zero state, then one
// character at a time is drawn from softmax(logits / temperature) (minidl's generator, so a seed gives the same
// text) and fed back with the carried state.
#include <cstdint>
#include <vector>

#include "model.h"

namespace char_lstm {

/// `prompt` followed by `count` generated tokens; an empty prompt or a temperature <= 0 is a ValueError. Runs in
/// eval mode without gradients on the model's device and leaves the model in the mode it found.
std::vector<std::int64_t> generate(CharLSTM& model, const std::vector<std::int64_t>& prompt, std::int64_t count,
                                   double temperature);

}  // namespace char_lstm
