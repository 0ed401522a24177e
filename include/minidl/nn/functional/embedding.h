#pragma once
// LibTorch's F::embedding and F::one_hot (torch/nn/functional/embedding.h).
#include <cstdint>
#include <optional>

#include "minidl/tensor.h"

#include "minidl/arg.h"

namespace minidl {
namespace nn {
namespace functional {

/// padding_idx: the row whose gradient stays zero (negative counts from the end). max_norm is not supported.
struct EmbeddingFuncOptions {
  MINIDL_ARG(std::optional<std::int64_t>, padding_idx) = std::nullopt;
};

/// Rows of weight (num_embeddings, embedding_dim) picked by input (int64 or int32, any shape): the result has
/// shape input.sizes() + [embedding_dim]. The gradient adds each output row into its weight row, none into
/// padding_idx's. An index outside [0, num_embeddings) is an IndexError naming it and its position.
Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options = {});

/// int64 (…, num_classes) with a 1 at each element's class; num_classes = -1 takes max(tensor) + 1. tensor is
/// int64 and, on the CPU, every class is checked to be in [0, num_classes) (on the GPU, as PyTorch, it is not:
/// an out-of-range class gives a row of zeros).
Tensor one_hot(const Tensor& tensor, std::int64_t num_classes = -1);

}  // namespace functional
}  // namespace nn
}  // namespace minidl

