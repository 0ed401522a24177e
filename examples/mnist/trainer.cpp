#include "trainer.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "progress.h"

namespace mnist {

namespace F = minidl::nn::functional;
using minidl::Tensor;

std::unique_ptr<minidl::optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Tensor> params) {
  namespace optim = minidl::optim;
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions(c.lr).momentum(c.momentum));
  if (c.optimizer == "adam") return std::make_unique<optim::Adam>(params, optim::AdamOptions(c.lr));
  if (c.optimizer == "adamw") return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(c.lr));
  if (c.optimizer == "adadelta") return std::make_unique<optim::Adadelta>(params, optim::AdadeltaOptions(c.lr));
  throw minidl::ValueError("unknown optimizer \"" + c.optimizer + "\" (expected sgd, adam, adamw or adadelta)");
}

namespace {

minidl::data::DataLoaderOptions loader_options(const TrainConfig& c, std::int64_t batch, bool train,
                                               const minidl::data::Dataset& set) {
  minidl::data::DataLoaderOptions o;
  o.set_batch_size(batch).set_shuffle(train).set_drop_last(train && c.drop_last).set_seed(c.seed).set_device(c.device);
  o.set_device_resident(c.device.is_cuda() && c.data_on_device);
  if (c.group) {
    // Every rank gets the same number of samples (padded like PyTorch), so all run the same number of steps.
    o.set_sampler(std::make_shared<minidl::data::DistributedSampler>(set.size(), c.group->size(), c.group->rank(),
                                                                     train, c.seed));
  }
  return o;
}

double elapsed_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Throws NonFiniteLoss naming `what` (e.g. "epoch 3 step 120: the running training loss") when loss is NaN/Inf.
void check_finite(double loss, const std::string& what) {
  if (std::isfinite(loss)) return;
  throw NonFiniteLoss(what + " is " + (std::isnan(loss) ? "NaN" : loss > 0 ? "+Inf" : "-Inf") +
                      ": training stopped without saving anything from this epoch (the last checkpoint, if any, is "
                      "unchanged). Try a lower --lr, or --detect-anomaly to find the op that first produces NaN/Inf");
}

}  // namespace

Interrupted::Interrupted(std::int64_t epoch, std::int64_t step)
    : std::runtime_error("interrupted after epoch " + std::to_string(epoch) + " step " + std::to_string(step)),
      epoch_(epoch),
      step_(step) {}

void Trainer::stop_if_requested() const {
  if (config_.stop_requested && config_.stop_requested()) throw Interrupted(epoch_, steps_);
}

Trainer::Trainer(TrainConfig config, std::shared_ptr<const minidl::data::Dataset> train_set,
                 std::shared_ptr<const minidl::data::Dataset> test_set)
    : config_(std::move(config)),
      model_(),
      train_loader_(train_set, loader_options(config_, config_.batch_size, true, *train_set)),
      test_loader_(test_set, loader_options(config_, config_.test_batch_size, false, *test_set)),
      epoch_clock_([device = config_.device] {
        if (device.is_cuda()) minidl::cuda::synchronize(device.index());
      }) {
  if (config_.progress && !config_.step_metrics) {
    throw std::invalid_argument("Trainer: the progress bar shows the running loss, which needs step_metrics");
  }
  model_->to(config_.device);
  // Rank 0's initial weights go to every rank; the optimizer then holds the same parameters everywhere.
  if (config_.group) ddp_ = std::make_unique<minidl::nn::parallel::DistributedDataParallel>(model_.ptr(), config_.group);
  optimizer_ = make_optimizer(config_, model_->parameters());
  if (examples::needs_grad_scaler(config_.amp)) scaler_ = std::make_unique<minidl::amp::GradScaler>(config_.grad_scaler);
  const auto dev = minidl::TensorOptions(minidl::kFloat32).device(config_.device);
  loss_sum_ = minidl::zeros({}, dev);
  correct_ = minidl::zeros({}, dev);
}

void Trainer::step(const Tensor& x, const Tensor& y) {
  const examples::StepOutputs out = examples::train_step(*model_, *optimizer_, scaler_.get(), config_.amp, config_.device, x, y);
  if (!config_.step_metrics) return;
  minidl::NoGradGuard no_grad;
  loss_sum_.add_(out.loss.detach(), static_cast<double>(y.size(0)));
  correct_.add_(examples::correct_count(out.logits, y));
}

namespace {
// Two eager steps before the capture: they choose the cuDNN algorithms and create the optimizer state, which a
// capture could not do (both allocate and synchronise).
constexpr std::int64_t kWarmupSteps = 2;
}  // namespace

bool Trainer::takes_graph(std::int64_t batch_size) const {
  // Anomaly detection reads every op's output back, which a graph capture cannot do.
  return config_.device.is_cuda() && config_.cuda_graph && batch_size == config_.batch_size &&
         !minidl::autograd::detect_anomaly();
}

bool Trainer::does_one_time_work(const minidl::data::Batch& batch) const {
  const std::int64_t n = batch.target.size(0);
  return seen_batch_sizes_.count(n) == 0 || (takes_graph(n) && !graph_.captured());
}

void Trainer::run_batch(const minidl::data::Batch& batch) {
  const bool full = batch.target.size(0) == config_.batch_size;
  seen_batch_sizes_.insert(batch.target.size(0));
  const bool use_graph = takes_graph(batch.target.size(0)) && eager_steps_ >= kWarmupSteps;
  if (!use_graph) {
    optimizer_->zero_grad();
    step(batch.data, batch.target);
    if (full) ++eager_steps_;
    return;
  }
  if (!graph_.captured()) {
    static_x_ = minidl::empty_like(batch.data);
    static_y_ = minidl::empty_like(batch.target);
    optimizer_->zero_grad();  // the captured backward then writes fresh gradient buffers that stay the graph's
    static_x_.copy_(batch.data);
    static_y_.copy_(batch.target);
    graph_.capture_begin();
    step(static_x_, static_y_);
    graph_.capture_end();
  } else {
    static_x_.copy_(batch.data);
    static_y_.copy_(batch.target);
  }
  graph_.replay();
}

EpochStats Trainer::train_epoch(std::int64_t epoch) {
  const auto t0 = std::chrono::steady_clock::now();
  model_->train();
  {
    minidl::NoGradGuard no_grad;
    loss_sum_.zero_();
    correct_.zero_();
  }
  std::int64_t seen = 0, batches = 0;
  epoch_ = epoch;
  steps_ = 0;
  stop_if_requested();
  examples::Progress progress("epoch " + std::to_string(epoch) + " " + config_.device.str(), train_loader_.num_batches(),
                    config_.batch_size);
  const auto where = [&] { return "epoch " + std::to_string(epoch) + " step " + std::to_string(batches); };
  train_loader_.start_epoch(epoch);
  epoch_clock_.start();
  try {
    while (auto batch = train_loader_.next()) {
      const std::int64_t n = batch->target.size(0);
      if (does_one_time_work(*batch)) {
        epoch_clock_.one_time(n, [&] { run_batch(*batch); });
      } else {
        run_batch(*batch);
        epoch_clock_.steady(n);
      }
      seen += n;
      steps_ = ++batches;
      if (config_.progress && progress.due()) {
        const double running = loss_sum_.item<float>() / static_cast<double>(seen);
        check_finite(running, where() + ": the running training loss");
        progress.update(batches, running);
      }
      stop_if_requested();
    }
  } catch (...) {
    if (config_.progress) progress.finish();  // ends the progress bar's line before the error is shown
    throw;
  }
  if (!config_.step_metrics) {
    // Nothing to read back: wait for the queued steps, so that the time covers them.
    if (config_.device.is_cuda()) minidl::cuda::synchronize(config_.device.index());
    EpochStats s;
    s.loss = s.accuracy = std::numeric_limits<double>::quiet_NaN();
    s.seconds = elapsed_since(t0);
    s.images_per_s = static_cast<double>(seen) / s.seconds;
    s.timing = epoch_clock_.finish(s.seconds);
    return s;
  }
  EpochStats s = finish_stats(loss_sum_, correct_, seen, where() + ": the epoch's training loss", t0);
  s.timing = epoch_clock_.finish(s.seconds);
  if (config_.progress) {
    progress.update(batches, s.loss);
    progress.finish();
  }
  return s;
}

EpochStats Trainer::evaluate() {
  const auto t0 = std::chrono::steady_clock::now();
  model_->eval();
  minidl::NoGradGuard no_grad;
  const auto dev = minidl::TensorOptions(minidl::kFloat32).device(config_.device);
  Tensor loss_sum = minidl::zeros({}, dev), correct = minidl::zeros({}, dev);
  std::int64_t seen = 0;
  test_loader_.start_epoch(0);
  while (auto batch = test_loader_.next()) {
    Tensor logits, loss;
    {
      examples::AmpRegion region(config_.amp, config_.device);  // evaluated as trained
      logits = model_(batch->data);
      loss = F::cross_entropy(logits, batch->target, minidl::nn::Reduction::Sum);
    }
    loss_sum.add_(loss);
    correct.add_(examples::correct_count(logits, batch->target));
    seen += batch->target.size(0);
    stop_if_requested();
  }
  return finish_stats(loss_sum, correct, seen, "the test loss after epoch " + std::to_string(epoch_), t0);
}

EpochStats Trainer::finish_stats(const Tensor& loss_sum, const Tensor& correct, std::int64_t seen,
                                 const std::string& where, std::chrono::steady_clock::time_point start) const {
  // Reading the sums waits for the device: the epoch is done, so the clock stops only after it. (Stopping it
  // before, as an earlier version did, left out the queued work the host had not waited for: with CUDA-graph
  // replays the host runs far ahead of the device.) With a group the sums are over the ranks, which all saw
  // `seen` samples (DistributedSampler gives every rank the same number).
  std::vector<double> sums;
  if (config_.group) {
    sums = minidl::distributed::all_reduce_sums(*config_.group, {loss_sum, correct});
    seen *= config_.group->size();
  } else {
    sums = {loss_sum.item<float>(), correct.item<float>()};
  }
  const double seconds = elapsed_since(start);
  EpochStats s;
  s.loss = sums[0] / static_cast<double>(seen);
  check_finite(s.loss, where);
  s.accuracy = sums[1] / static_cast<double>(seen);
  s.seconds = seconds;
  s.images_per_s = static_cast<double>(seen) / s.seconds;
  s.timing.seconds = s.timing.steady_seconds = seconds;
  return s;
}

}  // namespace mnist
