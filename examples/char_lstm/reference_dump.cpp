#include "reference_dump.h"

#include <minidl/io/checkpoint.h>

#include <map>
#include <sstream>

namespace char_lstm {

using minidl::Tensor;

namespace {

constexpr std::int64_t kSteps = 10;

std::string number(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

}  // namespace

void dump_reference(TrainConfig config, const std::shared_ptr<const examples::TokenData>& data,
                    const std::string& path) {
  config.progress = false;
  const Hyper& h = config.hyper;
  Trainer trainer(config, data);
  trainer.save(path);
  const TokenStreams& streams = trainer.train_streams();
  MINIDL_CHECK(streams.batches() >= kSteps, minidl::ValueError, "--dump-reference: the training streams hold ",
               streams.batches(), " batches, fewer than the ", kSteps,
               " training steps it compares; use a smaller --batch-size or --seq-len");

  std::map<std::string, Tensor> ref;
  std::vector<Tensor> xs, ys;
  for (std::int64_t i = 0; i < kSteps; ++i) {
    const StreamBatch b = streams.batch(i);
    xs.push_back(b.x);
    ys.push_back(b.y);
  }
  ref["ref.x"] = minidl::stack(xs);
  ref["ref.y"] = minidl::stack(ys);

  CharLSTM& model = trainer.model();
  const auto [z_h, z_c] = model->zero_state(h.batch_size, config.device);
  // Initial states that are not zeros, so that their use and their gradients are checked too.
  Tensor h0 = minidl::randn_like(z_h).mul(0.5).requires_grad_(true);
  Tensor c0 = minidl::randn_like(z_c).mul(0.5).requires_grad_(true);
  ref["ref.h0"] = h0.detach().cpu();
  ref["ref.c0"] = c0.detach().cpu();
  model->train();
  auto [logits, state] = model(xs[0].to(config.device), std::optional<LSTMState>(LSTMState{h0, c0}));
  const Tensor loss = CharLSTMImpl::loss(logits, ys[0].to(config.device));
  loss.backward();
  ref["ref.logits"] = logits.detach().cpu();
  ref["ref.loss"] = loss.detach().cpu();
  ref["ref.h_n"] = std::get<0>(state).detach().cpu();
  ref["ref.c_n"] = std::get<1>(state).detach().cpu();
  for (const auto& item : model->named_parameters()) ref["ref.grad." + item.key()] = item.value().grad().cpu();
  ref["ref.grad.h0"] = h0.grad().cpu();
  ref["ref.grad.c0"] = c0.grad().cpu();
  model->zero_grad();

  std::vector<double> losses;
  trainer.train(kSteps, &losses);
  ref["ref.losses"] = minidl::from_vector(losses, {kSteps});

  std::map<std::string, std::string> meta = model->config().to_metadata();
  meta["ref.lr"] = number(h.lr);
  meta["ref.beta1"] = number(h.beta1);
  meta["ref.beta2"] = number(h.beta2);
  meta["ref.eps"] = number(h.eps);
  meta["ref.grad_clip"] = number(h.grad_clip);
  meta["ref.device"] = config.device.str();
  minidl::io::save_state_dict(ref, reference_path(path), meta);
}

}  // namespace char_lstm
