#pragma once
// gpt_train's command line: the flags, their ranges, the two presets (--config char|gpt2) that the overrides
// change, and the checks that need several flags or the file system. Everything wrong with the command line is
// found before any work starts and reported as a CLI11 error (exit status 2).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace gpt {

/// The hyperparameters of a run after the preset and the overrides.
struct Hyper {
  std::int64_t n_layer = 6, n_head = 6, n_embd = 384, block_size = 256, batch_size = 64;
  /// Micro-batches of batch_size sequences per optimizer step (nanoGPT's gradient_accumulation_steps): the step's
  /// gradient is their mean, so a step sees grad_accum * batch_size sequences with one micro-batch's activations.
  std::int64_t grad_accum = 1;
  double dropout = 0.2;
  bool bias = false;
  std::int64_t iters = 5000, warmup = 100, eval_every = 250, eval_iters = 200;
  double lr = 1e-3, min_lr = 1e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.99, grad_clip = 1.0;
  /// Tokens of --synthetic-vocab when no --data is given (the gpt2 preset: GPT-2's vocabulary padded to 50304).
  std::int64_t synthetic_vocab = 0;
};

/// nanoGPT's configurations: "char" (config/train_shakespeare_char.py) and "gpt2" (GPT-2 124M,
/// config/train_gpt2.py, with batch 16 and no gradient accumulation). Throws ValueError for another name.
Hyper preset(const std::string& name);

struct Options {
  std::string config = "char", data, device = "auto", amp = "off", save, resume, metrics, dump_reference, prompt = "\n",
              log_level = "info";
  std::optional<std::int64_t> n_layer, n_head, n_embd, block_size, batch_size, grad_accum, iters, warmup, eval_every, eval_iters,
      synthetic_vocab;
  std::optional<double> dropout, lr, min_lr, weight_decay, grad_clip;
  bool bias = false, compare = false, no_graph = false, no_progress = false;
  std::uint64_t seed = 1337;
  int threads = 0;
  std::int64_t sample = 0, top_k = 0;
  double temperature = 1.0;
};

/// Declares every flag on `app`, storing into `o` (which must outlive app.parse()).
void add_options(CLI::App& app, Options& o);

/// The checks CLI11's per-flag validators cannot make (flag combinations, files that must exist, a head count
/// that divides the width). Throws CLI::ValidationError naming the flag.
void check_options(const Options& o);

/// The preset of o.config with o's overrides applied.
Hyper resolve(const Options& o);

/// The project's copy of tiny shakespeare, the char preset's data when --data is not given.
std::string default_data_file();

/// The checkpoint's companion file with the optimizer, iteration and RNG state.
inline std::string state_path(const std::string& checkpoint) { return checkpoint + ".state"; }

}  // namespace gpt
