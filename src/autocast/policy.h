#pragma once
// The autocast op policy (minidl/autocast.h), in one place: which dtype each op runs in under autocast, per device
// type, as PyTorch's registrations for AutocastCUDA and AutocastCPU (aten/src/ATen/autocast_mode.{h,cpp}). An op
// applies it with one line at its entry point,
//
//   Tensor mm(const Tensor& a, const Tensor& b) {
//     MINIDL_AUTOCAST(mm, a, b);
//     ...
//
// which, when autocast is on for the device type of a tensor argument and the op is on that device type's list,
// calls the op again with its tensor arguments cast (autocast::cached_cast) and autocast suspended, as PyTorch's
// wrappers redispatch below the autocast key: ops that one op calls inside are not cast again.
#include <optional>
#include <vector>

#include "minidl/autocast.h"
#include "minidl/errors.h"

namespace minidl {
namespace autocast {
namespace policy {

/// What autocast does to an op on one device type.
enum class Cast : std::uint8_t {
  Off,      // not on this device type's list: runs as called (ops it is composed of may be cast)
  Keep,     // runs as called, autocast off inside: one kernel in PyTorch, whose parts minidl composes from listed ops
  Lower,    // tensors to the autocast dtype (bfloat16 or float16)
  Float32,  // tensors to float32; an explicit dtype argument, where the op has one, is respected instead
  Promote,  // tensors to the widest floating dtype among them
  Banned,   // refused under autocast (PyTorch's binary_cross_entropy on CUDA)
};

// op, under CUDA autocast, under CPU autocast. PyTorch's CPU list is shorter than its CUDA list: on the CPU only
// the matmuls, linear, convolutions and attention are lowered, the losses and prod go to float32, and cat/stack
// promote; softmax, the norms, sums and exp/log keep their input's dtype there. rnn_cell is PyTorch's
// lstm_cell/gru_cell/rnn_*_cell; rnn_recurrence the layers of nn::RNN/LSTM/GRU, lowered as PyTorch lowers its
// cuDNN RNN on CUDA and its oneDNN LSTM layer on the CPU (whose input projections, linear, are lowered already).
#define MINIDL_AUTOCAST_OPS(_)                          \
  _(matmul, Lower, Lower)                               \
  _(mm, Lower, Lower)                                   \
  _(bmm, Lower, Lower)                                  \
  _(addmm, Lower, Lower)                                \
  _(baddbmm, Lower, Lower)                              \
  _(mv, Lower, Keep)                                    \
  _(addmv, Lower, Keep)                                 \
  _(dot, Promote, Keep)                                 \
  _(einsum, Lower, Lower)                               \
  _(linear, Lower, Lower)                               \
  _(linear_relu, Lower, Lower)                          \
  _(conv1d, Lower, Lower)                               \
  _(conv2d, Lower, Lower)                               \
  _(conv2d_relu, Lower, Lower)                          \
  _(conv_transpose1d, Lower, Lower)                     \
  _(conv_transpose2d, Lower, Lower)                     \
  _(scaled_dot_product_attention, Lower, Lower)         \
  _(rnn_cell, Lower, Keep)                              \
  _(rnn_recurrence, Lower, Lower)                       \
  _(acos, Float32, Off)                                 \
  _(asin, Float32, Off)                                 \
  _(cosh, Float32, Off)                                 \
  _(sinh, Float32, Off)                                 \
  _(tan, Float32, Off)                                  \
  _(exp, Float32, Off)                                  \
  _(expm1, Float32, Off)                                \
  _(log, Float32, Off)                                  \
  _(log2, Float32, Off)                                 \
  _(log10, Float32, Off)                                \
  _(log1p, Float32, Off)                                \
  _(reciprocal, Float32, Off)                           \
  _(rsqrt, Float32, Off)                                \
  _(pow, Float32, Off)                                  \
  _(softplus, Float32, Off)                             \
  _(softmax, Float32, Off)                              \
  _(log_softmax, Float32, Off)                          \
  _(layer_norm, Float32, Off)                           \
  _(rms_norm, Float32, Off)                             \
  _(group_norm, Float32, Off)                           \
  _(interpolate, Float32, Off)                          \
  _(sum, Float32, Off)                                  \
  _(prod, Float32, Float32)                             \
  _(cumsum, Float32, Off)                               \
  _(cumprod, Float32, Off)                              \
  _(logsumexp, Float32, Off)                            \
  _(norm, Float32, Off)                                 \
  _(cross_entropy, Float32, Float32)                    \
  _(nll_loss, Float32, Float32)                         \
  _(mse_loss, Float32, Float32)                         \
  _(l1_loss, Float32, Float32)                          \
  _(smooth_l1_loss, Float32, Float32)                   \
  _(huber_loss, Float32, Float32)                       \
  _(kl_div, Float32, Float32)                           \
  _(binary_cross_entropy_with_logits, Float32, Float32) \
  _(binary_cross_entropy, Banned, Float32)              \
  _(atan2, Promote, Off)                                \
  _(index_put, Promote, Off)                            \
  _(scatter_add, Promote, Off)                          \
  _(cat, Off, Promote)                                  \
  _(stack, Off, Promote)

enum class Op : int {
#define MINIDL_AUTOCAST_ENUM(op, cuda, cpu) op,
  MINIDL_AUTOCAST_OPS(MINIDL_AUTOCAST_ENUM)
#undef MINIDL_AUTOCAST_ENUM
};

/// The op's policy on `device_type` and its name.
Cast cast_of(Op op, DeviceType device_type);
const char* name_of(Op op);

/// The device types autocast is on for, as a bit per DeviceType (0 when none or suspended): the fast exit.
unsigned active_devices();

/// Suspends autocast in its scope, as PyTorch's ExcludeDispatchKeyGuard over the autocast keys.
class Suspend {
 public:
  Suspend();
  ~Suspend();
  Suspend(const Suspend&) = delete;
  Suspend& operator=(const Suspend&) = delete;
};

// Whether an argument is a tensor on `d` (tensors, lists of tensors, optional tensors; anything else is not).
inline bool on(DeviceType d, const Tensor& t) { return t.defined() && t.device().type() == d; }
inline bool on(DeviceType d, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (on(d, t)) return true;
  }
  return false;
}
inline bool on(DeviceType d, const std::optional<Tensor>& t) { return t && on(d, *t); }
template <class T>
bool on(DeviceType, const T&) {
  return false;
}

// An argument cast to `to` where eligible; other arguments pass through.
inline Tensor cast(DType to, DeviceType d, const Tensor& t) { return cached_cast(to, t, d); }
inline std::vector<Tensor> cast(DType to, DeviceType d, const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(cached_cast(to, t, d));
  return out;
}
inline std::optional<Tensor> cast(DType to, DeviceType d, const std::optional<Tensor>& t) {
  return t ? std::optional<Tensor>(cached_cast(to, *t, d)) : std::nullopt;
}
template <class T>
const T& cast(DType, DeviceType, const T& x) {
  return x;
}

// The widest floating dtype of the eligible tensors, starting from `current` (PyTorch's promote_type): float32 wins
// over the autocast dtype, float64 is ignored, the other lower-precision dtype is an error.
DType prioritize(Op op, DType current, DeviceType d, const Tensor& t);
inline DType prioritize(Op op, DType current, DeviceType d, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) current = prioritize(op, current, d, t);
  return current;
}
template <class T>
DType prioritize(Op, DType current, DeviceType, const T&) {
  return current;
}

// Whether the caller gave an explicit result dtype (sum/prod/cumsum's optional dtype): Float32 then respects it.
inline bool explicit_dtype(const std::optional<DType>& dtype) { return dtype.has_value(); }
template <class T>
bool explicit_dtype(const T&) {
  return false;
}

/// The device type whose autocast applies to `op` called with `args`, if any.
template <class... Args>
std::optional<DeviceType> applies(Op op, const Args&... args) {
  const unsigned active = active_devices();
  if (active == 0) return std::nullopt;
  for (const DeviceType d : {kCUDA, kCPU}) {
    if ((active >> static_cast<unsigned>(d) & 1U) && cast_of(op, d) != Cast::Off && (on(d, args) || ...)) return d;
  }
  return std::nullopt;
}

[[noreturn]] void throw_banned(Op op, DeviceType d);

/// Calls `f` with `args` cast as `op`'s policy on `d` says, autocast suspended.
template <class F, class... Args>
auto run(Op op, DeviceType d, F&& f, const Args&... args) {
  const Suspend suspend;
  switch (cast_of(op, d)) {
    case Cast::Lower: return f(cast(get_autocast_dtype(d), d, args)...);
    case Cast::Float32:
      if ((explicit_dtype(args) || ...)) return f(args...);
      return f(cast(kFloat32, d, args)...);
    case Cast::Promote: {
      DType to = get_autocast_dtype(d);
      ((to = prioritize(op, to, d, args)), ...);
      return f(cast(to, d, args)...);
    }
    case Cast::Banned: throw_banned(op, d);
    default: return f(args...);
  }
}

}  // namespace policy
}  // namespace autocast
}  // namespace minidl

/// Applies the autocast policy of `op` (a row of MINIDL_AUTOCAST_OPS) at the entry of the function `op` itself,
/// whose parameters are passed after it, in order.
#define MINIDL_AUTOCAST(op, ...)                                                                                 \
  if (const auto minidl_autocast_device =                                                                        \
          ::minidl::autocast::policy::applies(::minidl::autocast::policy::Op::op, __VA_ARGS__))                  \
  return ::minidl::autocast::policy::run(                                                                        \
      ::minidl::autocast::policy::Op::op, *minidl_autocast_device,                                               \
      [&](const auto&... minidl_autocast_args) { return op(minidl_autocast_args...); }, __VA_ARGS__)
