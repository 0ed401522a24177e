#include "options.h"

#include <minidl/errors.h>

#include <filesystem>

#include "output_file.h"

namespace fs = std::filesystem;

namespace gpt {

Hyper preset(const std::string& name) {
  Hyper h;
  if (name == "char") return h;  // Hyper's defaults are nanoGPT's shakespeare-char
  if (name == "gpt2") {
    h.n_layer = 12;
    h.n_head = 12;
    h.n_embd = 768;
    h.block_size = 1024;
    h.batch_size = 16;
    h.dropout = 0.0;
    h.iters = 600000;
    h.warmup = 2000;
    h.eval_every = 1000;
    h.eval_iters = 200;
    h.lr = 6e-4;
    h.min_lr = 6e-5;
    h.beta2 = 0.95;
    h.synthetic_vocab = 50304;
    return h;
  }
  throw minidl::ValueError("--config: unknown configuration \"" + name + "\" (expected char or gpt2)");
}

std::string default_data_file() { return std::string(GPT_SOURCE_DIR) + "/data/input.txt"; }

void add_options(CLI::App& app, Options& o) {
  const CLI::Validator out_file = examples::output_file();
  app.add_option("--config", o.config,
                 "char: nanoGPT's shakespeare-char (6 layers, 6 heads, 384 wide, context 256, batch 64, dropout 0.2, "
                 "lr 1e-3, 5000 iterations); gpt2: GPT-2 124M (12 layers, 12 heads, 768 wide, context 1024, batch "
                 "16, lr 6e-4, synthetic tokens of a 50304 vocabulary unless --data is given)")
      ->check(CLI::IsMember({"char", "gpt2"}))
      ->capture_default_str();
  app.add_option("--data", o.data,
                 "UTF-8 text file: character vocabulary, first 90% train, last 10% val (default for --config char: "
                 "examples/gpt/data/input.txt, tiny shakespeare)")
      ->check(CLI::ExistingFile);
  app.add_option("--synthetic-vocab", o.synthetic_vocab, "train on random tokens of a vocabulary of N (speed runs)")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 24));
  app.add_option("--n-layer", o.n_layer, "transformer blocks")->check(CLI::Range(1, 1024));
  app.add_option("--n-head", o.n_head, "attention heads (must divide --n-embd)")->check(CLI::Range(1, 1024));
  app.add_option("--n-embd", o.n_embd, "embedding width")->check(CLI::Range(1, 1 << 16));
  app.add_option("--block-size", o.block_size, "context length")->check(CLI::Range(1, 1 << 20));
  app.add_option("--batch-size", o.batch_size, "sequences per micro-batch")->check(CLI::Range(1, 1 << 20));
  app.add_option("--grad-accum", o.grad_accum,
                 "micro-batches per optimizer step, their gradients averaged (a step sees grad-accum x batch-size "
                 "sequences with one micro-batch's activations)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--dropout", o.dropout, "dropout probability")->check(CLI::Range(0.0, 0.99));
  app.add_flag("--bias", o.bias, "biases in the linear layers and layer norms (as GPT-2; nanoGPT's presets have none)");
  app.add_option("--iters", o.iters, "training iterations (the cosine schedule ends at the last)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  app.add_option("--lr", o.lr, "peak learning rate")->check(CLI::Range(0.0, 1e3));
  app.add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")->check(CLI::Range(0.0, 1e3));
  app.add_option("--warmup", o.warmup, "linear warm-up iterations")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay of the matrices (not of biases and norms)")
      ->check(CLI::Range(0.0, 1e3));
  app.add_option("--grad-clip", o.grad_clip, "clip the gradients' total norm to this (0: no clipping)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--seed", o.seed, "random seed (weights, batches, dropout, sampling)")->capture_default_str();
  app.add_option("--device", o.device, "cpu, cuda[:N] or auto (the GPU if usable)")
      ->check(CLI::IsMember(
          {"auto", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6", "cuda:7"}))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (default: all hardware threads)")->check(CLI::Range(1, 4096));
  app.add_option("--amp", o.amp, "mixed precision: bf16, fp16 or off")
      ->check(CLI::IsMember({"bf16", "fp16", "off"}))
      ->capture_default_str();
  app.add_flag("--no-graph", o.no_graph, "GPU: run every step eagerly instead of replaying a captured CUDA graph");
  app.add_flag("--compare", o.compare, "train on the CPU and then on the GPU with the same seed and compare speeds");
  app.add_option("--eval-every", o.eval_every, "evaluate the train and val loss every N iterations")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  app.add_option("--eval-iters", o.eval_iters, "batches per split and evaluation")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  app.add_option("--metrics", o.metrics,
                 "write CSV (iter,split,loss,ms_per_iter,tokens_per_s,elapsed_s) at every evaluation; with "
                 "--compare, one file per device (FILE with .cpu / .cuda before its extension)")
      ->check(out_file);
  app.add_option("--save", o.save,
                 "write a checkpoint (safetensors, nanoGPT's names) at every evaluation, and "
                 "FILE.state with the optimizer, iteration and RNG state")
      ->check(out_file);
  app.add_option("--resume", o.resume, "continue from a checkpoint written by --save (same model flags)")
      ->check(CLI::ExistingFile);
  app.add_option("--sample", o.sample, "after training, generate N tokens from --prompt")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30));
  app.add_option("--prompt", o.prompt, "text the samples continue (characters of the training text)");
  app.add_option("--temperature", o.temperature, "sampling temperature")->check(CLI::Range(1e-6, 1e6));
  app.add_option("--top-k", o.top_k, "sample among the K likeliest tokens only (0: all)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 24));
  app.add_option("--dump-reference", o.dump_reference,
                 "write what examples/gpt/reference/check_against_pytorch.py compares (weights, one batch's logits, "
                 "loss and gradients, the losses of 10 AdamW steps; dropout off) and exit")
      ->check(out_file);
  app.add_flag("--no-progress", o.no_progress, "no progress bar or progress lines");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.footer("Exit status: 0 success, 1 runtime error, 2 command-line error, 130 interrupted (Ctrl-C).");
}

Hyper resolve(const Options& o) {
  Hyper h = preset(o.config);
  const auto take = [](auto& field, const auto& value) {
    if (value) field = *value;
  };
  take(h.n_layer, o.n_layer);
  take(h.n_head, o.n_head);
  take(h.n_embd, o.n_embd);
  take(h.block_size, o.block_size);
  take(h.batch_size, o.batch_size);
  take(h.grad_accum, o.grad_accum);
  take(h.dropout, o.dropout);
  take(h.iters, o.iters);
  take(h.warmup, o.warmup);
  take(h.eval_every, o.eval_every);
  take(h.eval_iters, o.eval_iters);
  take(h.lr, o.lr);
  take(h.min_lr, o.min_lr);
  take(h.weight_decay, o.weight_decay);
  take(h.grad_clip, o.grad_clip);
  take(h.synthetic_vocab, o.synthetic_vocab);
  if (o.bias) h.bias = true;
  if (!o.data.empty()) h.synthetic_vocab = 0;
  return h;
}

void check_options(const Options& o) {
  const Hyper h = resolve(o);
  if (h.n_embd % h.n_head != 0) {
    throw CLI::ValidationError(
        "--n-head", std::to_string(h.n_head) + " heads do not divide the width --n-embd " + std::to_string(h.n_embd));
  }
  if (!o.data.empty() && o.synthetic_vocab) {
    throw CLI::ValidationError("--synthetic-vocab", "cannot be combined with --data");
  }
  if (o.data.empty() && h.synthetic_vocab == 0 && !fs::is_regular_file(default_data_file())) {
    throw CLI::ValidationError("--data", "not given, and the project's copy " + default_data_file() +
                                             " is missing: pass --data FILE or --synthetic-vocab N");
  }
  if (o.sample > 0 && h.synthetic_vocab > 0) {
    throw CLI::ValidationError("--sample",
                               "needs text to sample from (--data, or --config char's default text), "
                               "not random tokens");
  }
  if (h.min_lr > h.lr) {
    throw CLI::ValidationError("--min-lr", std::to_string(h.min_lr) + " is above --lr " + std::to_string(h.lr));
  }
  if (!o.resume.empty()) {
    std::error_code ec;
    if (o.compare) throw CLI::ValidationError("--resume", "cannot be combined with --compare");
    if (!fs::is_regular_file(state_path(o.resume), ec)) {
      throw CLI::ValidationError("--resume", state_path(o.resume) + " (the training state written with " + o.resume +
                                                 " by --save) does not exist");
    }
  }
  if (!o.dump_reference.empty() && o.compare) {
    throw CLI::ValidationError("--dump-reference", "cannot be combined with --compare");
  }
}

}  // namespace gpt
