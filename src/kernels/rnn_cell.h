#pragma once
// The pointwise part of one time step of a recurrent layer (nn::RNN / LSTM / GRU and their cells), forward and
// backward, as functors compiled for host and device: both backends (src/cpu/rnn.cpp, src/cuda/rnn.cu) call
// operator()(e) for every element e of the (batch, hidden) state, so the formulas exist once. The matrix
// products around them (the input projection of the whole sequence, h_{t-1} W_hh^T per step) are the matmul
// kernels; what is left per step is this one pass instead of about ten elementwise ops.
//
// Gate blocks are PyTorch's, each `hidden` wide in a row of G = gates * hidden values: LSTM i, f, g, o; GRU r, z, n
// with n = tanh(x_n + b_in + r * (W_hn h + b_hn)); RNN one block. gx holds x W_ih^T + b_ih of the step, gh holds
// h_{t-1} W_hh^T (without b_hh, which the functors add: GRU needs it inside r * (...)).
#include <cstdint>

#include "kernels/elementwise.h"

namespace minidl {
namespace kernels {

enum class RnnMode { Tanh, Relu, LSTM, GRU };

/// Gate blocks per row: G = rnn_gates(mode) * hidden.
MINIDL_HD int rnn_gates(RnnMode mode) { return mode == RnnMode::LSTM ? 4 : mode == RnnMode::GRU ? 3 : 1; }
/// Values per (batch, hidden) element the forward keeps for the backward (activated gates; GRU: and W_hn h + b_hn).
MINIDL_HD int rnn_reserve_gates(RnnMode mode) { return mode == RnnMode::LSTM || mode == RnnMode::GRU ? 4 : 0; }

template <class T> MINIDL_HD T rnn_sigmoid(T x) { return T(1) / (T(1) + m_exp(-x)); }

/// One step forward. Rows of gx and gh are `G` apart, of h_prev, c_prev, h, c `hidden`, of reserve
/// rnn_reserve_gates * hidden (null: not kept, inference). bias (b_hh, G values) may be null; c_prev, c only LSTM.
template <class T> struct RnnCellForward {
  RnnMode mode;
  std::int64_t batch, hidden;
  const T* gx;
  const T* gh;
  const T* bias;
  const T* h_prev;
  const T* c_prev;
  T* h;
  T* c;
  T* reserve;

  MINIDL_HD std::int64_t numel() const { return batch * hidden; }
  MINIDL_HD void operator()(std::int64_t e) const {
    const std::int64_t H = hidden, b = e / H, j = e % H, G = rnn_gates(mode) * H;
    const T* x = gx + b * G + j;
    const T* r = gh + b * G + j;
    const auto pre = [&](int k) { return x[k * H] + r[k * H] + (bias != nullptr ? bias[k * H + j] : T(0)); };
    T* keep = reserve != nullptr ? reserve + b * 4 * H + j : nullptr;
    if (mode == RnnMode::LSTM) {
      const T i = rnn_sigmoid(pre(0)), f = rnn_sigmoid(pre(1)), g = m_tanh(pre(2)), o = rnn_sigmoid(pre(3));
      const T cn = f * c_prev[e] + i * g;
      c[e] = cn;
      h[e] = o * m_tanh(cn);
      if (keep != nullptr) {
        keep[0] = i;
        keep[H] = f;
        keep[2 * H] = g;
        keep[3 * H] = o;
      }
    } else if (mode == RnnMode::GRU) {
      const T rg = rnn_sigmoid(pre(0)), z = rnn_sigmoid(pre(1));
      const T hn = r[2 * H] + (bias != nullptr ? bias[2 * H + j] : T(0));
      const T n = m_tanh(x[2 * H] + rg * hn);
      h[e] = (T(1) - z) * n + z * h_prev[e];
      if (keep != nullptr) {
        keep[0] = rg;
        keep[H] = z;
        keep[2 * H] = n;
        keep[3 * H] = hn;
      }
    } else {
      const T a = pre(0);
      h[e] = mode == RnnMode::Tanh ? m_tanh(a) : (a > T(0) ? a : T(0));
    }
  }
};

/// One step backward, from the forward's reserve, h_prev (GRU), c_prev and c (LSTM) and h (RNN). The gradient
/// reaching the step's h is dh_out + dh_rec + dh_direct (the latter two null at the last step), its c's
/// dc_out + dc_rec (LSTM). Writes the gradients of the gate pre-activations: dgx (of gx, also of b_ih) and dgh (of
/// gh and b_hh; GRU only, others use dgx for both), and the parts of h_prev's gradient that do not go through W_hh:
/// dh_direct_out = dh * z (GRU) and dc_prev (LSTM). An output may be the input of the same name (element e is read
/// before it is written).
template <class T> struct RnnCellBackward {
  RnnMode mode;
  std::int64_t batch, hidden;
  const T* reserve;
  const T* h_prev;
  const T* c_prev;
  const T* c;
  const T* h;
  const T* dh_out;
  const T* dh_rec;
  const T* dh_direct;
  const T* dc_out;
  const T* dc_rec;
  T* dgx;
  T* dgh;
  T* dh_direct_out;
  T* dc_prev;

  MINIDL_HD std::int64_t numel() const { return batch * hidden; }
  MINIDL_HD void operator()(std::int64_t e) const {
    const std::int64_t H = hidden, b = e / H, j = e % H, G = rnn_gates(mode) * H;
    T dh = dh_out[e];
    if (dh_rec != nullptr) dh += dh_rec[e];
    if (dh_direct != nullptr) dh += dh_direct[e];
    T* dx = dgx + b * G + j;
    if (mode == RnnMode::LSTM) {
      const T* keep = reserve + b * 4 * H + j;
      const T i = keep[0], f = keep[H], g = keep[2 * H], o = keep[3 * H];
      const T tc = m_tanh(c[e]);
      T dc = dc_out[e] + dh * o * (T(1) - tc * tc);
      if (dc_rec != nullptr) dc += dc_rec[e];
      const T cp = c_prev[e];
      dc_prev[e] = dc * f;
      dx[0] = dc * g * i * (T(1) - i);
      dx[H] = dc * cp * f * (T(1) - f);
      dx[2 * H] = dc * i * (T(1) - g * g);
      dx[3 * H] = dh * tc * o * (T(1) - o);
    } else if (mode == RnnMode::GRU) {
      const T* keep = reserve + b * 4 * H + j;
      const T r = keep[0], z = keep[H], n = keep[2 * H], hn = keep[3 * H];
      const T dn = dh * (T(1) - z) * (T(1) - n * n);
      const T dr = dn * hn * r * (T(1) - r);
      const T dz = dh * (h_prev[e] - n) * z * (T(1) - z);
      dh_direct_out[e] = dh * z;
      T* dhh = dgh + b * G + j;
      dx[0] = dr;
      dx[H] = dz;
      dx[2 * H] = dn;
      dhh[0] = dr;
      dhh[H] = dz;
      dhh[2 * H] = dn * r;
    } else {
      const T y = h[e];
      dx[0] = mode == RnnMode::Tanh ? dh * (T(1) - y * y) : (y > T(0) ? dh : T(0));
    }
  }
};

}  // namespace kernels
}  // namespace minidl
