#pragma once
// Trains the DCGAN of model.h on one device as PyTorch's DCGAN tutorial does, step by step: the discriminator's
// update on a real batch and on G(z) (z fresh N(0, 1) latent vectors), then the generator's update through the
// just-updated discriminator on the same G(z), with binary cross entropy on logits and an Adam optimizer per
// network. The latent vectors are drawn from minidl's CPU generator and copied to the device, so the CPU and the
// GPU train on the same numbers from the same seed (a (128, 100) upload per step costs nothing next to the
// step). The step's statistics stay on the device until an interval ends or the progress display is due.
#include <minidl/minidl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include "data.h"
#include "epoch_clock.h"
#include "model.h"

namespace dcgan {

struct TrainConfig {
  minidl::Device device{minidl::kCPU};
  ModelConfig model;
  std::int64_t batch_size = 128;
  double lr = 2e-4, beta1 = 0.5, beta2 = 0.999;
  std::uint64_t seed = 1;
  /// Steps per IntervalStats handed to train_epoch's callback.
  std::int64_t log_every = 50;
  bool progress = true;
  /// Polled after every step; when it returns true the trainer throws Interrupted.
  std::function<bool()> stop_requested;
};

/// Samples in the fixed latent batch whose images are drawn after every epoch.
inline constexpr std::int64_t kFixedSamples = 64;

/// One step's quantities as 0-d tensors on the device.
struct StepTensors {
  minidl::Tensor loss_d, loss_g, d_x, d_g_z1, d_g_z2;
};

/// Means over some steps of what DCGAN's training loop prints.
struct GanStats {
  double loss_d = 0, loss_g = 0, d_x = 0, d_g_z1 = 0, d_g_z2 = 0;
};

/// Steps (iter - steps, iter] of `epoch`: their means and wall time; elapsed_seconds is the training time so far.
struct IntervalStats {
  std::int64_t epoch = 0, iter = 0, steps = 0;
  GanStats means;
  double seconds = 0, elapsed_seconds = 0;
};

struct EpochStats {
  std::int64_t epoch = 0, steps = 0, images = 0;
  GanStats means;
  double seconds = 0;
  /// The seconds split into steady state and one-time work (the first step of each batch size).
  examples::EpochTiming timing;
};

/// Training stopped at the user's request (TrainConfig::stop_requested) after `iter` steps.
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
  /// Seeds minidl's generators with config.seed, builds the model on the CPU with DCGAN's initialisation (so
  /// every device starts from the same weights), draws the fixed latent batch, then moves both to config.device.
  Trainer(TrainConfig config, std::shared_ptr<const ImageSet> data);

  DCGAN& model() { return model_; }
  Generator& generator() { return model_->generator; }
  Discriminator& discriminator() { return model_->discriminator; }
  minidl::optim::Adam& optimizer_d() { return *optimizer_d_; }
  minidl::optim::Adam& optimizer_g() { return *optimizer_g_; }
  const TrainConfig& config() const { return config_; }
  /// Epochs finished, and steps done since the start of training.
  std::int64_t epoch() const { return epoch_; }
  std::int64_t iter() const { return iter_; }
  /// The latent batch of the per-epoch pictures: (kFixedSamples, latent, 1, 1) on the device.
  const minidl::Tensor& fixed_noise() const { return fixed_noise_; }

  /// n latent vectors (n, latent, 1, 1) from N(0, 1), drawn on the CPU and copied to the device.
  minidl::Tensor draw_noise(std::int64_t n) const;
  /// The discriminator's update: its gradients zeroed, BCE(D(real), 1) and BCE(D(G(noise).detach()), 0) each
  /// back-propagated, Adam's step. Returns G(noise) (still attached to the generator's graph) for
  /// update_generator, and fills out's loss_d, d_x, d_g_z1.
  minidl::Tensor update_discriminator(const minidl::Tensor& real, const minidl::Tensor& noise, StepTensors& out);
  /// The generator's update on `fake` from update_discriminator: its gradients zeroed, BCE(D(fake), 1)
  /// back-propagated (through the discriminator, whose gradients it also adds to, as the tutorial), Adam's step.
  /// Fills out's loss_g and d_g_z2.
  void update_generator(const minidl::Tensor& fake, StepTensors& out);
  /// Both updates: one training step.
  StepTensors step(const minidl::Tensor& real, const minidl::Tensor& noise);

  /// Trains epoch epoch() + 1 over the data (a seeded shuffle per epoch), calling `on_interval` every
  /// config.log_every steps and after the last. Throws Interrupted, NonFiniteLoss.
  EpochStats train_epoch(const std::function<void(const IntervalStats&)>& on_interval = {});
  /// G(fixed_noise()) without gradients, on the CPU, as the tutorial draws it: in training mode, so BatchNorm
  /// normalises with the 64 samples' own statistics.
  minidl::Tensor fixed_samples();

  /// Writes both networks to `path` (safetensors: generator.main.0.weight, ..., discriminator.main.0.weight,
  /// ...; the model configuration, epoch and seed in the metadata) and the two Adam states, epoch, step count,
  /// training time and RNG state to state_path(path).
  void save(const std::string& path) const;
  /// Restores what save() wrote. A checkpoint of another model configuration or seed is a ValueError naming both.
  void resume(const std::string& path);

 private:
  /// Runs one batch: the step, its statistics added to the device sums.
  void run_batch(const minidl::Tensor& real);

  TrainConfig config_;
  std::shared_ptr<const ImageSet> data_;
  DCGAN model_;
  std::unique_ptr<minidl::optim::Adam> optimizer_d_, optimizer_g_;
  minidl::data::DataLoader loader_;
  minidl::Tensor fixed_noise_;
  minidl::Tensor epoch_sums_, interval_sums_;  // device sums of the five StepTensors, in GanStats' order
  std::int64_t epoch_ = 0, iter_ = 0;
  double train_seconds_ = 0;
  std::set<std::int64_t> seen_batch_sizes_;
  examples::EpochClock clock_;
};

/// The checkpoint's companion file with the optimizers', step and RNG state.
inline std::string state_path(const std::string& checkpoint) { return checkpoint + ".state"; }

}  // namespace dcgan
