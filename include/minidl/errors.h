#pragma once
// Exception types. Every message names the operation, the argument, what was expected and what was found.
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace minidl {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// An argument has a wrong value or shape.
class ValueError : public Error { public: using Error::Error; };
/// Operands of one op disagree in dtype or device, or a dtype is not supported by an op.
class TypeError : public Error { public: using Error::Error; };
/// A dimension or index is out of range.
class IndexError : public Error { public: using Error::Error; };
/// Misuse of the autograd engine (backward twice, modified saved tensor, ...).
class AutogradError : public Error { public: using Error::Error; };
/// A file could not be read or written.
class IOError : public Error { public: using Error::Error; };
/// A file was read but its content breaks its format's rules.
class FormatError : public IOError { public: using IOError::IOError; };
/// A CUDA, cuBLAS, cuDNN or cuRAND call failed.
class CudaError : public Error { public: using Error::Error; };
/// The device could not satisfy an allocation. The process can continue.
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const std::string& what, std::size_t requested, std::size_t free_bytes, std::size_t total_bytes)
      : Error(what), requested_(requested), free_(free_bytes), total_(total_bytes) {}
  std::size_t requested_bytes() const { return requested_; }
  std::size_t free_bytes() const { return free_; }
  std::size_t total_bytes() const { return total_; }

 private:
  std::size_t requested_, free_, total_;
};

namespace detail {
template <class... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail
}  // namespace minidl

/// Throws ExType with the streamed message when cond is false.
#define MINIDL_CHECK(cond, ExType, ...) \
  do {                                  \
    if (!(cond)) throw ExType(::minidl::detail::str(__VA_ARGS__)); \
  } while (0)
