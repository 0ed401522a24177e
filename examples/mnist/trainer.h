#pragma once
// Trains and evaluates the example CNN on one device (or, with TrainConfig::group, on one rank of a
// data-parallel job). Everything a step computes stays on the device; the
// running loss and accuracy are read back only when the progress display is due and once per epoch.
#include <minidl/distributed/ddp.h>
#include <minidl/minidl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "classifier_step.h"
#include "epoch_clock.h"
#include "epoch_stats.h"
#include "net.h"

namespace mnist {

struct TrainConfig {
  minidl::Device device{minidl::kCPU};
  std::int64_t epochs = 1;
  std::int64_t batch_size = 64;
  double lr = 0.05;
  double momentum = 0.9;
  std::string optimizer = "sgd";
  std::uint64_t seed = 1;
  std::int64_t test_batch_size = 1000;
  bool progress = true;
  bool data_on_device = true;  // GPU: keep the whole dataset resident and gather batches there
  bool cuda_graph = true;      // GPU: capture the whole training step once and replay it per batch
  bool drop_last = false;      // skip the last, smaller training batch
  /// --amp: the autocast dtype (bfloat16 or float16) of the forward pass and the loss in training and evaluation;
  /// none: float32 (classifier_step.h).
  std::optional<minidl::DType> amp;
  /// With float16: the GradScaler's options (PyTorch's defaults).
  minidl::amp::GradScalerOptions grad_scaler;
  /// Add each step's loss and correct count to running sums on the device, for the progress bar's running loss
  /// and the epoch's training loss and accuracy (then NaN without it; needs progress off). The benchmarks turn it
  /// off to time the same work as PyTorch's reference step: forward, loss, backward, update.
  bool step_metrics = true;
  /// Polled after every step and evaluation batch; when it returns true the trainer throws Interrupted.
  std::function<bool()> stop_requested;
  /// Data parallel (device must be group->device()): each rank trains on its DistributedSampler shard with
  /// batch_size per rank, gradients are averaged by DistributedDataParallel, and the epoch's metrics are summed
  /// over all ranks.
  std::shared_ptr<minidl::distributed::ProcessGroup> group;
};

/// Training stopped at the user's request (TrainConfig::stop_requested) after `step` steps of `epoch`
/// (step 0: before the epoch began). Nothing of the unfinished epoch is kept.
class Interrupted : public std::runtime_error {
 public:
  Interrupted(std::int64_t epoch, std::int64_t step);
  std::int64_t epoch() const { return epoch_; }
  std::int64_t step() const { return step_; }

 private:
  std::int64_t epoch_, step_;
};

/// The loss read back from the device is NaN or Inf: the weights are no longer usable, so nothing may be saved
/// from them (the last checkpoint stays the last good one).
class NonFiniteLoss : public minidl::Error {
 public:
  using minidl::Error::Error;
};

struct EpochResult {
  std::int64_t epoch = 0;
  EpochStats train, test;
};

/// Builds the optimizer named by config.optimizer (sgd, adam, adamw, adadelta) over `params`.
std::unique_ptr<minidl::optim::Optimizer> make_optimizer(const TrainConfig& config, std::vector<minidl::Tensor> params);

class Trainer {
 public:
  Trainer(TrainConfig config, std::shared_ptr<const minidl::data::Dataset> train_set,
          std::shared_ptr<const minidl::data::Dataset> test_set);

  Net& model() { return model_; }
  minidl::optim::Optimizer& optimizer() { return *optimizer_; }
  const TrainConfig& config() const { return config_; }
  /// The float16 run's GradScaler; null for bfloat16 and float32.
  minidl::amp::GradScaler* grad_scaler() { return scaler_.get(); }

  /// Throws Interrupted when stopped, NonFiniteLoss when the running or final training loss is not finite.
  /// The stats' timing splits the epoch's seconds into the steady state and the one-time work of its steps
  /// (does_one_time_work), which the first epoch holds.
  EpochStats train_epoch(std::int64_t epoch);
  /// Throws Interrupted when stopped, NonFiniteLoss when the test loss is not finite.
  EpochStats evaluate();
  /// Nodes (kernels, copies) of the captured training step; 0 while the step runs eagerly.
  std::size_t graph_nodes() const { return graph_.num_nodes(); }

 private:
  /// Forward, loss, backward, optimizer update, and the running sums — the whole step.
  void step(const minidl::Tensor& x, const minidl::Tensor& y);
  /// Runs one batch: eagerly during warm-up and for odd-sized batches, else by replaying the captured step.
  void run_batch(const minidl::data::Batch& batch);
  /// Whether run_batch(batch) would do one-time work: the first step of its batch size, an eager warm-up step
  /// before the capture, or the capture itself.
  bool does_one_time_work(const minidl::data::Batch& batch) const;
  /// Whether a batch of this size replays the captured step once the warm-up is done.
  bool takes_graph(std::int64_t batch_size) const;
  /// Throws Interrupted when config.stop_requested says so.
  void stop_if_requested() const;
  /// The epoch's statistics from device sums over `seen` samples of this rank (of all ranks with a group). The
  /// seconds run from `start` until the sums are read, i.e. until the device has finished the epoch's work.
  EpochStats finish_stats(const minidl::Tensor& loss_sum, const minidl::Tensor& correct, std::int64_t seen,
                          const std::string& where, std::chrono::steady_clock::time_point start) const;

  TrainConfig config_;
  Net model_;
  std::unique_ptr<minidl::nn::parallel::DistributedDataParallel> ddp_;  // with config.group
  std::unique_ptr<minidl::optim::Optimizer> optimizer_;
  std::unique_ptr<minidl::amp::GradScaler> scaler_;  // with config.amp float16
  minidl::data::DataLoader train_loader_, test_loader_;
  minidl::Tensor loss_sum_, correct_;  // device accumulators of the current epoch
  minidl::cuda::CUDAGraph graph_;
  minidl::Tensor static_x_, static_y_;  // the captured step reads its batch from here
  std::int64_t eager_steps_ = 0;
  std::set<std::int64_t> seen_batch_sizes_;
  examples::EpochClock epoch_clock_;
  std::int64_t epoch_ = 0, steps_ = 0;  // the epoch being (or last) trained and its steps done, for Interrupted
};

}  // namespace mnist
