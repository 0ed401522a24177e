#pragma once
// Trains nanoGPT's model on one device as nanoGPT's train.py does: AdamW with two parameter groups (weight decay
// for the matrices and embeddings, none for biases and norms), nanoGPT's learning rate (linear warm-up, cosine
// decay to min_lr at the last iteration), gradient clipping, and loss estimates over eval_iters batches per
// split; with --amp, the forward pass and loss under autocast and, for float16, a GradScaler that unscales the
// gradients before the clipping. With grad_accum K > 1 a step runs K micro-batches' forward and backward passes
// (each loss divided by K, the gradients adding up) before the one clipping and update. On a GPU the whole step (forward, loss, backward, clipping, AdamW, the running
// loss) is captured once in a CUDA graph after two eager warm-up steps and replayed for every later iteration: the
// host only builds the next batch, copies it in and sets the learning rate, which reaches the captured update
// through the optimizer's device-side options. The running loss stays on the device until an interval ends or the
// progress display is due.
#include <minidl/minidl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "amp_mode.h"
#include "data.h"
#include "epoch_clock.h"
#include "model.h"
#include "options.h"

namespace gpt {

struct TrainConfig {
  minidl::Device device{minidl::kCPU};
  Hyper hyper;
  std::uint64_t seed = 1337;
  bool cuda_graph = true;  // GPU: capture the whole step once and replay it
  bool progress = true;
  /// Polled after every step; when it returns true the trainer throws Interrupted.
  std::function<bool()> stop_requested;
  /// --amp: the autocast dtype of the forward pass and loss (none: float32); float16 adds a GradScaler.
  std::optional<minidl::DType> amp;
};

/// The model of `hyper` over a vocabulary of `vocab_size`.
GPTConfig gpt_config(const Hyper& hyper, std::int64_t vocab_size);

/// nanoGPT's learning rate at iteration `it`: lr (it + 1) / (warmup + 1) during the warm-up, then a cosine from
/// lr down to min_lr at iteration `iters`, min_lr after.
double learning_rate(const Hyper& hyper, std::int64_t it);

/// Training iterations [first, first + iters): their mean loss and time.
struct IntervalStats {
  std::int64_t first = 0, iters = 0;
  double loss = 0, seconds = 0;
  /// The seconds split into steady state and one-time work (warm-up steps and the CUDA-graph capture).
  examples::EpochTiming timing;
};

/// Training stopped at the user's request (TrainConfig::stop_requested) after `iter` iterations.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(std::int64_t iter);
};

/// A loss read back from the device is NaN or Inf: nothing is saved from these weights.
class NonFiniteLoss : public minidl::Error {
 public:
  using minidl::Error::Error;
};

class Trainer {
 public:
  /// Seeds minidl's generators with config.seed, then builds the model (initialised on the CPU, so every
  /// device starts from the same weights) on config.device and its optimizer.
  Trainer(TrainConfig config, std::shared_ptr<const TokenData> data);

  GPT& model() { return model_; }
  minidl::optim::AdamW& optimizer() { return *optimizer_; }
  const TrainConfig& config() const { return config_; }
  const TokenData& data() const { return *data_; }
  /// Iterations done (the next one to run).
  std::int64_t iter() const { return iter_; }

  /// Runs iterations iter() .. until - 1. With `step_losses`, every step runs eagerly and its loss is read back
  /// into it (for the comparison with PyTorch). Throws Interrupted, NonFiniteLoss.
  IntervalStats train(std::int64_t until, std::vector<double>* step_losses = nullptr);
  /// The mean loss over eval_iters batches of `split` in eval mode (no dropout), as nanoGPT's estimate_loss.
  double evaluate(Split split);

  /// Writes the model to `path` (safetensors, nanoGPT's names, the model's configuration and vocabulary in the
  /// metadata) and the optimizer, iteration and RNG state to state_path(path).
  void save(const std::string& path) const;
  /// Restores what save() wrote; a checkpoint of another model configuration or vocabulary is a ValueError
  /// naming both.
  void resume(const std::string& path);
  /// The float16 run's GradScaler; null for bfloat16 and float32.
  minidl::amp::GradScaler* grad_scaler() { return scaler_.get(); }
  /// Nodes of the captured step; 0 while the step runs eagerly.
  std::size_t graph_nodes() const { return graph_.num_nodes(); }

 private:
  void step(const minidl::Tensor& x, const minidl::Tensor& y);
  /// Runs iteration iter_ on `batch`: eagerly (warm-up, CPU, `eager`), else by capturing or replaying the graph.
  void run_iteration(const TokenBatch& batch, bool eager);
  bool takes_graph() const;
  /// Whether the next iteration is a warm-up step or the capture (timed apart by the clock).
  bool does_one_time_work() const;

  TrainConfig config_;
  std::shared_ptr<const TokenData> data_;
  GPT model_;
  std::vector<minidl::Tensor> params_;
  std::unique_ptr<minidl::optim::AdamW> optimizer_;
  std::unique_ptr<minidl::amp::GradScaler> scaler_;  // with config.amp float16
  minidl::Tensor loss_sum_;   // device sum of the current interval's step losses
  minidl::Tensor last_loss_;  // the last step's loss (read back only with step_losses, which runs eagerly)
  minidl::cuda::CUDAGraph graph_;
  minidl::Tensor static_x_, static_y_;  // the captured step reads its batch from here
  std::int64_t eager_steps_ = 0, iter_ = 0;
  examples::EpochClock clock_;
};

}  // namespace gpt
