#include "run.h"

#include <iostream>

namespace minidl_cli {

CLI::App* add_run_command(CLI::App& app, minidl::distributed::LaunchOptions& o) {
  CLI::App* run = app.add_subcommand(
      "run",
      "Starts N processes of a distributed program on this machine, one per GPU, as torchrun does: each gets the "
      "whole environment (NCCL_* settings included) plus RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, "
      "MASTER_ADDR=127.0.0.1 and MASTER_PORT. Ctrl-C and SIGTERM are forwarded to every rank; when a rank fails, "
      "the others are stopped.\n"
      "Usage: minidl run --nproc N [options] PROGRAM [ARGS...]\n"
      "Exit status: 0 when every rank succeeds, else the status of the first rank that failed (128 + signal for "
      "a signal); 2 for a command-line error.");
  run->add_option("--nproc,--nproc-per-node", o.nproc, "number of processes (ranks)")
      ->required()
      ->check(CLI::Range(1, 1024));
  run->add_option("--master-port", o.master_port, "rendezvous port (default: a free one)")->check(CLI::Range(1, 65535));
  auto* grace = run->add_option_function<double>(
      "--grace", [&o](double s) { o.grace = std::chrono::milliseconds(static_cast<long long>(s * 1000)); },
      "seconds the other ranks get to exit after one failed (default 5), then SIGKILL");
  grace->check(CLI::Range(0.0, 3600.0));
  // Everything from the program's name on belongs to the program, its options included (no "--" needed).
  run->prefix_command();
  return run;
}

int run_run(CLI::App& run, minidl::distributed::LaunchOptions& o) {
  o.argv = run.remaining();
  if (o.argv.empty()) {
    std::cerr << "minidl run: no program given (usage: minidl run --nproc N PROGRAM [ARGS...])\n";
    return 2;
  }
  return minidl::distributed::launch(o);
}

}  // namespace minidl_cli
