#pragma once
// The recurrence of one layer and direction of nn::RNN / LSTM / GRU (and of their cells, as one step): the
// differentiable op behind the modules of src/layers/rnn_modules.cpp.
#include "kernels/rnn_cell.h"
#include "minidl/tensor.h"

namespace minidl {
namespace layers {

/// Runs the recurrence over gx = x W_ih^T + b_ih (T, B, G), contiguous, with w_hh (G, H), b_hh (G) or undefined,
/// the initial states h0 and (LSTM) c0 (B, H) or undefined for zeros, from t = 0 up or, `reverse`, from T - 1
/// down. Returns the states as one tensor z (P, T + 1, B, H), P = 2 for LSTM (h, c), else 1: z[p][0] holds the
/// initial state and z[p][t + 1] the state after input t (reverse: z[p][T] the initial state, z[p][t] after
/// input t), so the layer's output is a narrow of z[0] and the final states selects of it. One node records the
/// whole sequence; its backward runs the steps in reverse order (one pointwise kernel and one matmul each) and
/// then W_hh's gradient as one matmul over all steps. `name` names the module in errors.
Tensor rnn_recurrence(kernels::RnnMode mode, const Tensor& gx, const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0,
                      const Tensor& c0, bool reverse, const char* name);

}  // namespace layers
}  // namespace minidl
