#include "trainer.h"

#include <minidl/io/checkpoint.h>
#include <minidl/io/safetensors.h>
#include <minidl/random.h>

#include <chrono>
#include <cmath>
#include <optional>

#include "amp_mode.h"
#include "augment.h"
#include "checkpoint_metadata.h"
#include "progress.h"

namespace resnet {

namespace F = minidl::nn::functional;
namespace optim = minidl::optim;
using minidl::Tensor;

namespace {

// Two eager steps before the capture: they choose the convolution algorithms and create SGD's momentum buffers,
// which a capture could not do (both allocate and synchronise).
constexpr std::int64_t kWarmupSteps = 2;

double elapsed_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Seeds, builds and initialises the model on the CPU (the same weights for every device), then moves it.
ResNet build_model(const TrainConfig& c) {
  minidl::manual_seed(c.seed);
  ResNet model(c.model);
  resnet_init(*model);
  model->to(c.device);
  return model;
}

minidl::data::DataLoaderOptions loader_options(const TrainConfig& c, std::int64_t batch_size, bool train) {
  // On a GPU the whole set (60000 x 4 KB) lives on the device and a batch is a gather there.
  return minidl::data::DataLoaderOptions()
      .set_batch_size(batch_size)
      .set_shuffle(train)
      .set_seed(c.seed)
      .set_device(c.device)
      .set_device_resident(c.device.is_cuda());
}

/// Throws NonFiniteLoss naming `what` (e.g. "epoch 3 step 120: the running training loss") when loss is NaN/Inf.
void check_finite(double loss, const std::string& what) {
  if (std::isfinite(loss)) return;
  throw NonFiniteLoss(what + " is " +
                      (std::isnan(loss) ? "NaN"
                       : loss > 0       ? "+Inf"
                                        : "-Inf") +
                      ": training stopped without saving these weights (the last checkpoint, if any, is unchanged). "
                      "Try a lower --lr");
}

}  // namespace

Interrupted::Interrupted(std::int64_t iter) : std::runtime_error("interrupted after step " + std::to_string(iter)) {}

Trainer::Trainer(TrainConfig config, std::shared_ptr<const examples::ImageSet> train,
                 std::shared_ptr<const examples::ImageSet> test)
    : config_(std::move(config)), train_(std::move(train)), test_(std::move(test)), model_(build_model(config_)),
      loader_(train_, loader_options(config_, config_.batch_size, true)), clock_([device = config_.device] {
        if (device.is_cuda()) minidl::cuda::synchronize(device.index());
      }) {
  MINIDL_CHECK(config_.epochs >= 1, minidl::ValueError, "resnet::Trainer: epochs must be >= 1 (OneCycleLR's length)");
  optimizer_ = std::make_unique<optim::SGD>(
      model_->parameters(),
      optim::SGDOptions(config_.lr).momentum(config_.momentum).nesterov(true).weight_decay(config_.weight_decay));
  // cycle_momentum off: the recipe's momentum stays 0.9 (OneCycleLR would swing it between 0.85 and 0.95).
  scheduler_ = std::make_unique<optim::OneCycleLR>(*optimizer_, config_.lr, config_.epochs * steps_per_epoch(), 0.3,
                                                   "cos", /*cycle_momentum=*/false);
  if (test_) {
    test_loader_ =
        std::make_unique<minidl::data::DataLoader>(test_, loader_options(config_, config_.test_batch_size, false));
  }
  if (examples::needs_grad_scaler(config_.amp)) {
    scaler_ = std::make_unique<minidl::amp::GradScaler>();
  }
  const auto dev = minidl::TensorOptions(minidl::kFloat32).device(config_.device);
  loss_sum_ = minidl::zeros({}, dev);
  correct_ = minidl::zeros({}, dev);
}

Tensor Trainer::input(const Tensor& gray) const {
  if (!config_.augment) return to_three_channels(gray);
  return crop_flip(gray, draw_crop_flip(gray.size(0), gray.device()), train_->background());
}

examples::StepOutputs Trainer::step(const Tensor& x, const Tensor& y) {
  optimizer_->zero_grad();
  return examples::train_step(*model_, *optimizer_, scaler_.get(), config_.amp, config_.device, x, y);
}

void Trainer::step_with_sums(const Tensor& x, const Tensor& y) {
  const examples::StepOutputs out =
      examples::train_step(*model_, *optimizer_, scaler_.get(), config_.amp, config_.device, x, y);
  minidl::NoGradGuard no_grad;
  loss_sum_.add_(out.loss.detach(), static_cast<double>(y.size(0)));
  correct_.add_(examples::correct_count(out.logits, y));
}

bool Trainer::takes_graph(std::int64_t batch_size) const {
  return config_.device.is_cuda() && config_.cuda_graph && batch_size == config_.batch_size;
}

bool Trainer::does_one_time_work(std::int64_t batch_size) const {
  return seen_batch_sizes_.count(batch_size) == 0 ||
         (takes_graph(batch_size) && !graph_.captured() && eager_full_steps_ >= kWarmupSteps);
}

void Trainer::run_batch(const minidl::data::Batch& batch) {
  const std::int64_t n = batch.target.size(0);
  seen_batch_sizes_.insert(n);
  const Tensor x = input(batch.data);
  if (!takes_graph(n) || eager_full_steps_ < kWarmupSteps) {
    optimizer_->zero_grad();
    step_with_sums(x, batch.target);
    if (n == config_.batch_size) ++eager_full_steps_;
  } else {
    if (!graph_.captured()) {
      static_x_ = minidl::empty_like(x);
      static_y_ = minidl::empty_like(batch.target);
      optimizer_->zero_grad();  // the captured backward then writes fresh gradient buffers that stay the graph's
      static_x_.copy_(x);
      static_y_.copy_(batch.target);
      graph_.capture_begin();
      step_with_sums(static_x_, static_y_);
      graph_.capture_end();
    } else {
      static_x_.copy_(x);
      static_y_.copy_(batch.target);
    }
    graph_.replay();
  }
  last_step_lr_ = scheduler_->get_last_lr();
  scheduler_->step();
}

void Trainer::stop_if_requested() const {
  if (config_.stop_requested && config_.stop_requested()) throw Interrupted(iter_);
}

EpochStats Trainer::train_epoch() {
  const auto t0 = std::chrono::steady_clock::now();
  EpochStats s;
  s.epoch = epoch_ + 1;
  model_->train();
  {
    minidl::NoGradGuard no_grad;
    loss_sum_.zero_();
    correct_.zero_();
  }
  std::optional<examples::Progress> progress;
  if (config_.progress) {
    progress.emplace("epoch " + std::to_string(s.epoch) + " " + config_.device.str(), loader_.num_batches(),
                     config_.batch_size);
  }
  const auto where = [&] { return "epoch " + std::to_string(s.epoch) + " step " + std::to_string(s.steps); };
  loader_.start_epoch(s.epoch);
  clock_.start();
  try {
    while (auto batch = loader_.next()) {
      const std::int64_t n = batch->target.size(0);
      if (does_one_time_work(n)) {
        clock_.one_time(n, [&] { run_batch(*batch); });
      } else {
        run_batch(*batch);
        clock_.steady(n);
      }
      ++iter_;
      ++s.steps;
      s.train.images += n;
      if (progress && progress->due()) {
        const double running = loss_sum_.item<float>() / static_cast<double>(s.train.images);
        check_finite(running, where() + ": the running training loss");
        progress->update(s.steps, running);
      }
      stop_if_requested();
    }
  } catch (...) {
    if (progress) progress->finish();  // ends the progress bar's line before the error is shown
    throw;
  }
  // Reading the sums waits for the device, so the time covers every queued step.
  const double images = static_cast<double>(s.train.images);
  s.train.loss = loss_sum_.item<float>() / images;
  s.train.accuracy = correct_.item<float>() / images;
  s.train.seconds = elapsed_since(t0);
  s.timing = clock_.finish(s.train.seconds);
  check_finite(s.train.loss, "epoch " + std::to_string(s.epoch) + ": the training loss");
  if (progress) {
    progress->update(s.steps, s.train.loss);
    progress->finish();
  }
  s.lr = last_step_lr_;
  epoch_ = s.epoch;
  if (test_) s.test = evaluate();
  return s;
}

PassStats Trainer::evaluate() {
  MINIDL_CHECK(test_loader_ != nullptr, minidl::ValueError, "resnet::Trainer::evaluate: no test set");
  const auto t0 = std::chrono::steady_clock::now();
  model_->eval();
  minidl::NoGradGuard no_grad;
  const auto dev = minidl::TensorOptions(minidl::kFloat32).device(config_.device);
  Tensor loss_sum = minidl::zeros({}, dev), correct = minidl::zeros({}, dev);
  PassStats s;
  test_loader_->start_epoch(0);
  while (auto batch = test_loader_->next()) {
    Tensor logits, loss;
    {
      examples::AmpRegion region(config_.amp, config_.device);  // evaluated as trained
      logits = model_(to_three_channels(batch->data));
      loss = F::cross_entropy(logits, batch->target, minidl::nn::Reduction::Sum);
    }
    loss_sum.add_(loss);
    correct.add_(examples::correct_count(logits, batch->target));
    s.images += batch->target.size(0);
    stop_if_requested();
  }
  s.loss = loss_sum.item<float>() / static_cast<double>(s.images);
  s.accuracy = correct.item<float>() / static_cast<double>(s.images);
  s.seconds = elapsed_since(t0);
  model_->train();
  check_finite(s.loss, "the test loss after epoch " + std::to_string(epoch_));
  return s;
}

std::map<std::string, std::string> Trainer::schedule_metadata() const {
  return {{"resnet.seed", std::to_string(config_.seed)},
          {"resnet.lr", examples::exact_text(config_.lr)},
          {"resnet.total_steps", std::to_string(scheduler_->total_steps())}};
}

void Trainer::save(const std::string& path) const {
  std::map<std::string, std::string> meta = model_->config().to_metadata();
  for (const auto& [key, value] : schedule_metadata()) meta[key] = value;
  meta["resnet.epoch"] = std::to_string(epoch_);
  meta["resnet.epochs"] = std::to_string(config_.epochs);
  meta["resnet.batch_size"] = std::to_string(config_.batch_size);
  minidl::io::save(*model_, path, meta);
  minidl::io::TrainingState st;
  st.epoch = epoch_;
  st.optimizer = optimizer_->state_dict();
  st.scheduler = scheduler_->state_dict();
  st.rng = minidl::get_rng_state();
  st.extra["iter"] = std::to_string(iter_);
  if (scaler_) examples::save_grad_scaler(*scaler_, st.extra);
  minidl::io::save_training_state(state_path(path), st);
}

void Trainer::resume(const std::string& path) {
  const minidl::io::SafetensorsContents file = minidl::io::read_safetensors(path);
  const ModelConfig saved = ModelConfig::from_metadata(file.metadata, path);
  MINIDL_CHECK(saved == model_->config(), minidl::ValueError, "--resume ", path, " holds a model of ", saved.str(),
               ", but the flags give ", model_->config().str());
  // The data order, the augmentation's draws and OneCycleLR's curve follow these; another value would silently
  // train a different run.
  const std::map<std::string, std::string> why = {
      {"resnet.seed", "--seed"},
      {"resnet.lr", "--lr"},
      {"resnet.total_steps", "steps in all (--epochs x the steps per epoch of --batch-size and --train-limit)"}};
  for (const auto& [key, value] : schedule_metadata()) {
    const auto it = file.metadata.find(key);
    MINIDL_CHECK(it != file.metadata.end() && it->second == value, minidl::ValueError, "--resume ", path,
                 " was trained with ", why.at(key), " ",
                 it == file.metadata.end() ? std::string("(none recorded)") : it->second, ", but the flags give ",
                 value);
  }
  minidl::io::load(*model_, path);
  const minidl::io::TrainingState st = minidl::io::load_training_state(state_path(path));
  optimizer_->load_state_dict(st.optimizer);
  scheduler_->load_state_dict(st.scheduler);
  if (scaler_) examples::load_grad_scaler(*scaler_, st.extra);
  minidl::set_rng_state(st.rng);
  epoch_ = st.epoch;
  iter_ = static_cast<std::int64_t>(examples::extra_number(st.extra, "iter", state_path(path), "resnet --save"));
}

}  // namespace resnet
