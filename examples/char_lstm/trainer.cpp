#include "trainer.h"

#include <minidl/io/checkpoint.h>
#include <minidl/io/safetensors.h>
#include <minidl/random.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "progress.h"

namespace char_lstm {

namespace optim = minidl::optim;
using minidl::Tensor;

namespace {

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

CharLSTM build_model(const TrainConfig& c, std::int64_t vocab_size) {
  minidl::manual_seed(c.seed);
  CharLSTM model(model_config(c.hyper, vocab_size));
  model->to(c.device);
  return model;
}

LSTMState detached(const LSTMState& s) { return {std::get<0>(s).detach(), std::get<1>(s).detach()}; }

/// The carried state as a module of two buffers, h and c, so that io::save / io::load write it and read it back
/// with their checks (names, shapes, dtypes).
class CarriedStateImpl : public minidl::nn::Module {
 public:
  explicit CarriedStateImpl(const LSTMState& s) {
    register_buffer("h", std::get<0>(s));
    register_buffer("c", std::get<1>(s));
  }
  LSTMState get() { return {named_buffers()["h"], named_buffers()["c"]}; }
};
MINIDL_MODULE(CarriedState);

}  // namespace

CharLSTMConfig model_config(const Hyper& h, std::int64_t vocab_size) {
  CharLSTMConfig c;
  c.vocab_size = vocab_size;
  c.embed = h.embed;
  c.hidden = h.hidden;
  c.layers = h.layers;
  return c;
}

Interrupted::Interrupted(std::int64_t iter)
    : std::runtime_error("interrupted after iteration " + std::to_string(iter)) {}

Trainer::Trainer(TrainConfig config, std::shared_ptr<const examples::TokenData> data)
    : config_(std::move(config)), data_(std::move(data)),
      train_(data_->tokens(examples::Split::Train), config_.hyper.batch_size, config_.hyper.seq_len,
             "the training split"),
      val_(data_->tokens(examples::Split::Val), config_.hyper.batch_size, config_.hyper.seq_len,
           "the validation split"),
      model_(build_model(config_, data_->vocab_size())), params_(model_->parameters()),
      optimizer_(
          std::make_unique<optim::Adam>(params_, optim::AdamOptions(config_.hyper.lr)
                                                     .betas(std::make_tuple(config_.hyper.beta1, config_.hyper.beta2))
                                                     .eps(config_.hyper.eps))),
      state_(model_->zero_state(config_.hyper.batch_size, config_.device)), clock_([device = config_.device] {
        if (device.is_cuda()) minidl::cuda::synchronize(device.index());
      }) {
  loss_sum_ = minidl::zeros({}, minidl::TensorOptions(minidl::kFloat32).device(config_.device));
}

void Trainer::step(const StreamBatch& batch) {
  const Hyper& h = config_.hyper;
  if (iter_ % train_.batches() == 0) state_ = model_->zero_state(h.batch_size, config_.device);
  optimizer_->zero_grad();
  auto [logits, next] = model_(batch.x.to(config_.device), std::optional<LSTMState>(state_));
  const Tensor loss = CharLSTMImpl::loss(logits, batch.y.to(config_.device));
  loss.backward();
  if (h.grad_clip > 0) minidl::nn::utils::clip_grad_norm_(params_, h.grad_clip);
  optimizer_->step();
  // Truncated BPTT: the next batch starts from these values, but its gradient stops here.
  state_ = detached(next);
  minidl::NoGradGuard no_grad;
  last_loss_ = loss.detach();
  loss_sum_.add_(last_loss_);
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
  const std::int64_t tokens = h.batch_size * h.seq_len;
  std::optional<examples::Progress> progress;
  if (config_.progress) {
    progress.emplace("iters " + std::to_string(iter_) + "-" + std::to_string(until) + " " + config_.device.str(),
                     until - iter_, tokens, "tok", "iters");
  }
  clock_.start();
  try {
    while (iter_ < until) {
      const StreamBatch batch = train_.batch(iter_ % train_.batches());
      if (steps_run_ == 0) {  // the first step creates the optimizer state and the allocator's blocks
        clock_.one_time(tokens, [&] { step(batch); });
      } else {
        step(batch);
        clock_.steady(tokens);
      }
      ++steps_run_;
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

std::int64_t Trainer::eval_batches() const {
  const std::int64_t n = config_.hyper.eval_batches;
  return n > 0 ? std::min(n, val_.batches()) : val_.batches();
}

double Trainer::evaluate() {
  model_->eval();
  Tensor sum = minidl::zeros({}, minidl::TensorOptions(minidl::kFloat32).device(config_.device));
  {
    minidl::NoGradGuard no_grad;
    std::optional<LSTMState> state;
    for (std::int64_t i = 0; i < eval_batches(); ++i) {
      const StreamBatch b = val_.batch(i);
      auto [logits, next] = model_(b.x.to(config_.device), state);
      sum.add_(CharLSTMImpl::loss(logits, b.y.to(config_.device)));
      state = next;
      if (config_.stop_requested && config_.stop_requested()) {
        model_->train();
        throw Interrupted(iter_);
      }
    }
  }
  model_->train();
  // Every batch holds the same number of characters: the mean of the batches' means is the mean per character.
  const double loss = sum.item<double>() / static_cast<double>(eval_batches());
  check_finite(loss, "the validation loss at iteration " + std::to_string(iter_));
  return loss;
}

void Trainer::save(const std::string& path) const {
  std::map<std::string, std::string> meta = model_->config().to_metadata();
  meta["char_lstm.vocabulary"] = data_->vocabulary_text();
  meta["char_lstm.iter"] = std::to_string(iter_);
  minidl::io::save(*model_, path, meta);
  minidl::io::TrainingState st;
  st.epoch = iter_;
  st.optimizer = optimizer_->state_dict();
  st.rng = minidl::get_rng_state();
  minidl::io::save_training_state(state_path(path), st);
  minidl::io::save(*CarriedState(state_), hidden_path(path));
}

void Trainer::resume(const std::string& path) {
  const minidl::io::SafetensorsContents file = minidl::io::read_safetensors(path);
  const CharLSTMConfig saved = CharLSTMConfig::from_metadata(file.metadata, path);
  MINIDL_CHECK(saved == model_->config(), minidl::ValueError, "--resume ", path, " holds a model of ", saved.str(),
               ", but the flags give ", model_->config().str());
  const auto vocab = file.metadata.find("char_lstm.vocabulary");
  MINIDL_CHECK(vocab != file.metadata.end() && vocab->second == data_->vocabulary_text(), minidl::ValueError,
               "--resume ", path, ": the checkpoint's vocabulary differs from the training data's (another --data?)");
  // The carried state first: a state of another --batch-size is a FormatError before anything has changed.
  CarriedState carried(model_->zero_state(config_.hyper.batch_size, config_.device));
  minidl::io::load(*carried, hidden_path(path));
  const minidl::io::TrainingState st = minidl::io::load_training_state(state_path(path));
  minidl::io::load(*model_, path);
  optimizer_->load_state_dict(st.optimizer);
  minidl::set_rng_state(st.rng);
  state_ = carried->get();
  iter_ = st.epoch;
}

}  // namespace char_lstm
