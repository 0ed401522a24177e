// The recurrence op of the recurrent layers (layers/rnn.h). Forward per step: h_{t-1} W_hh^T by the matmul kernel
// into one reused buffer, then the fused gate kernel (kernels/rnn_cell.h) writing the new states into z. Nothing
// per step allocates or reads back: on the GPU the steps queue on the stream.
#include "autocast/policy.h"
#include "layers/rnn.h"

#include "layers/layer_utils.h"
#include "layers/lowp.h"
#include "minidl/autograd.h"
#include "minidl/reduction.h"

namespace minidl {
namespace layers {
namespace {

using i64 = std::int64_t;
using kernels::RnnMode;

/// Where each step's states lie in z (P, T + 1, B, H).
struct Slots {
  i64 T, B, H;
  bool reverse;
  i64 initial() const { return reverse ? T : 0; }
  i64 out(i64 t) const { return reverse ? t : t + 1; }
  i64 prev(i64 t) const { return reverse ? t + 1 : t; }
  /// The time index of the s-th step run.
  i64 time(i64 s) const { return reverse ? T - 1 - s : s; }
  template <class T>
  T* state(const Tensor& z, i64 p, i64 slot) const {
    return z.data_ptr<T>() + (p * (this->T + 1) + slot) * B * H;
  }
};

/// Writes the initial state `s` (any strides; undefined: zeros) into z[p][slot].
void set_initial(Tensor& z, i64 p, i64 slot, const Tensor& s) {
  Tensor dst = z.select(0, p).select(0, slot);
  if (s.defined()) {
    MINIDL_ON_BACKEND(z.device(), copy(s, dst));
  } else {
    MINIDL_ON_BACKEND(z.device(), fill(dst, 0.0));
  }
}

}  // namespace

Tensor rnn_recurrence(RnnMode mode, const Tensor& gx, const Tensor& w_hh_in, const Tensor& b_hh_in, const Tensor& h0,
                      const Tensor& c0, bool reverse, const char* name) {
  MINIDL_AUTOCAST(rnn_recurrence, mode, gx, w_hh_in, b_hh_in, h0, c0, reverse, name);
  if (layers::needs_float_path(gx, false)) {  // the recurrence kernels are float32/float64: see layers/lowp.h
    using layers::widen;
    return rnn_recurrence(mode, widen(gx), widen(w_hh_in), widen(b_hh_in), widen(h0), widen(c0), reverse, name)
        .to(gx.dtype());
  }
  const Tensor w_hh = ops::dense(w_hh_in), b_hh = ops::dense(b_hh_in);
  const bool lstm = mode == RnnMode::LSTM, gru = mode == RnnMode::GRU;
  const i64 T = gx.size(0), B = gx.size(1), G = w_hh.size(0), H = w_hh.size(1);
  MINIDL_CHECK(gx.is_contiguous() && gx.dim() == 3 && gx.size(2) == G && G == kernels::rnn_gates(mode) * H, ValueError,
               name, ": internal error, input projection of shape ", shape_str(gx.sizes()), " for weight_hh of shape ",
               shape_str(w_hh.sizes()));
  const Slots sl{T, B, H, reverse};
  const i64 P = lstm ? 2 : 1, R = kernels::rnn_reserve_gates(mode) * H;
  const bool records = autograd::grad_mode_enabled() &&
                       (gx.requires_grad() || w_hh.requires_grad() || (b_hh.defined() && b_hh.requires_grad()) ||
                        (h0.defined() && h0.requires_grad()) || (c0.defined() && c0.requires_grad()));
  Tensor z = ops::empty_as({P, T + 1, B, H}, gx);
  const Tensor reserve = records && R > 0 ? ops::empty_as({T, B, R}, gx) : Tensor();
  {
    NoGradGuard no_grad;
    set_initial(z, 0, sl.initial(), h0);
    if (lstm) set_initial(z, 1, sl.initial(), c0);
    if (B > 0) {
      Tensor gh = ops::empty_as({B, G}, gx);
      const Tensor hs = z.select(0, 0);
      kernels::dispatch_floating(gx.dtype(), name, [&](auto tag) {
        using T_ = typename decltype(tag)::type;
        for (i64 s = 0; s < T; ++s) {
          const i64 t = sl.time(s), prev = sl.prev(t), out = sl.out(t);
          MINIDL_ON_BACKEND(gx.device(), matmul(hs.select(0, prev), w_hh, gh, 1, B, G, H, false, true));
          const kernels::RnnCellForward<T_> f{mode,
                                              B,
                                              H,
                                              gx.data_ptr<T_>() + t * B * G,
                                              gh.data_ptr<T_>(),
                                              ptr<T_>(b_hh),
                                              sl.state<T_>(z, 0, prev),
                                              lstm ? sl.state<T_>(z, 1, prev) : nullptr,
                                              sl.state<T_>(z, 0, out),
                                              lstm ? sl.state<T_>(z, 1, out) : nullptr,
                                              reserve.defined() ? reserve.data_ptr<T_>() + t * B * R : nullptr};
          MINIDL_ON_BACKEND(gx.device(), rnn_cell_forward<T_>(f));
        }
      });
    }
  }
  if (!records) return z;
  const autograd::SavedTensor saved_z(z, name), saved_w(w_hh, name);
  const bool has_b = b_hh.defined(), has_h0 = h0.defined(), has_c0 = c0.defined();
  const std::string node = std::string(name) + "Backward";
  return autograd::record(z, node, {gx, w_hh, b_hh, h0, c0}, [=](const Tensor& g) {
    const Tensor zs = saved_z.get(), w = saved_w.get();
    Tensor dgx = ops::empty_as({T, B, G}, g);
    Tensor dgh = gru ? ops::empty_as({T, B, G}, g) : dgx;
    Tensor dh = ops::empty_as({B, H}, g);
    Tensor dw = ops::empty_as({G, H}, g);
    const Tensor dh_direct = gru ? ops::empty_as({B, H}, g) : Tensor();
    const Tensor dc = lstm ? ops::empty_as({B, H}, g) : Tensor();
    if (B == 0) {
      MINIDL_ON_BACKEND(g.device(), fill(dw, 0.0));
    } else {
      kernels::dispatch_floating(g.dtype(), name, [&](auto tag) {
        using T_ = typename decltype(tag)::type;
        for (i64 k = 0; k < T; ++k) {
          const i64 t = sl.time(T - 1 - k), prev = sl.prev(t), out = sl.out(t);
          const bool last = k == 0;  // the last step run forward: nothing reaches it from later steps
          const kernels::RnnCellBackward<T_> f{mode,
                                               B,
                                               H,
                                               reserve.defined() ? reserve.data_ptr<T_>() + t * B * R : nullptr,
                                               sl.state<T_>(zs, 0, prev),
                                               lstm ? sl.state<T_>(zs, 1, prev) : nullptr,
                                               lstm ? sl.state<T_>(zs, 1, out) : nullptr,
                                               sl.state<T_>(zs, 0, out),
                                               sl.state<T_>(g, 0, out),
                                               last ? nullptr : dh.data_ptr<T_>(),
                                               gru && !last ? dh_direct.data_ptr<T_>() : nullptr,
                                               lstm ? sl.state<T_>(g, 1, out) : nullptr,
                                               lstm && !last ? dc.data_ptr<T_>() : nullptr,
                                               dgx.data_ptr<T_>() + t * B * G,
                                               dgh.data_ptr<T_>() + t * B * G,
                                               ptr<T_>(dh_direct),
                                               ptr<T_>(dc)};
          MINIDL_ON_BACKEND(g.device(), rnn_cell_backward<T_>(f));
          MINIDL_ON_BACKEND(g.device(), matmul(dgh.select(0, t), w, dh, 1, B, H, G, false, false));
        }
      });
      // dW_hh = sum over steps of dgh_t^T h_{t-1}: the previous states of all steps are one block of z.
      const Tensor h_prev = zs.select(0, 0).narrow(0, reverse ? 1 : 0, T);
      MINIDL_ON_BACKEND(g.device(), matmul(dgh, h_prev, dw, 1, G, H, T * B, true, false));
    }
    const Tensor db = has_b ? sum(dgh.reshape({T * B, G}), {0}) : Tensor();
    const Tensor dh0 = gru && B > 0 ? dh + dh_direct : dh;
    return std::vector<Tensor>{dgx, dw, db, has_h0 ? dh0 : Tensor(), has_c0 ? dc : Tensor()};
  });
}

}  // namespace layers
}  // namespace minidl
