#pragma once
// DCGAN (Radford, Metz & Chintala 2015) for 32x32 grayscale images, as PyTorch's DCGAN example lays it out for
// 64x64 with one stride-2 block fewer: the modules live in a Sequential `main`, so the parameters are
// main.0.weight, main.1.weight, ... as in PyTorch's tutorial and a checkpoint loads into the reference model.
//   Generator:     z (N, latent, 1, 1) -> ConvTranspose2d 4x4 stride 1 -> 4x4, then three ConvTranspose2d 4x4
//                  stride 2 padding 1 -> 8x8 -> 16x16 -> 32x32; BatchNorm2d + ReLU after all but the last,
//                  Tanh at the end; widths 4w, 2w, w, 1 (w = g_width).
//   Discriminator: x (N, 1, 32, 32) -> three Conv2d 4x4 stride 2 padding 1 -> 16 -> 8 -> 4, LeakyReLU(0.2) after
//                  each and BatchNorm2d before it in the middle two (none after the input layer, as DCGAN); widths
//                  w, 2w, 4w (w = d_width); a final Conv2d 4x4 over the 4x4 map gives one logit per image (N).
// No convolution has a bias (each is followed by BatchNorm, or is the input or output layer, as in DCGAN).
#include <minidl/minidl.h>

#include <cstdint>
#include <map>
#include <string>

namespace dcgan {

/// Side of the images the model generates and judges (Fashion-MNIST's 28 padded to 32).
inline constexpr std::int64_t kImageSize = 32;

struct ModelConfig {
  std::int64_t latent = 100, g_width = 64, d_width = 64;

  /// As a checkpoint's metadata (dcgan.latent, dcgan.g_width, dcgan.d_width), and back; from_metadata throws
  /// minidl::FormatError naming the file and a missing or malformed key.
  std::map<std::string, std::string> to_metadata() const;
  static ModelConfig from_metadata(const std::map<std::string, std::string>& metadata, const std::string& file);
  bool operator==(const ModelConfig& o) const;
  std::string str() const;
};

class GeneratorImpl : public minidl::nn::Module {
 public:
  explicit GeneratorImpl(const ModelConfig& c);
  /// z: (N, latent, 1, 1) or (N, latent); returns (N, 1, 32, 32) in [-1, 1]. Throws minidl::ValueError naming
  /// the expected and found shape.
  minidl::Tensor forward(const minidl::Tensor& z) override;
  minidl::nn::Sequential main{nullptr};

 private:
  std::int64_t latent_;
};
MINIDL_MODULE(Generator);

class DiscriminatorImpl : public minidl::nn::Module {
 public:
  explicit DiscriminatorImpl(const ModelConfig& c);
  /// x: (N, 1, 32, 32); returns the N logits (real: > 0). Throws minidl::ValueError naming the found shape.
  minidl::Tensor forward(const minidl::Tensor& x) override;
  minidl::nn::Sequential main{nullptr};
};
MINIDL_MODULE(Discriminator);

/// The two networks as one module (generator.main.0.weight, ..., discriminator.main.0.weight, ...): what a
/// checkpoint holds and what moves between devices together.
class DCGANImpl : public minidl::nn::Module {
 public:
  explicit DCGANImpl(const ModelConfig& c);
  const ModelConfig& config() const { return config_; }
  Generator generator{nullptr};
  Discriminator discriminator{nullptr};

 private:
  ModelConfig config_;
};
MINIDL_MODULE(DCGAN);

/// DCGAN's weights_init, applied to `model` and every submodule: convolution and transposed-convolution weights
/// drawn from N(0, 0.02), BatchNorm weights from N(1, 0.02) and its biases 0 (from minidl's generator of the
/// tensors' device).
void dcgan_init(minidl::nn::Module& model);

}  // namespace dcgan
