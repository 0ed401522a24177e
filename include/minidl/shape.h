#pragma once
// Shape: a tensor's sizes (or strides), a std::vector<std::int64_t> of its own type so that it prints as LibTorch's
// sizes() does: std::cout << x.sizes() writes "[2, 3]". Every vector operation, and conversion to and from
// std::vector<std::int64_t>, works as before.
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace minidl {

class Shape : public std::vector<std::int64_t> {
 public:
  using Base = std::vector<std::int64_t>;
  using Base::Base;
  Shape() = default;
  Shape(const Base& v) : Base(v) {}                 // NOLINT(google-explicit-constructor)
  Shape(Base&& v) noexcept : Base(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  /// LibTorch's IntArrayRef::vec(): the values as a plain vector.
  Base vec() const { return *this; }
};

/// "[2, 3]" ("[]" for a 0-d tensor's sizes), as LibTorch prints an IntArrayRef.
std::string shape_str(const Shape& s);
std::ostream& operator<<(std::ostream& os, const Shape& s);
/// Product of the sizes; throws ValueError on negative sizes or 64-bit overflow.
std::int64_t shape_numel(const Shape& s);

}  // namespace minidl
