#pragma once
// The local launcher behind `minidl run --nproc N prog args…` (and `mnist_train --gpus N`): starts one process
// per rank on this machine, like torchrun --nproc_per_node N.
#include <chrono>
#include <string>
#include <vector>

namespace minidl {
namespace distributed {

struct LaunchOptions {
  int nproc = 1;
  /// The program (searched in PATH when it has no '/') and its arguments.
  std::vector<std::string> argv;
  std::string master_addr = "127.0.0.1";
  /// 0: a free port on this machine.
  int master_port = 0;
  /// After a rank fails, the others get SIGTERM and this long to exit before SIGKILL.
  std::chrono::milliseconds grace{std::chrono::seconds(5)};
};

/// Starts options.nproc copies of the program, each in its own process group and with this process's whole
/// environment (NCCL_* and CUDA_* settings included) plus RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
/// MASTER_ADDR and MASTER_PORT. SIGINT and SIGTERM sent to the launcher are forwarded to every rank. Returns 0
/// when every rank exits with 0. When one exits otherwise, prints "minidl run: rank R (pid P) exited with
/// status S" to stderr, stops the others (SIGTERM, then SIGKILL after the grace period) and returns S (128 + the
/// signal number for a rank ended by a signal). Throws ValueError for nproc < 1 or an empty argv, IOError when a
/// process cannot be started (a program that does not exist makes its rank exit with 127).
int launch(const LaunchOptions& options);

/// A TCP port that was free on 127.0.0.1 a moment ago.
int find_free_port();

/// The running program's own path (/proc/self/exe), to start copies of it.
std::string self_executable();

}  // namespace distributed
}  // namespace minidl
