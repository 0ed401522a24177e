#pragma once
// A GPT's batches: `batch_size` windows of block_size + 1 tokens at random offsets of a split of the token streams
// (examples/common/text_tokens.h): the inputs and, shifted by one, the targets.
//
// The offsets of a batch come from their own generator seeded by (seed, split, iteration, batch within the
// evaluation), not from a running stream: every device builds the same batches, and a run resumed at any
// iteration continues with exactly the batches it would have seen.
#include <minidl/minidl.h>

#include <cstdint>

#include "text_tokens.h"

namespace gpt {

using examples::Split;
using examples::TokenData;

struct TokenBatch {
  minidl::Tensor x, y;  ///< int64 (batch_size, block_size) on the CPU
};

/// Batch `k` of iteration `iter` from `split` (a training step takes k = 0, an evaluation k = 1..eval_iters).
TokenBatch random_batch(const TokenData& data, Split split, std::int64_t iter, std::int64_t k, std::int64_t batch_size,
                        std::int64_t block_size, std::uint64_t seed);

}  // namespace gpt
