#pragma once
// The body of a program's main, with no exception escaping it. An exception that leaves main calls
// std::terminate, which aborts: the C stdio and iostream buffers are not flushed, so a program whose stdout is a
// pipe or a file loses the output it had already "printed", and the user sees "terminate called after ..." instead
// of the error. run_main catches at main, prints the error with its type and returns a failing exit status, so
// that exit() flushes everything written before.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

namespace minidl {

/// The dynamic type of `e`, demangled where the compiler allows it (e.g. "minidl::FormatError").
inline std::string exception_type_name(const std::exception& e) {
  const char* mangled = typeid(e).name();
#if defined(__GNUG__)
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  if (status == 0 && name) return name.get();
#endif
  return mangled;
}

/// Writes "<program>: error: <type>: <message>" to stderr, after flushing what stdout holds, so that the error
/// comes after the output that preceded it.
inline void print_error(const char* program, const std::exception& e) {
  std::cout.flush();
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: %s: %s\n", program, exception_type_name(e).c_str(), e.what());
  std::fflush(stderr);
}

/// Returns body()'s exit status; when body throws, prints the error (print_error) and returns `failure_status`.
/// For main: `int main(int argc, char** argv) { return minidl::run_main("tool", [&] { ...; return 0; }); }`.
/// A program with errors of its own to treat apart (another exit status, a hint) catches those inside body.
template <class Body>
int run_main(const char* program, Body&& body, int failure_status = 1) noexcept {
  try {
    return std::forward<Body>(body)();
  } catch (const std::exception& e) {
    print_error(program, e);
  } catch (...) {
    std::cout.flush();
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: an exception that is not a std::exception\n", program);
    std::fflush(stderr);
  }
  return failure_status;
}

}  // namespace minidl
