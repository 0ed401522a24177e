#include "trainer.h"

#include <minidl/io/checkpoint.h>
#include <minidl/io/safetensors.h>
#include <minidl/random.h>

#include <cmath>
#include <optional>

#include "checkpoint_metadata.h"
#include "progress.h"

namespace dcgan {

namespace F = minidl::nn::functional;
namespace optim = minidl::optim;
using minidl::Tensor;

namespace {

double elapsed_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Seeds, builds and initialises the model on the CPU (the same weights for every device), then moves it.
DCGAN build_model(const TrainConfig& c) {
  minidl::manual_seed(c.seed);
  DCGAN model(c.model);
  dcgan_init(*model);
  return model;
}

std::unique_ptr<optim::Adam> make_adam(const TrainConfig& c, const std::vector<Tensor>& params) {
  return std::make_unique<optim::Adam>(params, optim::AdamOptions(c.lr).betas(std::make_tuple(c.beta1, c.beta2)));
}

minidl::data::DataLoaderOptions loader_options(const TrainConfig& c) {
  // On a GPU the whole set (60000 x 4 KB) lives on the device and a batch is a gather there.
  return minidl::data::DataLoaderOptions()
      .set_batch_size(c.batch_size)
      .set_shuffle(true)
      .set_seed(c.seed)
      .set_device(c.device)
      .set_device_resident(c.device.is_cuda());
}

GanStats stats_from(const Tensor& sums, std::int64_t steps) {
  const std::vector<double> v = sums.to(minidl::kFloat64).cpu().to_vector<double>();
  const double n = static_cast<double>(steps);
  return {v[0] / n, v[1] / n, v[2] / n, v[3] / n, v[4] / n};
}

void check_finite(const GanStats& s, const std::string& where) {
  for (const auto& [name, value] : {std::pair<const char*, double>{"discriminator loss", s.loss_d},
                                    std::pair<const char*, double>{"generator loss", s.loss_g}}) {
    if (std::isfinite(value)) continue;
    throw NonFiniteLoss(where + ": the " + name + " is " +
                        (std::isnan(value) ? "NaN"
                         : value > 0       ? "+Inf"
                                           : "-Inf") +
                        ": training stopped without saving these weights (the last checkpoint, if any, is "
                        "unchanged). Try a lower --lr");
  }
}

}  // namespace

Interrupted::Interrupted(std::int64_t iter) : std::runtime_error("interrupted after step " + std::to_string(iter)) {}

Trainer::Trainer(TrainConfig config, std::shared_ptr<const ImageSet> data)
    : config_(std::move(config)), data_(std::move(data)), model_(build_model(config_)),
      loader_(data_, loader_options(config_)), clock_([device = config_.device] {
        if (device.is_cuda()) minidl::cuda::synchronize(device.index());
      }) {
  fixed_noise_ = draw_noise(kFixedSamples);
  model_->to(config_.device);
  optimizer_d_ = make_adam(config_, model_->discriminator->parameters());
  optimizer_g_ = make_adam(config_, model_->generator->parameters());
  const auto dev = minidl::TensorOptions(minidl::kFloat32).device(config_.device);
  epoch_sums_ = minidl::zeros({5}, dev);
  interval_sums_ = minidl::zeros({5}, dev);
}

Tensor Trainer::draw_noise(std::int64_t n) const {
  return minidl::randn({n, config_.model.latent, 1, 1}).to(config_.device);
}

Tensor Trainer::update_discriminator(const Tensor& real, const Tensor& noise, StepTensors& out) {
  Discriminator& D = model_->discriminator;
  const auto dev = minidl::TensorOptions(minidl::kFloat32).device(config_.device);
  const std::int64_t n = real.size(0);
  optimizer_d_->zero_grad();
  const Tensor out_real = D(real);
  const Tensor loss_real = F::binary_cross_entropy_with_logits(out_real, minidl::ones({n}, dev));
  loss_real.backward();
  const Tensor fake = model_->generator(noise);
  const Tensor out_fake = D(fake.detach());
  const Tensor loss_fake = F::binary_cross_entropy_with_logits(out_fake, minidl::zeros({n}, dev));
  loss_fake.backward();
  optimizer_d_->step();
  minidl::NoGradGuard no_grad;
  out.loss_d = loss_real.detach() + loss_fake.detach();
  out.d_x = minidl::sigmoid(out_real.detach()).mean();
  out.d_g_z1 = minidl::sigmoid(out_fake.detach()).mean();
  return fake;
}

void Trainer::update_generator(const Tensor& fake, StepTensors& out) {
  const auto dev = minidl::TensorOptions(minidl::kFloat32).device(config_.device);
  optimizer_g_->zero_grad();
  const Tensor out_fake = model_->discriminator(fake);
  // The generator wants its images taken for real: the target is 1 (the non-saturating loss of the paper).
  const Tensor loss_g = F::binary_cross_entropy_with_logits(out_fake, minidl::ones({fake.size(0)}, dev));
  loss_g.backward();
  optimizer_g_->step();
  minidl::NoGradGuard no_grad;
  out.loss_g = loss_g.detach();
  out.d_g_z2 = minidl::sigmoid(out_fake.detach()).mean();
}

StepTensors Trainer::step(const Tensor& real, const Tensor& noise) {
  StepTensors s;
  const Tensor fake = update_discriminator(real, noise, s);
  update_generator(fake, s);
  return s;
}

void Trainer::run_batch(const Tensor& real) {
  const StepTensors s = step(real, draw_noise(real.size(0)));
  minidl::NoGradGuard no_grad;
  const Tensor values = minidl::stack({s.loss_d, s.loss_g, s.d_x, s.d_g_z1, s.d_g_z2});
  epoch_sums_.add_(values);
  interval_sums_.add_(values);
}

EpochStats Trainer::train_epoch(const std::function<void(const IntervalStats&)>& on_interval) {
  const auto t0 = std::chrono::steady_clock::now();
  EpochStats s;
  s.epoch = epoch_ + 1;
  model_->train();
  {
    minidl::NoGradGuard no_grad;
    epoch_sums_.zero_();
    interval_sums_.zero_();
  }
  std::optional<examples::Progress> progress;
  if (config_.progress) {
    progress.emplace("epoch " + std::to_string(s.epoch) + " " + config_.device.str(), loader_.num_batches(),
                     config_.batch_size);
  }
  const auto where = [&] { return "epoch " + std::to_string(s.epoch) + " step " + std::to_string(s.steps); };
  auto interval_start = t0;
  std::int64_t interval_steps = 0;
  double seconds_before = train_seconds_;
  const auto end_interval = [&] {
    if (interval_steps == 0) return;
    IntervalStats is;
    is.epoch = s.epoch;
    is.iter = iter_;
    is.steps = interval_steps;
    is.means = stats_from(interval_sums_, interval_steps);  // waits for the device
    is.seconds = elapsed_since(interval_start);
    is.elapsed_seconds = seconds_before + elapsed_since(t0);
    check_finite(is.means, where());
    if (on_interval) on_interval(is);
    minidl::NoGradGuard no_grad;
    interval_sums_.zero_();
    interval_steps = 0;
    interval_start = std::chrono::steady_clock::now();
  };
  loader_.start_epoch(s.epoch);
  clock_.start();
  try {
    while (auto batch = loader_.next()) {
      const std::int64_t n = batch->data.size(0);
      if (seen_batch_sizes_.insert(n).second) {
        clock_.one_time(n, [&] { run_batch(batch->data); });
      } else {
        run_batch(batch->data);
        clock_.steady(n);
      }
      ++iter_;
      ++s.steps;
      ++interval_steps;
      s.images += n;
      if (interval_steps == config_.log_every) end_interval();
      if (progress && progress->due()) {
        const GanStats running = stats_from(epoch_sums_, s.steps);
        check_finite(running, where());
        progress->update(s.steps, {{"loss_D", running.loss_d}, {"loss_G", running.loss_g}});
      }
      if (config_.stop_requested && config_.stop_requested()) throw Interrupted(iter_);
    }
    end_interval();
  } catch (...) {
    if (progress) progress->finish();
    throw;
  }
  s.means = stats_from(epoch_sums_, s.steps);  // waits for the device, so the time covers every queued step
  s.seconds = elapsed_since(t0);
  s.timing = clock_.finish(s.seconds);
  check_finite(s.means, "epoch " + std::to_string(s.epoch));
  if (progress) {
    progress->update(s.steps, {{"loss_D", s.means.loss_d}, {"loss_G", s.means.loss_g}});
    progress->finish();
  }
  train_seconds_ = seconds_before + s.seconds;
  epoch_ = s.epoch;
  return s;
}

Tensor Trainer::fixed_samples() {
  minidl::NoGradGuard no_grad;
  model_->generator->train();
  return model_->generator(fixed_noise_).cpu();
}

void Trainer::save(const std::string& path) const {
  std::map<std::string, std::string> meta = model_->config().to_metadata();
  meta["dcgan.epoch"] = std::to_string(epoch_);
  meta["dcgan.seed"] = std::to_string(config_.seed);
  minidl::io::save(*model_, path, meta);
  minidl::io::TrainingState st;
  st.epoch = epoch_;
  for (const auto& [name, t] : optimizer_d_->state_dict()) st.optimizer["discriminator." + name] = t;
  for (const auto& [name, t] : optimizer_g_->state_dict()) st.optimizer["generator." + name] = t;
  st.rng = minidl::get_rng_state();
  st.extra["iter"] = std::to_string(iter_);
  st.extra["train_seconds"] = std::to_string(train_seconds_);
  minidl::io::save_training_state(state_path(path), st);
}

void Trainer::resume(const std::string& path) {
  const minidl::io::SafetensorsContents file = minidl::io::read_safetensors(path);
  const ModelConfig saved = ModelConfig::from_metadata(file.metadata, path);
  MINIDL_CHECK(saved == model_->config(), minidl::ValueError, "--resume ", path, " holds a model of ", saved.str(),
               ", but the flags give ", model_->config().str());
  const auto seed = file.metadata.find("dcgan.seed");
  MINIDL_CHECK(seed != file.metadata.end() && seed->second == std::to_string(config_.seed), minidl::ValueError,
               "--resume ", path, " was trained with --seed ",
               seed == file.metadata.end() ? std::string("(none recorded)") : seed->second, ", but the flags give ",
               config_.seed, " (the data order and the fixed samples follow the seed)");
  minidl::io::load(*model_, path);
  const minidl::io::TrainingState st = minidl::io::load_training_state(state_path(path));
  std::map<std::string, Tensor> d, g;
  for (const auto& [name, t] : st.optimizer) {
    if (name.rfind("discriminator.", 0) == 0)
      d[name.substr(14)] = t;
    else if (name.rfind("generator.", 0) == 0)
      g[name.substr(10)] = t;
    else
      throw minidl::FormatError(state_path(path) + ": optimizer entry " + name +
                                " belongs to neither the discriminator nor the generator");
  }
  optimizer_d_->load_state_dict(d);
  optimizer_g_->load_state_dict(g);
  minidl::set_rng_state(st.rng);
  epoch_ = st.epoch;
  iter_ = static_cast<std::int64_t>(examples::extra_number(st.extra, "iter", state_path(path), "dcgan --save"));
  train_seconds_ = examples::extra_number(st.extra, "train_seconds", state_path(path), "dcgan --save");
}

}  // namespace dcgan
