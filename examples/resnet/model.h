#pragma once
// ResNet-18 (He et al. 2015) in its CIFAR form, for 32x32 images: a 3x3 stride-1 stem convolution without max
// pooling, then four stages of BasicBlocks, adaptive average pooling and one Linear layer.
//   stem:    Conv2d 3x3 (3 -> w, stride 1, padding 1), BatchNorm2d, ReLU                         32x32
//   layer1:  blocks[0] BasicBlocks of w channels                                                 32x32
//   layer2:  blocks[1] BasicBlocks of 2w, the first with stride 2                                16x16
//   layer3:  blocks[2] BasicBlocks of 4w, the first with stride 2                                8x8
//   layer4:  blocks[3] BasicBlocks of 8w, the first with stride 2                                4x4
//   head:    AdaptiveAvgPool2d(1), Linear(8w -> classes)
// A BasicBlock is conv3x3 (stride s) - BN - ReLU - conv3x3 - BN, plus its input (through a 1x1 stride-s
// convolution and BN, `downsample`, where the stride or the width changes), then ReLU. No convolution has a bias.
// With w = 64 and blocks 2,2,2,2 this is ResNet-18: 11,173,962 parameters for 10 classes.
// The modules carry torchvision's names (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, ..., fc), so a
// checkpoint loads into reference/resnet_torch.py's model with load_state_dict(strict=True).
#include <minidl/minidl.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace resnet {

/// Side of the images the network takes (Fashion-MNIST's 28 padded to 32, as CIFAR's).
inline constexpr std::int64_t kImageSize = 32;
/// Input channels: grayscale repeated to three, as a network built for RGB takes it.
inline constexpr std::int64_t kInputChannels = 3;

struct ModelConfig {
  std::int64_t width = 64;                         ///< the stem's channels; the stages have 1, 2, 4 and 8 times it
  std::array<std::int64_t, 4> blocks{2, 2, 2, 2};  ///< BasicBlocks per stage
  std::int64_t classes = 10;

  /// "2,2,2,2" from --blocks, and back: four integers >= 1 separated by commas. parse_blocks throws
  /// minidl::ValueError quoting the text.
  static std::array<std::int64_t, 4> parse_blocks(const std::string& text);
  std::string blocks_str() const;
  /// As a checkpoint's metadata (resnet.width, resnet.blocks, resnet.classes), and back; from_metadata throws
  /// minidl::FormatError naming the file and a missing or malformed key.
  std::map<std::string, std::string> to_metadata() const;
  static ModelConfig from_metadata(const std::map<std::string, std::string>& metadata, const std::string& file);
  bool operator==(const ModelConfig& o) const;
  std::string str() const;
};

class BasicBlockImpl : public minidl::nn::Module {
 public:
  BasicBlockImpl(std::int64_t in_channels, std::int64_t channels, std::int64_t stride);
  minidl::Tensor forward(const minidl::Tensor& x) override;

  minidl::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  minidl::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  /// 1x1 convolution + BatchNorm on the shortcut where the block changes the stride or the width; empty (and
  /// not registered) otherwise.
  minidl::nn::Sequential downsample{nullptr};
};
MINIDL_MODULE(BasicBlock);

class ResNetImpl : public minidl::nn::Module {
 public:
  explicit ResNetImpl(const ModelConfig& c);
  /// x: (N, 3, 32, 32); returns the logits (N, classes). Throws minidl::ValueError naming the found shape.
  minidl::Tensor forward(const minidl::Tensor& x) override;
  const ModelConfig& config() const { return config_; }

  minidl::nn::Conv2d conv1{nullptr};
  minidl::nn::BatchNorm2d bn1{nullptr};
  minidl::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  minidl::nn::AdaptiveAvgPool2d avgpool{nullptr};
  minidl::nn::Linear fc{nullptr};

 private:
  ModelConfig config_;
};
MINIDL_MODULE(ResNet);

/// torchvision's ResNet initialisation, applied to `model` and every submodule: convolution weights from
/// kaiming_normal_(fan_out, relu), BatchNorm weights 1 and biases 0 (Linear keeps its default initialisation).
void resnet_init(minidl::nn::Module& model);

}  // namespace resnet
