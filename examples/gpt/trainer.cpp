#include "trainer.h"

#include <minidl/io/checkpoint.h>
#include <minidl/io/safetensors.h>
#include <minidl/random.h>

#include <cmath>
#include <optional>

#include "progress.h"

namespace gpt {

namespace optim = minidl::optim;
using minidl::Tensor;

namespace {

// Two eager steps before the capture: they create the optimizer state and the gradient buffers' first
// allocations and run any algorithm search, none of which a capture could do.
constexpr std::int64_t kWarmupSteps = 2;

double elapsed_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_finite(double loss, const std::string& what) {
  if (std::isfinite(loss)) return;
  throw NonFiniteLoss(what + " is " +
                      (std::isnan(loss) ? "NaN"
                       : loss > 0       ? "+Inf"
                                        : "-Inf") +
                      ": training stopped without saving these weights (the last checkpoint, if any, is unchanged). "
                      "Try a lower --lr or a --grad-clip");
}

/// nanoGPT's configure_optimizers: weight decay for every parameter of two or more dims, none for the rest.
std::unique_ptr<optim::AdamW> make_optimizer(const Hyper& h, const std::vector<Tensor>& params) {
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  const auto options = [&](double wd) {
    return optim::AdamWOptions(h.lr).betas(std::make_tuple(h.beta1, h.beta2)).weight_decay(wd);
  };
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<optim::AdamWOptions>(options(h.weight_decay)));
  if (!no_decay.empty()) groups.emplace_back(no_decay, std::make_unique<optim::AdamWOptions>(options(0.0)));
  return std::make_unique<optim::AdamW>(std::move(groups), options(h.weight_decay));
}

GPT build_model(const TrainConfig& c, std::int64_t vocab_size) {
  minidl::manual_seed(c.seed);
  GPT model(gpt_config(c.hyper, vocab_size));
  model->to(c.device);
  return model;
}

}  // namespace

GPTConfig gpt_config(const Hyper& h, std::int64_t vocab_size) {
  GPTConfig c;
  c.vocab_size = vocab_size;
  c.block_size = h.block_size;
  c.n_layer = h.n_layer;
  c.n_head = h.n_head;
  c.n_embd = h.n_embd;
  c.dropout = h.dropout;
  c.bias = h.bias;
  return c;
}

double learning_rate(const Hyper& h, std::int64_t it) {
  if (it < h.warmup) return h.lr * static_cast<double>(it + 1) / static_cast<double>(h.warmup + 1);
  if (it > h.iters || h.iters <= h.warmup) return h.min_lr;
  const double ratio = static_cast<double>(it - h.warmup) / static_cast<double>(h.iters - h.warmup);
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return h.min_lr + coeff * (h.lr - h.min_lr);
}

Interrupted::Interrupted(std::int64_t iter)
    : std::runtime_error("interrupted after iteration " + std::to_string(iter)) {}

Trainer::Trainer(TrainConfig config, std::shared_ptr<const TokenData> data)
    : config_(std::move(config)), data_(std::move(data)), model_(build_model(config_, data_->vocab_size())),
      params_(model_->parameters()), optimizer_(make_optimizer(config_.hyper, params_)),
      clock_([device = config_.device] {
        if (device.is_cuda()) minidl::cuda::synchronize(device.index());
      }) {
  const auto dev = minidl::TensorOptions(minidl::kFloat32).device(config_.device);
  loss_sum_ = minidl::zeros({}, dev);
  if (examples::needs_grad_scaler(config_.amp)) scaler_ = std::make_unique<minidl::amp::GradScaler>();
}

bool Trainer::takes_graph() const {
  return config_.device.is_cuda() && config_.cuda_graph && !minidl::autograd::detect_anomaly();
}

bool Trainer::does_one_time_work() const {
  return iter_ == 0 || (takes_graph() && !graph_.captured()) || (!takes_graph() && eager_steps_ == 0);
}

void Trainer::step(const Tensor& x, const Tensor& y) {
  // Micro-batch i is rows [i b, (i + 1) b) of the step's batch; each backward adds its share (loss / K) of the
  // mean gradient into the gradients the first one created.
  const std::int64_t micro = config_.hyper.grad_accum, b = config_.hyper.batch_size;
  Tensor loss;
  for (std::int64_t i = 0; i < micro; ++i) {
    Tensor part;
    {
      examples::AmpRegion region(config_.amp, config_.device);
      part = GPTImpl::loss(model_(x.narrow(0, i * b, b)), y.narrow(0, i * b, b));
      if (micro > 1) part = part / static_cast<double>(micro);
    }
    if (scaler_) {
      scaler_->scale(part).backward();
    } else {
      part.backward();
    }
    minidl::NoGradGuard no_grad;
    loss = i == 0 ? part.detach() : loss + part.detach();
  }
  const bool clip = config_.hyper.grad_clip > 0;
  if (scaler_ && clip) scaler_->unscale_(*optimizer_);  // clip the true gradients, as PyTorch's recipe
  if (clip) minidl::nn::utils::clip_grad_norm_(params_, config_.hyper.grad_clip);
  if (scaler_) {
    scaler_->step(*optimizer_);  // skipped on the device when a gradient is inf or NaN
    scaler_->update();
  } else {
    optimizer_->step();
  }
  minidl::NoGradGuard no_grad;
  last_loss_ = loss;
  loss_sum_.add_(last_loss_);
}

void Trainer::run_iteration(const TokenBatch& batch, bool eager) {
  if (eager || !takes_graph() || eager_steps_ < kWarmupSteps) {
    optimizer_->zero_grad();
    step(batch.x.to(config_.device), batch.y.to(config_.device));
    ++eager_steps_;
    return;
  }
  if (!graph_.captured()) {
    static_x_ = minidl::empty_like(batch.x, minidl::TensorOptions(minidl::kInt64).device(config_.device));
    static_y_ = minidl::empty_like(batch.y, minidl::TensorOptions(minidl::kInt64).device(config_.device));
    optimizer_->zero_grad();  // the captured backward then writes fresh gradient buffers that stay the graph's
    static_x_.copy_(batch.x);
    static_y_.copy_(batch.y);
    graph_.capture_begin();
    step(static_x_, static_y_);
    graph_.capture_end();
  } else {
    // A pageable upload on the library's stream: the driver stages the host bytes before returning, so the batch
    // may be freed at once and the host does not wait for the device.
    static_x_.copy_(batch.x);
    static_y_.copy_(batch.y);
  }
  graph_.replay();
}

IntervalStats Trainer::train(std::int64_t until, std::vector<double>* step_losses) {
  const Hyper& h = config_.hyper;
  const auto t0 = std::chrono::steady_clock::now();
  IntervalStats s;
  s.first = iter_;
  model_->train();
  {
    minidl::NoGradGuard no_grad;
    loss_sum_.zero_();
  }
  std::optional<examples::Progress> progress;
  if (config_.progress) {
    progress.emplace("iters " + std::to_string(iter_) + "-" + std::to_string(until) + " " + config_.device.str(),
                     until - iter_, h.grad_accum * h.batch_size * h.block_size, "tok", "iters");
  }
  clock_.start();
  try {
    while (iter_ < until) {
      optimizer_->set_lr(learning_rate(h, iter_));
      // One draw of every micro-batch's windows: K micro-batches of b see what one batch of K b would.
      const std::int64_t sequences = h.grad_accum * h.batch_size;
      const TokenBatch batch = random_batch(*data_, Split::Train, iter_, 0, sequences, h.block_size, config_.seed);
      const std::int64_t tokens = sequences * h.block_size;
      if (does_one_time_work()) {
        clock_.one_time(tokens, [&] { run_iteration(batch, step_losses != nullptr); });
      } else {
        run_iteration(batch, step_losses != nullptr);
        clock_.steady(tokens);
      }
      ++iter_;
      if (step_losses) step_losses->push_back(last_loss_.item<double>());
      if (progress && progress->due()) {
        const double running = loss_sum_.item<double>() / static_cast<double>(iter_ - s.first);
        check_finite(running, "iteration " + std::to_string(iter_) + ": the running training loss");
        progress->update(iter_ - s.first, running);
      }
      if (config_.stop_requested && config_.stop_requested()) throw Interrupted(iter_);
    }
  } catch (...) {
    if (progress) progress->finish();
    throw;
  }
  s.iters = iter_ - s.first;
  // Reading the sum waits for the device, so the time covers every queued step.
  s.loss = s.iters > 0 ? loss_sum_.item<double>() / static_cast<double>(s.iters) : 0.0;
  s.seconds = elapsed_since(t0);
  s.timing = clock_.finish(s.seconds);
  check_finite(s.loss, "the training loss of iterations " + std::to_string(s.first) + "-" + std::to_string(iter_));
  if (progress) {
    progress->update(s.iters, s.loss);
    progress->finish();
  }
  return s;
}

double Trainer::evaluate(Split split) {
  const Hyper& h = config_.hyper;
  model_->eval();
  Tensor sum = minidl::zeros({}, minidl::TensorOptions(minidl::kFloat32).device(config_.device));
  {
    minidl::NoGradGuard no_grad;
    for (std::int64_t k = 1; k <= h.eval_iters; ++k) {
      const TokenBatch b = random_batch(*data_, split, iter_, k, h.batch_size, h.block_size, config_.seed);
      examples::AmpRegion region(config_.amp, config_.device);  // evaluated as trained
      sum.add_(GPTImpl::loss(model_(b.x.to(config_.device)), b.y.to(config_.device)));
      if (config_.stop_requested && config_.stop_requested()) {
        model_->train();
        throw Interrupted(iter_);
      }
    }
  }
  model_->train();
  const double loss = sum.item<double>() / static_cast<double>(h.eval_iters);
  check_finite(loss, std::string("the ") + (split == Split::Train ? "train" : "val") + " loss at iteration " +
                         std::to_string(iter_));
  return loss;
}

void Trainer::save(const std::string& path) const {
  std::map<std::string, std::string> meta = model_->config().to_metadata();
  meta["gpt.vocabulary"] = data_->vocabulary_text();
  meta["gpt.iter"] = std::to_string(iter_);
  minidl::io::save(*model_, path, meta);
  minidl::io::TrainingState st;
  st.epoch = iter_;
  st.optimizer = optimizer_->state_dict();
  st.rng = minidl::get_rng_state();
  if (scaler_) examples::save_grad_scaler(*scaler_, st.extra);
  minidl::io::save_training_state(state_path(path), st);
}

void Trainer::resume(const std::string& path) {
  const minidl::io::SafetensorsContents file = minidl::io::read_safetensors(path);
  const GPTConfig saved = GPTConfig::from_metadata(file.metadata, path);
  MINIDL_CHECK(saved == model_->config(), minidl::ValueError, "--resume ", path, " holds a model of ", saved.str(),
               ", but the flags give ", model_->config().str());
  const auto vocab = file.metadata.find("gpt.vocabulary");
  MINIDL_CHECK(vocab != file.metadata.end() && vocab->second == data_->vocabulary_text(), minidl::ValueError,
               "--resume ", path, ": the checkpoint's vocabulary differs from the training data's (another --data?)");
  minidl::io::load(*model_, path);
  const minidl::io::TrainingState st = minidl::io::load_training_state(state_path(path));
  optimizer_->load_state_dict(st.optimizer);
  minidl::set_rng_state(st.rng);
  if (scaler_) examples::load_grad_scaler(*scaler_, st.extra);
  iter_ = st.epoch;
}

}  // namespace gpt
