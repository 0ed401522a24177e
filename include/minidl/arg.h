#pragma once
// MINIDL_ARG: an options-struct field with LibTorch's chained setter and getter (TORCH_ARG of torch/arg.h):
// `MINIDL_ARG(double, eps) = 1e-5;` gives `opts.eps(1e-3).momentum(0.2)` and `opts.eps()`.
#define MINIDL_ARG(T, name)                      \
 public:                                         \
  auto& name(const T& v) { name##_ = v; return *this; } \
  const T& name() const { return name##_; }      \
                                                 \
 private:                                        \
  T name##_
