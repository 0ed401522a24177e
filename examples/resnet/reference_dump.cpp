#include "reference_dump.h"

#include <minidl/io/checkpoint.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "checkpoint_metadata.h"

namespace resnet {

using minidl::Tensor;

void dump_reference(TrainConfig config, const std::shared_ptr<const examples::ImageSet>& data,
                    const std::string& path) {
  config.progress = false;
  Trainer trainer(config, data, nullptr);
  trainer.save(path);

  const std::int64_t n = std::min(config.batch_size, data->size());
  std::vector<std::int64_t> first(static_cast<std::size_t>(n));
  std::iota(first.begin(), first.end(), 0);
  const minidl::data::Batch batch = data->get_batch(first);
  const Tensor x = trainer.input(batch.data.to(config.device));
  const Tensor y = batch.target.to(config.device);
  // The step's learning rate: OneCycleLR's first, set when it was built.
  const double lr = trainer.optimizer().param_groups()[0].options().get_lr();
  const examples::StepOutputs out = trainer.step(x, y);
  std::map<std::string, Tensor> ref;
  ref["ref.x"] = x.cpu();
  ref["ref.y"] = y.cpu();
  ref["ref.logits"] = out.logits.detach().cpu();
  ref["ref.loss"] = out.loss.detach().cpu();
  for (const auto& item : trainer.model()->named_parameters()) {
    ref["ref.grad." + item.key()] = item.value().grad().cpu().clone();
  }
  for (const auto& [name, t] : minidl::io::state_dict(*trainer.model())) ref["ref.after." + name] = t.cpu().clone();

  std::map<std::string, std::string> meta = trainer.model()->config().to_metadata();
  meta["ref.lr"] = examples::exact_text(lr);
  meta["ref.momentum"] = examples::exact_text(config.momentum);
  meta["ref.weight_decay"] = examples::exact_text(config.weight_decay);
  meta["ref.device"] = config.device.str();
  minidl::io::save_state_dict(ref, reference_path(path), meta);
}

}  // namespace resnet
