#pragma once
// The cuDNN path of nn::RNN / LSTM / GRU (CUDA builds): the whole network (every layer and direction) as one
// differentiable op over cuDNN's flat weight space, whose views the module's parameters are
// (src/layers/rnn_modules.cpp, flatten_parameters). The own kernels of layers/rnn.h stay the CPU path, the
// reference and the fallback.
#include <cstdint>
#include <vector>

#include "cuda/rnn_cudnn.h"
#include "minidl/tensor.h"

namespace minidl {
namespace layers {

/// cuDNN's weight layout for `d` on `device` (computed once per description and device), or null when cuDNN does
/// not keep PyTorch's parameters as blocks (the module then runs its own kernels).
const gpu::CudnnRnnWeightLayout* cudnn_rnn_layout(const gpu::CudnnRnnDesc& d, Device device);

/// Runs the network described by `d` (its dropout applied only when `training`) over x (T, B, input_size),
/// contiguous, with the initial states h0, c0 (layers * directions, B, hidden_size), contiguous or undefined for
/// zeros. `weights` is the flat weight space (1-d, layout numel elements), `params` the module's parameters that
/// view it, each starting at `offsets[i]` elements: the node's gradient edges, each receiving its block of the one
/// flat weight gradient. Returns one 1-d tensor: y (T, B, directions * hidden_size), then h_n and, LSTM, c_n
/// (each layers * directions, B, hidden_size), all contiguous. `name` names the module in errors.
Tensor rnn_cudnn(const gpu::CudnnRnnDesc& d, const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& weights,
                 const std::vector<Tensor>& params, const std::vector<std::int64_t>& offsets, bool training,
                 const char* name);

}  // namespace layers
}  // namespace minidl
