#include "model.h"

#include <sstream>

#include "checkpoint_metadata.h"

namespace resnet {

namespace nn = minidl::nn;
using minidl::Tensor;

namespace {

constexpr const char* kWriter = "resnet --save";

nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

/// `blocks` BasicBlocks of `channels`, the first with `stride` (torchvision's _make_layer).
nn::Sequential stage(std::int64_t& in_channels, std::int64_t channels, std::int64_t blocks, std::int64_t stride) {
  nn::Sequential s;
  for (std::int64_t i = 0; i < blocks; ++i) {
    s->push_back(BasicBlock(in_channels, channels, i == 0 ? stride : 1));
    in_channels = channels;
  }
  return s;
}

}  // namespace

std::array<std::int64_t, 4> ModelConfig::parse_blocks(const std::string& text) {
  std::array<std::int64_t, 4> blocks{};
  std::istringstream in(text);
  std::string part;
  std::size_t n = 0;
  bool ok = true;
  while (ok && std::getline(in, part, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ok = n < blocks.size() && !part.empty() && used == part.size() && v >= 1 && v <= 64;
    if (ok) blocks[n++] = v;
  }
  MINIDL_CHECK(ok && n == blocks.size() && text.back() != ',', minidl::ValueError, "blocks \"", text,
               "\": expected four block counts from 1 to 64 separated by commas, e.g. 2,2,2,2");
  return blocks;
}

std::string ModelConfig::blocks_str() const {
  return std::to_string(blocks[0]) + "," + std::to_string(blocks[1]) + "," + std::to_string(blocks[2]) + "," +
         std::to_string(blocks[3]);
}

std::map<std::string, std::string> ModelConfig::to_metadata() const {
  return {{"resnet.width", std::to_string(width)},
          {"resnet.blocks", blocks_str()},
          {"resnet.classes", std::to_string(classes)}};
}

ModelConfig ModelConfig::from_metadata(const std::map<std::string, std::string>& m, const std::string& file) {
  ModelConfig c;
  c.width = examples::metadata_positive_int(m, "resnet.width", file, kWriter);
  c.classes = examples::metadata_positive_int(m, "resnet.classes", file, kWriter);
  const std::string& blocks = examples::metadata_text(m, "resnet.blocks", file, kWriter);
  try {
    c.blocks = parse_blocks(blocks);
  } catch (const minidl::ValueError& e) {
    throw minidl::FormatError(file + ": metadata resnet." + e.what());
  }
  return c;
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return width == o.width && blocks == o.blocks && classes == o.classes;
}

std::string ModelConfig::str() const {
  std::ostringstream s;
  s << "width " << width << ", blocks " << blocks_str() << ", " << classes << " classes";
  return s.str();
}

BasicBlockImpl::BasicBlockImpl(std::int64_t in_channels, std::int64_t channels, std::int64_t stride) {
  conv1 = register_module("conv1", conv(in_channels, channels, 3, stride));
  bn1 = register_module("bn1", nn::BatchNorm2d(channels));
  conv2 = register_module("conv2", conv(channels, channels, 3, 1));
  bn2 = register_module("bn2", nn::BatchNorm2d(channels));
  if (stride != 1 || in_channels != channels) {
    downsample = register_module("downsample",
                                 nn::Sequential(conv(in_channels, channels, 1, stride), nn::BatchNorm2d(channels)));
  }
}

Tensor BasicBlockImpl::forward(const Tensor& x) {
  const Tensor out = bn2(conv2(minidl::relu(bn1(conv1(x)))));
  return minidl::relu(out + (downsample ? downsample(x) : x));
}

ResNetImpl::ResNetImpl(const ModelConfig& c) : config_(c) {
  MINIDL_CHECK(c.width >= 1 && c.classes >= 1, minidl::ValueError, "ResNet: width and classes must be >= 1, found ",
               c.width, " and ", c.classes);
  conv1 = register_module("conv1", conv(kInputChannels, c.width, 3, 1));
  bn1 = register_module("bn1", nn::BatchNorm2d(c.width));
  std::int64_t channels = c.width;
  layer1 = register_module("layer1", stage(channels, c.width, c.blocks[0], 1));
  layer2 = register_module("layer2", stage(channels, 2 * c.width, c.blocks[1], 2));
  layer3 = register_module("layer3", stage(channels, 4 * c.width, c.blocks[2], 2));
  layer4 = register_module("layer4", stage(channels, 8 * c.width, c.blocks[3], 2));
  avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(1));
  fc = register_module("fc", nn::Linear(8 * c.width, c.classes));
}

Tensor ResNetImpl::forward(const Tensor& x) {
  MINIDL_CHECK(x.dim() == 4 && x.size(1) == kInputChannels && x.size(2) == kImageSize && x.size(3) == kImageSize,
               minidl::ValueError, "ResNet: expected images (N, ", kInputChannels, ", ", kImageSize, ", ", kImageSize,
               "), found ", minidl::shape_str(x.sizes()));
  Tensor h = minidl::relu(bn1(conv1(x)));
  h = layer4(layer3(layer2(layer1(h))));
  return fc(avgpool(h).flatten(1));
}

void resnet_init(nn::Module& model) {
  minidl::NoGradGuard no_grad;
  if (auto* c = dynamic_cast<nn::Conv2dImpl*>(&model)) {
    nn::init::kaiming_normal_(c->weight, 0.0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
  }
  if (auto* bn = dynamic_cast<nn::BatchNormImplBase*>(&model)) {
    nn::init::ones_(bn->weight);
    nn::init::zeros_(bn->bias);
  }
  for (const auto& child : model.children()) resnet_init(*child);
}

}  // namespace resnet
