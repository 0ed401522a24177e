#pragma once
// `minidl info`: the environment doctor (build and run-time versions, devices, diagnosis, self-test).
#include <CLI/CLI.hpp>

namespace minidl_cli {

struct InfoOptions {
  bool json = false;
};

/// Adds the `info` subcommand to `app`; the returned subcommand is true after parsing when it was chosen.
CLI::App* add_info_command(CLI::App& app, InfoOptions& options);

/// Prints the report and returns the exit status: 0 when the CPU self-test passes, no diagnosis is an error
/// and, in a CUDA build, at least one GPU passes the self-test; 1 otherwise.
int run_info(const InfoOptions& options);

}  // namespace minidl_cli
