#pragma once
// dcgan's command line: the flags, their ranges, and the checks that need several flags or the file system.
// Everything wrong with the command line is found before any work starts and reported as a CLI11 error (exit
// status 2).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace dcgan {

/// Where Debian's dataset-fashion-mnist package puts the IDX files.
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

struct Options {
  std::string data = kDefaultDataDir, device = "auto", samples_dir = "dcgan-samples", metrics, save, resume,
              dump_reference, log_level = "info";
  std::int64_t epochs = 5, batch_size = 128, latent = 100, train_limit = 0, log_every = 50;
  double lr = 2e-4, beta1 = 0.5, beta2 = 0.999;
  std::uint64_t seed = 1;
  int threads = 0;
  bool synthetic = false, compare = false, no_progress = false;
};

/// Declares every flag on `app`, storing into `o` (which must outlive app.parse()).
void add_options(CLI::App& app, Options& o);

/// The checks CLI11's per-flag validators cannot make (flag combinations, files that must exist). Throws
/// CLI::ValidationError naming the flag.
void check_options(const Options& o, const CLI::App& app);

}  // namespace dcgan
