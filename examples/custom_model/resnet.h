#pragma once
// A small residual network for 28x28 grey images, written against minidl's public API the way a LibTorch
// user writes a model: Impl structs deriving from nn::Module, submodules registered by name, MINIDL_MODULE
// holders.
//
//   stem   conv3x3 1->w, BatchNorm, Swish (the user-defined op of swish.h)     28x28
//   stage1 `blocks` residual blocks, w channels                                 28x28
//   stage2 `blocks` residual blocks, 2w channels, the first with stride 2      14x14
//   stage3 `blocks` residual blocks, 4w channels, the first with stride 2       7x7
//   head   AdaptiveAvgPool2d(1) (global average pooling), flatten, Linear 4w->10 (logits)
#include <minidl/minidl.h>

#include <cstdint>

namespace custom_model {

/// conv3x3-BN-ReLU-conv3x3-BN plus the shortcut, then ReLU. The shortcut is the identity, or a strided
/// conv1x1-BN projection where the block changes the resolution or the channel count.
struct ResidualBlockImpl : minidl::nn::Module {
  ResidualBlockImpl(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride);
  minidl::Tensor forward(const minidl::Tensor& x) override;

  minidl::nn::Conv2d conv1, conv2;
  minidl::nn::BatchNorm2d bn1, bn2;
  minidl::nn::Sequential shortcut;  // empty: the identity
};
MINIDL_MODULE(ResidualBlock);

struct ResNetImpl : minidl::nn::Module {
  /// `width` channels in the first stage (doubled per stage), `blocks` residual blocks per stage.
  explicit ResNetImpl(std::int64_t width = 16, std::int64_t blocks = 1, std::int64_t num_classes = 10);
  /// x (N, 1, H, W) -> logits (N, num_classes).
  minidl::Tensor forward(const minidl::Tensor& x) override;

  minidl::nn::Sequential stem, stages;
  minidl::nn::AdaptiveAvgPool2d pool;
  minidl::nn::Linear fc;
};
MINIDL_MODULE(ResNet);

}  // namespace custom_model
