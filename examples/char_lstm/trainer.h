#pragma once
// Trains the character LSTM on one device with truncated backpropagation through time: each iteration takes the
// next batch of the contiguous training streams (streams.h), runs the model from the state the previous batch
// ended with, detached (the gradient stops at the batch's first character, the values carry on), and updates
// with Adam after clipping the gradients' total norm. An epoch starts from the zero state. Validation runs the
// validation split (or its first --eval-batches batches) the same way, the state carried through its streams
// from zeros, and reports the loss per character. The running loss stays on the device until an interval ends
// or the progress display is due.
#include <minidl/minidl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "epoch_clock.h"
#include "model.h"
#include "options.h"
#include "streams.h"
#include "text_tokens.h"

namespace char_lstm {

struct TrainConfig {
  minidl::Device device{minidl::kCPU};
  Hyper hyper;
  std::uint64_t seed = 1337;
  bool progress = true;
  /// Polled after every step; when it returns true the trainer throws Interrupted.
  std::function<bool()> stop_requested;
};

/// The model of `hyper` over a vocabulary of `vocab_size`.
CharLSTMConfig model_config(const Hyper& hyper, std::int64_t vocab_size);

/// Training iterations [first, first + iters): their mean loss and time.
struct IntervalStats {
  std::int64_t first = 0, iters = 0;
  double loss = 0, seconds = 0;
  /// The seconds split into steady state and one-time work (the first step).
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
  /// Seeds minidl's generators with config.seed, then builds the model (initialised on the CPU, so every device
  /// starts from the same weights) on config.device, its optimizer and the streams of both splits. Throws
  /// ValueError when a split is too short for one batch.
  Trainer(TrainConfig config, std::shared_ptr<const examples::TokenData> data);

  CharLSTM& model() { return model_; }
  minidl::optim::Adam& optimizer() { return *optimizer_; }
  const TrainConfig& config() const { return config_; }
  const TokenStreams& train_streams() const { return train_; }
  const TokenStreams& val_streams() const { return val_; }
  /// Iterations done (the next one to run).
  std::int64_t iter() const { return iter_; }
  /// The state the next training batch starts from (detached; zeros at an epoch's start).
  const LSTMState& carried_state() const { return state_; }

  /// Runs iterations iter() .. until - 1; with `step_losses` each step's loss is read back into it (for the
  /// comparison with PyTorch). Throws Interrupted, NonFiniteLoss.
  IntervalStats train(std::int64_t until, std::vector<double>* step_losses = nullptr);
  /// The validation loss per character (nats): the mean cross entropy over the validation batches
  /// (eval_batches()), the state carried through them from zeros.
  double evaluate();
  /// The batches evaluate() runs: Hyper::eval_batches of the validation streams, all of them when 0.
  std::int64_t eval_batches() const;

  /// Writes the model to `path` (safetensors, PyTorch's names, the configuration and vocabulary in the metadata),
  /// the optimizer, iteration and RNG state to state_path(path), the carried state to hidden_path(path).
  void save(const std::string& path) const;
  /// Restores what save() wrote; a checkpoint of another model configuration or vocabulary is a ValueError naming
  /// both.
  void resume(const std::string& path);

 private:
  void step(const StreamBatch& batch);

  TrainConfig config_;
  std::shared_ptr<const examples::TokenData> data_;
  TokenStreams train_, val_;
  CharLSTM model_;
  std::vector<minidl::Tensor> params_;
  std::unique_ptr<minidl::optim::Adam> optimizer_;
  LSTMState state_;
  minidl::Tensor loss_sum_;   // device sum of the current interval's step losses
  minidl::Tensor last_loss_;  // the last step's loss
  std::int64_t iter_ = 0, steps_run_ = 0;
  examples::EpochClock clock_;
};

}  // namespace char_lstm
