#include "reference_dump.h"

#include <minidl/io/checkpoint.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "checkpoint_metadata.h"

namespace dcgan {

using minidl::Tensor;

namespace {

/// The gradients of the model's parameters whose names start with `prefix`, as ref.<what>.<name>.
void add_grads(std::map<std::string, Tensor>& ref, DCGAN& model, const std::string& prefix, const std::string& what) {
  for (const auto& item : model->named_parameters()) {
    if (item.key().rfind(prefix, 0) == 0) ref["ref." + what + "." + item.key()] = item.value().grad().cpu().clone();
  }
}

}  // namespace

void dump_reference(TrainConfig config, const std::shared_ptr<const ImageSet>& data, const std::string& path) {
  config.progress = false;
  Trainer trainer(config, data);
  trainer.save(path);

  const std::int64_t n = std::min(config.batch_size, data->size());
  std::vector<std::int64_t> first(static_cast<std::size_t>(n));
  std::iota(first.begin(), first.end(), 0);
  const Tensor real = data->get_batch(first).data;
  const Tensor noise = trainer.draw_noise(n);
  std::map<std::string, Tensor> ref;
  ref["ref.real"] = real;
  ref["ref.noise"] = noise.cpu();

  StepTensors s;
  const Tensor fake = trainer.update_discriminator(real.to(config.device), noise, s);
  add_grads(ref, trainer.model(), "discriminator.", "grad_d");
  for (const auto& [name, t] : minidl::io::state_dict(*trainer.model())) ref["ref.mid." + name] = t.cpu().clone();
  trainer.update_generator(fake, s);
  add_grads(ref, trainer.model(), "generator.", "grad_g");
  ref["ref.loss_d"] = s.loss_d.cpu();
  ref["ref.loss_g"] = s.loss_g.cpu();
  ref["ref.d_x"] = s.d_x.cpu();
  ref["ref.d_g_z1"] = s.d_g_z1.cpu();
  ref["ref.d_g_z2"] = s.d_g_z2.cpu();
  for (const auto& [name, t] : minidl::io::state_dict(*trainer.model())) ref["ref.after." + name] = t.cpu().clone();

  std::map<std::string, std::string> meta = trainer.model()->config().to_metadata();
  meta["ref.lr"] = examples::exact_text(config.lr);
  meta["ref.beta1"] = examples::exact_text(config.beta1);
  meta["ref.beta2"] = examples::exact_text(config.beta2);
  meta["ref.device"] = config.device.str();
  minidl::io::save_state_dict(ref, reference_path(path), meta);
}

}  // namespace dcgan
