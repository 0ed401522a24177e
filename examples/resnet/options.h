#pragma once
// resnet's command line: the flags, their ranges, and the checks that need several flags or the file system.
// Everything wrong with the command line is found before any work starts and reported as a CLI11 error (exit
// status 2).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "data.h"

namespace resnet {

struct Options {
  std::string data = kDefaultDataDir, device = "auto", amp = "off", blocks = "2,2,2,2", metrics, save, resume,
              dump_reference, log_level = "info";
  std::int64_t epochs = 10, batch_size = 256, width = 64, train_limit = 0, test_limit = 0;
  double lr = 0.1;
  std::uint64_t seed = 1;
  int threads = 0;
  bool synthetic = false, no_augment = false, compare = false, no_cuda_graph = false, no_progress = false;
};

/// Declares every flag on `app`, storing into `o` (which must outlive app.parse()).
void add_options(CLI::App& app, Options& o);

/// The checks CLI11's per-flag validators cannot make (flag combinations, files that must exist). Throws
/// CLI::ValidationError naming the flag.
void check_options(const Options& o, const CLI::App& app);

}  // namespace resnet
