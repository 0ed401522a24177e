#include "sampling.h"

#include <algorithm>
#include <limits>

namespace gpt {

using minidl::Tensor;

std::vector<std::int64_t> generate(GPT& model, const std::vector<std::int64_t>& prompt, const SampleOptions& o) {
  MINIDL_CHECK(!prompt.empty(), minidl::ValueError, "generate: the prompt is empty (give at least one token)");
  MINIDL_CHECK(o.temperature > 0, minidl::ValueError, "generate: temperature must be positive, found ", o.temperature);
  MINIDL_CHECK(o.top_k >= 0, minidl::ValueError, "generate: top_k must be >= 0, found ", o.top_k);
  const GPTConfig& c = model->config();
  const minidl::Device device = model->parameters().front().device();
  const bool was_training = model->is_training();
  model->eval();
  minidl::NoGradGuard no_grad;
  std::vector<std::int64_t> tokens = prompt;
  for (std::int64_t n = 0; n < o.max_new_tokens; ++n) {
    const auto start =
        tokens.size() > static_cast<std::size_t>(c.block_size) ? tokens.end() - c.block_size : tokens.begin();
    const std::vector<std::int64_t> context(start, tokens.end());
    const Tensor idx = minidl::from_vector(context, {1, static_cast<std::int64_t>(context.size())}).to(device);
    Tensor logits = model(idx).select(1, -1).div(o.temperature);  // (1, V)
    if (o.top_k > 0 && o.top_k < c.vocab_size) {
      const Tensor kth = std::get<0>(logits.topk(o.top_k, -1)).narrow(1, o.top_k - 1, 1);
      logits = minidl::masked_fill(logits, logits.lt(kth), -std::numeric_limits<double>::infinity());
    }
    const Tensor next = minidl::multinomial(minidl::softmax(logits, -1), 1);
    tokens.push_back(next.cpu().item<std::int64_t>());
  }
  model->train(was_training);
  return tokens;
}

}  // namespace gpt
