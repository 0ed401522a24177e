#include "export_logits.h"

#include <minidl/io/checkpoint.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace mnist {

void export_logits(Net& model, const minidl::data::Dataset& images, std::int64_t count, const std::string& path) {
  MINIDL_CHECK(count >= 1, minidl::ValueError, "export_logits: count must be >= 1, found ", count);
  std::vector<std::int64_t> first(static_cast<std::size_t>(std::min(count, images.size())));
  std::iota(first.begin(), first.end(), std::int64_t{0});
  const minidl::Tensor input = images.get_batch(first).data;

  const bool was_training = model->is_training();
  model->eval();
  minidl::Tensor logits;
  {
    minidl::NoGradGuard no_grad;
    logits = model(input.to(model->parameters().front().device())).cpu();
  }
  model->train(was_training);
  minidl::io::save_state_dict({{"input", input}, {"logits", logits}}, path);
}

}  // namespace mnist
