#pragma once
// IntArrayRef: a borrowed list of int64 values (dims, sizes), as LibTorch's c10::IntArrayRef, so that the calls a
// LibTorch user writes compile unchanged: x.sum(1), x.sum({0, 2}, true), x.amax(dims_vector). It does not own
// its values: take one as a parameter, never store it.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <vector>

namespace minidl {

class IntArrayRef {
 public:
  constexpr IntArrayRef() = default;
  /// One value (x.sum(1)): refers to the argument, which lives until the end of the call's full expression.
  IntArrayRef(const std::int64_t& one) : data_(&one), size_(1) {}  // NOLINT(google-explicit-constructor)
  IntArrayRef(const std::vector<std::int64_t>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  // (c10's form: l.begin() would draw GCC's -Winit-list-lifetime, which a parameter's list, alive for the whole
  // call, does not deserve.)
  IntArrayRef(const std::initializer_list<std::int64_t>& l)  // NOLINT(google-explicit-constructor)
      : data_(std::begin(l) == std::end(l) ? nullptr : std::begin(l)), size_(l.size()) {}
  IntArrayRef(const std::int64_t* data, std::size_t size) : data_(data), size_(size) {}

  const std::int64_t* begin() const { return data_; }
  const std::int64_t* end() const { return data_ + size_; }
  const std::int64_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::int64_t operator[](std::size_t i) const { return data_[i]; }
  std::vector<std::int64_t> vec() const { return std::vector<std::int64_t>(begin(), end()); }

 private:
  const std::int64_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace minidl
