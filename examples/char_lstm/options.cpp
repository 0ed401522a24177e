#include "options.h"

#include <filesystem>

#include "output_file.h"

namespace fs = std::filesystem;

namespace char_lstm {

std::string default_data_file() { return CHAR_LSTM_DEFAULT_DATA; }

void add_options(CLI::App& app, Options& o) {
  const CLI::Validator out_file = examples::output_file();
  Hyper& h = o.hyper;
  app.add_option("--data", o.data,
                 "UTF-8 text file: character vocabulary, first 90% train, last 10% val (default: "
                 "examples/gpt/data/input.txt, tiny shakespeare)")
      ->check(CLI::ExistingFile);
  app.add_option("--embed", h.embed, "embedding width")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--hidden", h.hidden, "LSTM hidden size")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--layers", h.layers, "LSTM layers")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--seq-len", h.seq_len, "truncated BPTT length: characters per stream and step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--batch-size", h.batch_size, "parallel streams the training text is split into")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  CLI::Option* iters = app.add_option("--iters", o.iters, "training iterations")
                           ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  app.add_option("--epochs", o.epochs,
                 "training epochs (passes over the training streams; default " + std::to_string(kDefaultEpochs) +
                     " when --iters is not given either)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30))
      ->excludes(iters);
  app.add_option("--lr", h.lr, "Adam's learning rate")->check(CLI::Range(0.0, 1e3))->capture_default_str();
  app.add_option("--grad-clip", h.grad_clip, "clip the gradients' total norm to this (0: no clipping)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--eval-every", h.eval_every, "validate every N iterations (and at the end)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--eval-batches", h.eval_batches,
                 "validate on the first N batches of the validation streams (0: all of them, the whole split)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (weights, sampling)")->capture_default_str();
  app.add_option("--device", o.device, "cpu, cuda[:N] or auto (the GPU if usable)")
      ->check(CLI::IsMember(
          {"auto", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6", "cuda:7"}))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (default: all hardware threads)")->check(CLI::Range(1, 4096));
  app.add_flag("--compare", o.compare, "train on the CPU and then on the GPU with the same seed and compare speeds");
  app.add_option("--metrics", o.metrics,
                 "write CSV (iter,split,loss,ms_per_iter,tokens_per_s,elapsed_s) at every validation; with "
                 "--compare, one file per device (FILE with .cpu / .cuda before its extension)")
      ->check(out_file);
  app.add_option("--save", o.save,
                 "write a checkpoint (safetensors, PyTorch's names) at every validation, FILE.state with the "
                 "optimizer, iteration and RNG state and FILE.hidden with the carried LSTM state")
      ->check(out_file);
  app.add_option("--resume", o.resume, "continue from a checkpoint written by --save (same model flags)")
      ->check(CLI::ExistingFile);
  app.add_option("--sample", o.sample, "after training, generate N characters from --prompt")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30));
  app.add_option("--prompt", o.prompt, "text the sample continues (characters of the training text)");
  app.add_option("--temperature", o.temperature, "sampling temperature")->check(CLI::Range(1e-6, 1e6));
  app.add_option("--dump-reference", o.dump_reference,
                 "write what examples/char_lstm/reference/check_against_pytorch.py compares (weights, a batch with "
                 "random initial states, its logits, loss and gradients, the losses of 10 training steps) and exit")
      ->check(out_file);
  app.add_flag("--no-progress", o.no_progress, "no progress bar or progress lines");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.footer("Exit status: 0 success, 1 runtime error, 2 command-line error, 130 interrupted (Ctrl-C).");
}

void check_options(const Options& o) {
  if (o.data.empty() && !fs::is_regular_file(default_data_file())) {
    throw CLI::ValidationError("--data",
                               "not given, and the project's copy " + default_data_file() + " is missing: pass --data");
  }
  if (!o.resume.empty()) {
    if (o.compare) throw CLI::ValidationError("--resume", "cannot be combined with --compare");
    for (const std::string& companion : {state_path(o.resume), hidden_path(o.resume)}) {
      std::error_code ec;
      if (!fs::is_regular_file(companion, ec)) {
        throw CLI::ValidationError("--resume", companion + " (written with " + o.resume + " by --save) does not exist");
      }
    }
  }
  if (!o.dump_reference.empty() && o.compare) {
    throw CLI::ValidationError("--dump-reference", "cannot be combined with --compare");
  }
}

std::int64_t total_iters(const Options& o, std::int64_t batches_per_epoch) {
  if (o.iters) return *o.iters;
  return o.epochs.value_or(kDefaultEpochs) * batches_per_epoch;
}

}  // namespace char_lstm
