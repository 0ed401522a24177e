#pragma once
// Range checks of optimizer and scheduler options, with PyTorch's limits; messages name the class, the option,
// the expected range and the value found.
#include <cmath>

#include "minidl/errors.h"

namespace minidl {
namespace optim {

inline void check_option(bool ok, const char* owner, const char* option, double value, const char* expected) {
  MINIDL_CHECK(ok, ValueError, owner, ": invalid ", option, " ", value, " (expected ", expected, ")");
}

/// A finite value >= 0 (learning rates, weight decay, eps, momentum).
inline void check_non_negative(const char* owner, const char* option, double value) {
  check_option(std::isfinite(value) && value >= 0.0, owner, option, value, "a finite value >= 0");
}

/// A value in [0, 1) (Adam's betas).
inline void check_unit_interval_open(const char* owner, const char* option, double value) {
  check_option(value >= 0.0 && value < 1.0, owner, option, value, "a value in [0, 1)");
}

/// A value in [0, 1] (Adadelta's rho).
inline void check_unit_interval(const char* owner, const char* option, double value) {
  check_option(value >= 0.0 && value <= 1.0, owner, option, value, "a value in [0, 1]");
}

}  // namespace optim
}  // namespace minidl
