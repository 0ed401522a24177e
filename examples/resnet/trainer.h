#pragma once
// Trains the ResNet of model.h on one device as the usual CIFAR recipe does: SGD with Nesterov momentum 0.9 and
// weight decay 5e-4 on every parameter, OneCycleLR (cosine, momentum held at 0.9) stepped after every batch over
// the whole run, cross entropy, random crop + flip on the device (augment.h), the test set evaluated after every
// epoch. On a GPU the step (forward, loss, backward, update, the running sums) is captured in a CUDA graph after two
// eager warm-up steps, as examples/mnist does, and replayed for every full batch; the augmentation runs before it
// and is copied into the graph's input, and the learning rate the scheduler sets lives on the device, so a replay
// uses each step's own rate.
#include <minidl/amp/grad_scaler.h>
#include <minidl/minidl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "classifier_step.h"
#include "epoch_clock.h"
#include "image_set.h"
#include "model.h"

namespace resnet {

struct TrainConfig {
  minidl::Device device{minidl::kCPU};
  ModelConfig model;
  std::int64_t epochs = 10, batch_size = 256, test_batch_size = 1000;
  /// OneCycleLR's peak learning rate (it starts at lr / 25 and ends at lr / 25e4).
  double lr = 0.1, momentum = 0.9, weight_decay = 5e-4;
  std::uint64_t seed = 1;
  bool augment = true;
  /// --amp: the autocast dtype of the forward pass and the loss, in training and evaluation; none: float32.
  std::optional<minidl::DType> amp;
  /// GPU: capture the step in a CUDA graph after the warm-up (off: every step eager).
  bool cuda_graph = true;
  bool progress = true;
  /// Polled after every step and evaluation batch; when it returns true the trainer throws Interrupted.
  std::function<bool()> stop_requested;
};

/// Mean loss and accuracy over a pass, and its wall time.
struct PassStats {
  double loss = 0, accuracy = 0, seconds = 0;
  std::int64_t images = 0;
};

struct EpochStats {
  std::int64_t epoch = 0, steps = 0;
  PassStats train, test;  ///< test: images 0 when there is no test set
  double lr = 0;          ///< the learning rate of the epoch's last step
  /// The training pass's seconds split into steady state and one-time work (see epoch_clock.h).
  examples::EpochTiming timing;
};

/// Training stopped at the user's request (TrainConfig::stop_requested) after step `iter`.
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
  /// Seeds minidl's generators with config.seed, builds the model on the CPU with torchvision's initialisation (so
  /// every device starts from the same weights) and moves it to config.device. `test` may be null (no evaluation).
  Trainer(TrainConfig config, std::shared_ptr<const examples::ImageSet> train,
          std::shared_ptr<const examples::ImageSet> test);

  ResNet& model() { return model_; }
  minidl::optim::SGD& optimizer() { return *optimizer_; }
  const minidl::optim::OneCycleLR& scheduler() const { return *scheduler_; }
  const TrainConfig& config() const { return config_; }
  /// Epochs finished, and steps done since the start of training.
  std::int64_t epoch() const { return epoch_; }
  std::int64_t iter() const { return iter_; }
  /// Steps in one epoch, and in the whole run (OneCycleLR's total_steps).
  std::int64_t steps_per_epoch() const { return loader_.num_batches(); }

  /// The network's input from a batch of (N, 1, 32, 32) images on the device: cropped, flipped (drawing from
  /// minidl's CPU generator) and repeated to three channels, or only repeated without config.augment.
  minidl::Tensor input(const minidl::Tensor& gray) const;
  /// One training step on `x` (N, 3, 32, 32) and labels `y` on the device, eager: gradients zeroed, forward and
  /// loss (under --amp's autocast), backward, SGD's update. Returns the logits and the loss (on the device). The
  /// scheduler is not stepped.
  examples::StepOutputs step(const minidl::Tensor& x, const minidl::Tensor& y);

  /// Trains epoch epoch() + 1 over the training set (a seeded shuffle per epoch), then evaluates the test set.
  /// Throws Interrupted, NonFiniteLoss.
  EpochStats train_epoch();
  /// Mean loss and accuracy on the test set, in evaluation mode (BatchNorm's running statistics).
  PassStats evaluate();

  /// Writes the model to `path` (safetensors with torchvision's names; the model configuration, epoch, epochs,
  /// batch size, learning rate and seed in the metadata) and SGD's momentum buffers, the scheduler, the step
  /// count, GradScaler and RNG state to state_path(path).
  void save(const std::string& path) const;
  /// Restores what save() wrote. A checkpoint of another model, seed or schedule (--epochs, --batch-size, --lr,
  /// the training set's size) is a ValueError naming both values.
  void resume(const std::string& path);

 private:
  /// The step plus its loss and correct count added to the running sums on the device.
  void step_with_sums(const minidl::Tensor& x, const minidl::Tensor& y);
  /// Runs one batch: eagerly during the warm-up, on the CPU and for a smaller last batch, else by replaying (or
  /// first capturing) the graph; then steps the scheduler.
  void run_batch(const minidl::data::Batch& batch);
  bool takes_graph(std::int64_t batch_size) const;
  bool does_one_time_work(std::int64_t batch_size) const;
  void stop_if_requested() const;
  std::map<std::string, std::string> schedule_metadata() const;

  TrainConfig config_;
  std::shared_ptr<const examples::ImageSet> train_, test_;
  ResNet model_;
  std::unique_ptr<minidl::optim::SGD> optimizer_;
  minidl::data::DataLoader loader_;
  std::unique_ptr<minidl::data::DataLoader> test_loader_;
  std::unique_ptr<minidl::optim::OneCycleLR> scheduler_;
  std::unique_ptr<minidl::amp::GradScaler> scaler_;
  minidl::Tensor loss_sum_, correct_;  // the epoch's running sums on the device
  minidl::cuda::CUDAGraph graph_;
  minidl::Tensor static_x_, static_y_;  // the captured step reads its batch from here
  std::int64_t epoch_ = 0, iter_ = 0, eager_full_steps_ = 0;
  double last_step_lr_ = 0;  // the learning rate the last step ran with (the scheduler's is the next step's)
  std::set<std::int64_t> seen_batch_sizes_;
  examples::EpochClock clock_;
};

/// The checkpoint's companion file with the optimizer's, scheduler's, step and RNG state.
inline std::string state_path(const std::string& checkpoint) { return checkpoint + ".state"; }

}  // namespace resnet
