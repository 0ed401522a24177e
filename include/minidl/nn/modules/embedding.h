#pragma once
// nn::Embedding (LibTorch's torch/nn/modules/embedding.h): a table of num_embeddings vectors of embedding_dim.
#include <cstdint>
#include <optional>

#include "minidl/nn/functional/embedding.h"
#include "minidl/nn/modules.h"

#include "minidl/arg.h"

namespace minidl {
namespace nn {

struct EmbeddingOptions {
  EmbeddingOptions(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  MINIDL_ARG(std::int64_t, num_embeddings);
  MINIDL_ARG(std::int64_t, embedding_dim);
  MINIDL_ARG(std::optional<std::int64_t>, padding_idx) = std::nullopt;
  /// The table to use instead of a fresh N(0, 1) one (what from_pretrained passes).
  MINIDL_ARG(Tensor, _weight);
};

struct EmbeddingFromPretrainedOptions {
  MINIDL_ARG(bool, freeze) = true;
  MINIDL_ARG(std::optional<std::int64_t>, padding_idx) = std::nullopt;
};

class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(EmbeddingOptions options);
  /// input: int64 or int32 indices of any shape; the result has shape input.sizes() + [embedding_dim].
  Tensor forward(const Tensor& input) override;
  /// PyTorch's: weight ~ N(0, 1), the padding_idx row zeroed.
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  EmbeddingOptions options;
  Tensor weight;
};

class Embedding : public ModuleHolder<EmbeddingImpl> {
 public:
  using ModuleHolder<EmbeddingImpl>::ModuleHolder;
  /// An Embedding whose weight is `embeddings` (2-d; shared, not copied), trainable unless freeze (the default).
  static Embedding from_pretrained(const Tensor& embeddings, const EmbeddingFromPretrainedOptions& options = {});
};

}  // namespace nn
}  // namespace minidl

