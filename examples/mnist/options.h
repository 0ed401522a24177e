#pragma once
// mnist_train's command line: the flags, their ranges, and the checks that need several flags or the file
// system. Everything wrong with the command line is found before any work starts and reported as a CLI11
// error (exit status 2); main.cpp turns what remains into exit status 1.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "download.h"

namespace mnist {

struct Options {
  std::string data_dir, device = "auto", optimizer = "sgd", save, resume, metrics, export_logits, log_level = "info",
                        normalization = "auto", download_url = kMnistBaseUrl, amp = "off";
  std::int64_t epochs = 10, batch_size = 64, train_limit = 0, test_limit = 0;
  double lr = 0.05, momentum = 0.9;
  std::uint64_t seed = 1;
  int threads = 0;
  int gpus = 1;  ///< data-parallel ranks (one process per GPU)
  bool compare = false, deterministic = false, no_progress = false, download = false, detect_anomaly = false;
};

/// Where --download puts MNIST when --data is not given.
inline constexpr const char* kDownloadDir = "data/mnist";

/// Declares every flag on `app`, storing into `o` (which must outlive app.parse()).
void add_options(CLI::App& app, Options& o);

/// The checks CLI11's per-flag validators cannot make (flag combinations, files that must or must not
/// exist). Throws CLI::ValidationError naming the flag.
void check_options(const Options& o);

/// The checkpoint's companion file with the optimizer, epoch and RNG state.
inline std::string state_path(const std::string& checkpoint) { return checkpoint + ".state"; }

}  // namespace mnist
