#pragma once
// Text generation as nanoGPT's GPT.generate: the context cropped to the block size, the last position's logits
// divided by the temperature, optionally kept to the top k, softmax, one token drawn (minidl's generator, so a
// seed gives the same text), appended, repeated.
#include <cstdint>
#include <vector>

#include "model.h"

namespace gpt {

struct SampleOptions {
  std::int64_t max_new_tokens = 500;
  double temperature = 1.0;  ///< > 0
  std::int64_t top_k = 0;    ///< 0: every token
};

/// `prompt` followed by max_new_tokens generated tokens; an empty prompt is a ValueError. Runs in eval mode
/// without gradients on the model's device and leaves the model in the mode it found.
std::vector<std::int64_t> generate(GPT& model, const std::vector<std::int64_t>& prompt, const SampleOptions& options);

}  // namespace gpt
