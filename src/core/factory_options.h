#pragma once
// How the factories read their TensorOptions (src/core/factories.cpp, src/ops/random.cpp): values are written with
// requires_grad off and the flag set at the end, since a tensor that requires grad refuses in-place writes.
#include "minidl/tensor.h"

namespace minidl {
namespace detail {

/// o without requires_grad (set once the values are written, by finish).
inline TensorOptions plain(TensorOptions o) { return o.requires_grad(false); }

inline Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

/// t's dtype and device wherever `o` does not give them (the *_like and new_* factories).
inline TensorOptions like(const Tensor& t, TensorOptions o) {
  if (!o.has_dtype()) o.dtype(t.dtype());
  if (!o.has_device()) o.device(t.device());
  return o;
}

/// `fallback` as the dtype unless `o` gives one (full and arange infer it from the values, randint and randperm
/// default to int64).
inline TensorOptions with_default_dtype(TensorOptions o, DType fallback) {
  if (!o.has_dtype()) o.dtype(fallback);
  return o;
}

}  // namespace detail
}  // namespace minidl
