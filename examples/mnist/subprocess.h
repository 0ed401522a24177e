#pragma once
// Running a helper program (curl, wget; in the tests: mnist_train itself) and collecting what it prints.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace mnist {

struct ProcessResult {
  int exit_code = -1;  ///< the exit status, or -1 when a signal ended the program
  int signal = 0;      ///< the signal that ended it, else 0
  std::string out, err;
};

/// Runs argv[0] (searched in PATH) with `argv`, standard input from /dev/null, and waits for it, collecting
/// standard output and standard error. Returns nullopt when the program does not exist. Throws
/// minidl::IOError when it cannot be started or its standard output exceeds `max_out` bytes (it is then
/// killed), minidl::ValueError for an empty argv.
std::optional<ProcessResult> run_process(const std::vector<std::string>& argv, std::size_t max_out);

}  // namespace mnist
