#pragma once
// Scaled dot-product attention (torch::nn::functional::scaled_dot_product_attention, PyTorch's semantics) and the
// switch between its fused CUDA kernel and the composed reference path.
#include <optional>

#include "minidl/tensor.h"

namespace minidl {
namespace nn {
namespace functional {

/// softmax(query · keyᵀ · scale + mask) · value over the last two dims: query (..., L, E), key (..., S, E),
/// value (..., S, Ev) -> (..., L, Ev); the leading dims broadcast as in matmul.
///  - attn_mask: bool (true = take part in attention) or of query's dtype (added to the scores); broadcastable
///    to (..., L, S).
///  - is_causal: query i attends to keys j <= i (the top-left aligned lower triangle of the L x S scores, as
///    PyTorch); an error together with attn_mask.
///  - dropout_p: dropout on the attention weights (always applied when > 0, as PyTorch's function).
///  - scale: defaults to 1 / sqrt(E).
/// A query whose every key is masked out gets zero weights and a zero output (PyTorch >= 2.5's math path and
/// its fused kernels), not NaN.
/// On a GPU, float32 inputs without attn_mask and dropout, E and Ev <= 128, run minidl's flash-attention kernels
/// (forward and backward without the L x S matrix); everything else runs the composed path (matmul, where,
/// softmax, dropout), which is also the CPU's.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace functional
}  // namespace nn

namespace cuda {
/// Whether scaled_dot_product_attention may use the fused flash-attention kernels on the GPU (on by default;
/// torch.backends.cuda.enable_flash_sdp). Off, every call runs the composed reference path. Process-wide.
void set_flash_attention_enabled(bool enabled);
bool flash_attention_enabled();
}  // namespace cuda
}  // namespace minidl
