#include "reference_dump.h"

#include <minidl/io/checkpoint.h>

#include <map>
#include <sstream>

namespace gpt {

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

void dump_reference(TrainConfig config, const std::shared_ptr<const TokenData>& data, const std::string& path) {
  config.hyper.dropout = 0.0;
  config.progress = false;
  const Hyper& h = config.hyper;
  Trainer trainer(config, data);
  trainer.save(path);

  std::map<std::string, Tensor> ref;
  std::vector<Tensor> xs, ys;
  for (std::int64_t it = 0; it < kSteps; ++it) {
    const TokenBatch b = random_batch(*data, Split::Train, it, 0, h.batch_size, h.block_size, config.seed);
    xs.push_back(b.x);
    ys.push_back(b.y);
  }
  ref["ref.x"] = minidl::stack(xs);
  ref["ref.y"] = minidl::stack(ys);

  GPT& model = trainer.model();
  model->train();
  const Tensor logits = model(xs[0].to(config.device));
  const Tensor loss = GPTImpl::loss(logits, ys[0].to(config.device));
  loss.backward();
  ref["ref.logits"] = logits.detach().cpu();
  ref["ref.loss"] = loss.detach().cpu();
  for (const auto& item : model->named_parameters()) ref["ref.grad." + item.key()] = item.value().grad().cpu();
  model->zero_grad();

  std::vector<double> losses;
  trainer.train(kSteps, &losses);
  ref["ref.losses"] = minidl::from_vector(losses, {kSteps});

  std::map<std::string, std::string> meta = model->config().to_metadata();
  meta["ref.lr"] = number(h.lr);
  meta["ref.min_lr"] = number(h.min_lr);
  meta["ref.warmup"] = std::to_string(h.warmup);
  meta["ref.iters"] = std::to_string(h.iters);
  meta["ref.beta1"] = number(h.beta1);
  meta["ref.beta2"] = number(h.beta2);
  meta["ref.weight_decay"] = number(h.weight_decay);
  meta["ref.grad_clip"] = number(h.grad_clip);
  meta["ref.device"] = config.device.str();
  minidl::io::save_state_dict(ref, reference_path(path), meta);
}

}  // namespace gpt
