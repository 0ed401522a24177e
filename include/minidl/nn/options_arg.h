// MINIDL_ARG(T, name): an options struct's field with LibTorch's chained setter and getter. Included (no
// #pragma once) by the option headers of nn/functional/ and nn/modules/, each of which #undefs it at its end,
// as modules.h does with its own copy.
#ifndef MINIDL_ARG
#define MINIDL_ARG(T, name)                 \
 public:                                    \
  auto& name(const T& v) {                  \
    name##_ = v;                            \
    return *this;                           \
  }                                         \
  const T& name() const { return name##_; } \
                                            \
 private:                                   \
  T name##_
#endif
