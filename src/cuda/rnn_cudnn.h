#pragma once
// nn::RNN / LSTM / GRU on the GPU through cuDNN's RNN API (src/cuda/rnn_cudnn.cpp): the whole multi-layer,
// possibly bidirectional network in one cudnnRNNForward, and its backward in cudnnRNNBackwardData_v8 and
// cudnnRNNBackwardWeights_v8. GPU only; the recurrence op of layers/rnn.h (own kernels, both devices) is the
// reference and the fallback. The layer op around these calls is layers/rnn_cudnn.h. This header includes no CUDA
// header. Every call queues on gpu::stream() of the current device, takes its workspace from the caching allocator
// and never waits for the GPU, so a training step through it can be captured in a CUDA graph.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/rnn_cell.h"

namespace minidl {
namespace gpu {

/// The network as cuDNN's RNN descriptor sees it. Data, weights and arithmetic in `double_precision` ? float64 :
/// float32; biases as PyTorch's (CUDNN_RNN_DOUBLE_BIAS: b_ih and b_hh); `dropout` between layers (0 outside
/// training); `allow_tf32`: float32 GEMMs may run on TF32 tensor cores (CUDNN_DEFAULT_MATH, else CUDNN_FMA_MATH).
struct CudnnRnnDesc {
  kernels::RnnMode mode = kernels::RnnMode::LSTM;
  bool double_precision = false;
  std::int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bidirectional = false, bias = true;
  double dropout = 0.0;
  bool allow_tf32 = false;
};

/// Where cuDNN keeps each parameter in its flat weight space, in elements: per pseudo-layer (layer * directions +
/// direction, PyTorch's order of the parameters) the offsets of weight_ih, weight_hh, bias_ih, bias_hh (-1 without
/// bias), each one contiguous block in PyTorch's shape and gate order; `numel` the whole space.
struct CudnnRnnWeightLayout {
  std::int64_t numel = 0;
  std::vector<std::int64_t> offsets;  // 4 per pseudo-layer
};

/// The layout for `d` (dropout, TF32 do not change it), or nothing when cuDNN does not lay each of PyTorch's
/// parameters out as one block (the caller then runs its own kernels).
std::optional<CudnnRnnWeightLayout> cudnn_rnn_weight_layout(const CudnnRnnDesc& d);

/// A batch of T steps of B sequences, all of length T, sequence-major and packed: x (T, B, input_size),
/// y (T, B, directions * hidden_size), contiguous. `seq_lengths` is a device array of B int32 values T, which cuDNN
/// reads asynchronously (cached by the caller: never rewritten per call).
struct CudnnRnnBatch {
  std::int64_t T = 0, B = 0;
  const int* seq_lengths = nullptr;
};

/// Bytes of the reserve space a training forward keeps for the backward (0 for inference).
std::size_t cudnn_rnn_reserve_bytes(const CudnnRnnDesc& d, const CudnnRnnBatch& b, bool training);

/// Forward. hx, cx (layers * directions, B, hidden) or null for zeros (cx LSTM only); w the flat weight space of
/// cudnn_rnn_weight_layout (w_bytes); writes y, hy, cy (cy LSTM only). `training`: cuDNN's training mode, which
/// fills `reserve` (reserve_bytes from cudnn_rnn_reserve_bytes) for the backward; else inference (no reserve).
void cudnn_rnn_forward(const CudnnRnnDesc& d, const CudnnRnnBatch& b, bool training, const void* x, const void* hx,
                       const void* cx, const void* w, std::size_t w_bytes, void* y, void* hy, void* cy, void* reserve,
                       std::size_t reserve_bytes);

/// Gradients of x, hx, cx from those of y, hy, cy (dhy, dcy null: zeros; dhx, dcx null: not wanted), after the
/// training forward that filled `reserve` (which this updates for cudnn_rnn_backward_weights).
void cudnn_rnn_backward_data(const CudnnRnnDesc& d, const CudnnRnnBatch& b, const void* y, const void* dy, void* dx,
                             const void* hx, const void* dhy, void* dhx, const void* cx, const void* dcy, void* dcx,
                             const void* w, std::size_t w_bytes, void* reserve, std::size_t reserve_bytes);

/// Adds the weights' gradient to dw (the flat layout, w_bytes), after cudnn_rnn_backward_data.
void cudnn_rnn_backward_weights(const CudnnRnnDesc& d, const CudnnRnnBatch& b, const void* x, const void* hx,
                                const void* y, void* dw, std::size_t w_bytes, void* reserve, std::size_t reserve_bytes);

}  // namespace gpu
}  // namespace minidl
