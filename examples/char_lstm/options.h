#pragma once
// char_lstm's command line: the flags, their ranges, and the checks that need several flags or the file system.
// Everything wrong with the command line is found before any work starts and reported as a CLI11 error (exit
// status 2).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace char_lstm {

/// The model and its training (the benchmark configuration by default).
struct Hyper {
  std::int64_t embed = 128, hidden = 512, layers = 2;
  std::int64_t seq_len = 128, batch_size = 64;
  double lr = 2e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, grad_clip = 5.0;
  /// Training iterations (one batch of seq_len characters of every stream each); set from --iters or --epochs.
  std::int64_t iters = 0, eval_every = 100;
  /// Validation batches (the first ones of the validation streams); 0: all of them.
  std::int64_t eval_batches = 0;
};

struct Options {
  Hyper hyper;
  std::optional<std::int64_t> iters, epochs;
  std::string data, device = "auto", save, resume, metrics, dump_reference, prompt = "\n", log_level = "info";
  bool compare = false, no_progress = false;
  std::uint64_t seed = 1337;
  int threads = 0;
  std::int64_t sample = 0;
  double temperature = 1.0;
};

/// Epochs when neither --iters nor --epochs is given.
constexpr std::int64_t kDefaultEpochs = 10;

/// Declares every flag on `app`, storing into `o` (which must outlive app.parse()).
void add_options(CLI::App& app, Options& o);

/// The checks CLI11's per-flag validators cannot make (flag combinations, files that must exist). Throws
/// CLI::ValidationError naming the flag.
void check_options(const Options& o);

/// The project's copy of tiny shakespeare (examples/gpt/data/input.txt), the data when --data is not given.
std::string default_data_file();

/// Training iterations: --iters, else --epochs (default kDefaultEpochs) times the batches of an epoch.
std::int64_t total_iters(const Options& o, std::int64_t batches_per_epoch);

/// The checkpoint's companion files: the optimizer, iteration and RNG state, and the carried LSTM state.
inline std::string state_path(const std::string& checkpoint) { return checkpoint + ".state"; }
inline std::string hidden_path(const std::string& checkpoint) { return checkpoint + ".hidden"; }

}  // namespace char_lstm
