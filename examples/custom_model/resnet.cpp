#include "resnet.h"

#include <string>

#include "swish.h"

namespace custom_model {

namespace nn = minidl::nn;
using minidl::Tensor;

namespace {
/// Convolutions followed by BatchNorm need no bias: BatchNorm's shift replaces it.
nn::Conv2dOptions conv_options(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride) {
  return nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false);
}
}  // namespace

ResidualBlockImpl::ResidualBlockImpl(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride)
    : Module("ResidualBlock"),
      conv1(conv_options(in_channels, out_channels, 3, stride)),
      conv2(conv_options(out_channels, out_channels, 3, 1)),
      bn1(out_channels),
      bn2(out_channels) {
  register_module("conv1", conv1);
  register_module("bn1", bn1);
  register_module("conv2", conv2);
  register_module("bn2", bn2);
  if (stride != 1 || in_channels != out_channels) {
    shortcut->push_back(nn::Conv2d(conv_options(in_channels, out_channels, 1, stride)));
    shortcut->push_back(nn::BatchNorm2d(out_channels));
  }
  register_module("shortcut", shortcut);
}

Tensor ResidualBlockImpl::forward(const Tensor& x) {
  Tensor y = minidl::relu(bn1(conv1(x)));
  y = bn2(conv2(y));
  return minidl::relu(y + shortcut(x));
}

ResNetImpl::ResNetImpl(std::int64_t width, std::int64_t blocks, std::int64_t num_classes)
    : Module("ResNet"), pool(1), fc(4 * width, num_classes) {
  stem->push_back(nn::Conv2d(conv_options(1, width, 3, 1)));
  stem->push_back(nn::BatchNorm2d(width));
  stem->push_back(Swish());
  std::int64_t channels = width;
  for (std::int64_t stage = 0; stage < 3; ++stage) {
    const std::int64_t out = width << stage;
    for (std::int64_t b = 0; b < blocks; ++b) {
      stages->push_back(ResidualBlock(channels, out, stage > 0 && b == 0 ? 2 : 1));
      channels = out;
    }
  }
  register_module("stem", stem);
  register_module("stages", stages);
  register_module("pool", pool);
  register_module("fc", fc);
}

Tensor ResNetImpl::forward(const Tensor& x) {
  return fc(pool(stages(stem(x))).flatten(1));
}

}  // namespace custom_model
