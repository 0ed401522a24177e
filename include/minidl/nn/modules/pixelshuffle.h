#pragma once
// PixelShuffle, PixelUnshuffle (LibTorch's), through functional::pixel_shuffle / pixel_unshuffle.
#include "minidl/nn/functional/pixelshuffle.h"
#include "minidl/nn/module.h"

namespace minidl {
namespace nn {

class PixelShuffleImpl : public Module {
 public:
  explicit PixelShuffleImpl(PixelShuffleOptions options) : Module("PixelShuffle"), options(options) {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  PixelShuffleOptions options;
};
MINIDL_MODULE(PixelShuffle);

class PixelUnshuffleImpl : public Module {
 public:
  explicit PixelUnshuffleImpl(PixelUnshuffleOptions options) : Module("PixelUnshuffle"), options(options) {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  PixelUnshuffleOptions options;
};
MINIDL_MODULE(PixelUnshuffle);

}  // namespace nn
}  // namespace minidl
