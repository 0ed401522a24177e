#pragma once
// Trains and evaluates the example CNN on one device. Everything a step computes stays on the device; the
// running loss and accuracy are read back only when the progress display is due and once per epoch.
#include <minidl/minidl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metrics.h"
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

  EpochStats train_epoch(std::int64_t epoch);
  EpochStats evaluate();
  /// Nodes (kernels, copies) of the captured training step; 0 while the step runs eagerly.
  std::size_t graph_nodes() const { return graph_.num_nodes(); }

 private:
  /// Forward, loss, backward, optimizer update, and the running sums — the whole step.
  void step(const minidl::Tensor& x, const minidl::Tensor& y);
  /// Runs one batch: eagerly during warm-up and for odd-sized batches, else by replaying the captured step.
  void run_batch(const minidl::data::Batch& batch);

  TrainConfig config_;
  Net model_;
  std::unique_ptr<minidl::optim::Optimizer> optimizer_;
  minidl::data::DataLoader train_loader_, test_loader_;
  minidl::Tensor loss_sum_, correct_;  // device accumulators of the current epoch
  minidl::cuda::CUDAGraph graph_;
  minidl::Tensor static_x_, static_y_;  // the captured step reads its batch from here
  std::int64_t eager_steps_ = 0;
};

}  // namespace mnist
