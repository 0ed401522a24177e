#pragma once
// `minidl run --nproc N prog args…`: starts N local ranks of a distributed program (like torchrun).
#include <CLI/CLI.hpp>

#include "minidl/distributed/launcher.h"

namespace minidl_cli {

/// Adds the `run` subcommand to `app`; the returned subcommand is true after parsing when it was chosen.
CLI::App* add_run_command(CLI::App& app, minidl::distributed::LaunchOptions& options);

/// Runs the ranks and returns the launcher's exit status (see minidl::distributed::launch).
int run_run(CLI::App& run, minidl::distributed::LaunchOptions& options);

}  // namespace minidl_cli
