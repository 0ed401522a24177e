#pragma once
// Upsample (LibTorch's), through functional::interpolate.
#include <cstdint>
#include <optional>
#include <vector>

#include "minidl/arg.h"
#include "minidl/nn/functional/upsampling.h"
#include "minidl/nn/module.h"

namespace minidl {
namespace nn {

struct UpsampleOptions {
  using mode_t = std::variant<enumtype::kNearest, enumtype::kLinear, enumtype::kBilinear>;
  MINIDL_ARG(std::optional<std::vector<std::int64_t>>, size) = std::nullopt;
  MINIDL_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  MINIDL_ARG(mode_t, mode) = kNearest;
  MINIDL_ARG(std::optional<bool>, align_corners) = std::nullopt;
};

class UpsampleImpl : public Module {
 public:
  explicit UpsampleImpl(UpsampleOptions options = {}) : Module("Upsample"), options(std::move(options)) {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  UpsampleOptions options;
};
MINIDL_MODULE(Upsample);

}  // namespace nn
}  // namespace minidl
