// The `minidl` command-line tool. Exit status: 0 success, 1 the command ran and found a failure (see each
// subcommand's help; `run` returns its failed rank's status), 2 command-line error.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "info.h"
#include "run.h"
#include "minidl/run_main.h"
#include "minidl/version.h"

namespace {
constexpr int kUsageError = 2;
}

int main(int argc, char** argv) {
  // Library log lines go to stderr, so that stdout carries only the command's output (e.g. `info --json`).
  spdlog::set_default_logger(spdlog::stderr_color_mt("minidl-cli"));

  CLI::App app{"minidl: tools of the minidl deep-learning framework"};
  app.set_version_flag("--version", "minidl " + minidl::version());
  app.require_subcommand(1);
  app.footer("Exit status: 0 success, 1 the command found a failure, 2 command-line error.");
  minidl_cli::InfoOptions info_options;
  CLI::App* info = minidl_cli::add_info_command(app, info_options);
  minidl::distributed::LaunchOptions run_options;
  CLI::App* run = minidl_cli::add_run_command(app, run_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Prints help/version (a "success") to stdout, or the error to stderr.
    const int code = app.exit(e);
    return code == 0 ? 0 : kUsageError;
  }

  return minidl::run_main("minidl", [&] {
    if (*info) return minidl_cli::run_info(info_options);
    if (*run) return minidl_cli::run_run(*run, run_options);
    return 0;
  });
}
