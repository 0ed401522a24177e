#pragma once
// Scalar: a number given to a tensor op (x + 1, x * 2.5, x == true), remembering whether it was written as a
// bool, an integer or a floating value, because type promotion depends on it as in LibTorch: an int64 tensor
// plus 1 stays int64, plus 2.5 becomes float32.
#include <cstdint>
#include <type_traits>

#include "minidl/dtype.h"

namespace minidl {

class Scalar {
 public:
  Scalar(double v) : category_(DTypeCategory::Floating), value_(v) {}  // NOLINT(google-explicit-constructor)
  Scalar(float v) : Scalar(static_cast<double>(v)) {}                  // NOLINT(google-explicit-constructor)
  Scalar(bool v) : category_(DTypeCategory::Boolean), value_(v ? 1.0 : 0.0), int_(v ? 1 : 0) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v)  // NOLINT(google-explicit-constructor)
      : category_(DTypeCategory::Integral), value_(static_cast<double>(v)), int_(static_cast<std::int64_t>(v)) {}

  DTypeCategory category() const { return category_; }
  bool is_floating_point() const { return category_ == DTypeCategory::Floating; }
  bool is_integral(bool include_bool) const {
    return category_ == DTypeCategory::Integral || (include_bool && category_ == DTypeCategory::Boolean);
  }
  bool is_boolean() const { return category_ == DTypeCategory::Boolean; }
  double to_double() const { return value_; }
  /// The integer value (exact for integers and bools; a floating value truncated).
  std::int64_t to_long() const {
    return category_ == DTypeCategory::Floating ? static_cast<std::int64_t>(value_) : int_;
  }
  /// The dtype a scalar of this kind takes in type promotion: bool, int64, or the default float32.
  DType type() const {
    return category_ == DTypeCategory::Floating ? kFloat32 : (category_ == DTypeCategory::Integral ? kInt64 : kBool);
  }

 private:
  DTypeCategory category_;
  double value_;
  std::int64_t int_ = 0;
};

}  // namespace minidl
