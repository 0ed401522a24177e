#include "model.h"

#include <sstream>

#include "checkpoint_metadata.h"

namespace dcgan {

namespace nn = minidl::nn;
using minidl::Tensor;

namespace {

constexpr const char* kWriter = "dcgan --save";

nn::ConvTranspose2d up(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t padding) {
  return nn::ConvTranspose2d(nn::ConvTranspose2dOptions(in, out, 4).stride(stride).padding(padding).bias(false));
}

nn::Conv2d down(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 4).stride(stride).padding(padding).bias(false));
}

nn::LeakyReLU leaky() { return nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)); }

}  // namespace

std::map<std::string, std::string> ModelConfig::to_metadata() const {
  return {{"dcgan.latent", std::to_string(latent)},
          {"dcgan.g_width", std::to_string(g_width)},
          {"dcgan.d_width", std::to_string(d_width)}};
}

ModelConfig ModelConfig::from_metadata(const std::map<std::string, std::string>& m, const std::string& file) {
  ModelConfig c;
  c.latent = examples::metadata_positive_int(m, "dcgan.latent", file, kWriter);
  c.g_width = examples::metadata_positive_int(m, "dcgan.g_width", file, kWriter);
  c.d_width = examples::metadata_positive_int(m, "dcgan.d_width", file, kWriter);
  return c;
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return latent == o.latent && g_width == o.g_width && d_width == o.d_width;
}

std::string ModelConfig::str() const {
  std::ostringstream s;
  s << "latent " << latent << ", generator width " << g_width << ", discriminator width " << d_width;
  return s.str();
}

GeneratorImpl::GeneratorImpl(const ModelConfig& c) : latent_(c.latent) {
  const std::int64_t w = c.g_width;
  main = register_module("main", nn::Sequential(up(c.latent, 4 * w, 1, 0), nn::BatchNorm2d(4 * w), nn::ReLU(),  // 4x4
                                                up(4 * w, 2 * w, 2, 1), nn::BatchNorm2d(2 * w), nn::ReLU(),     // 8x8
                                                up(2 * w, w, 2, 1), nn::BatchNorm2d(w), nn::ReLU(),             // 16x16
                                                up(w, 1, 2, 1), nn::Tanh()));                                   // 32x32
}

Tensor GeneratorImpl::forward(const Tensor& z) {
  const bool flat = z.dim() == 2 && z.size(1) == latent_;
  MINIDL_CHECK(flat || (z.dim() == 4 && z.size(1) == latent_ && z.size(2) == 1 && z.size(3) == 1), minidl::ValueError,
               "Generator: expected latent vectors (N, ", latent_, ", 1, 1) or (N, ", latent_, "), found ",
               minidl::shape_str(z.sizes()));
  return main(flat ? z.view({z.size(0), latent_, 1, 1}) : z);
}

DiscriminatorImpl::DiscriminatorImpl(const ModelConfig& c) {
  const std::int64_t w = c.d_width;
  main = register_module("main", nn::Sequential(down(1, w, 2, 1), leaky(),                              // 16
                                                down(w, 2 * w, 2, 1), nn::BatchNorm2d(2 * w), leaky(),  // 8
                                                down(2 * w, 4 * w, 2, 1), nn::BatchNorm2d(4 * w), leaky(),  // 4
                                                down(4 * w, 1, 1, 0)));  // 1x1: the logit
}

Tensor DiscriminatorImpl::forward(const Tensor& x) {
  MINIDL_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == kImageSize && x.size(3) == kImageSize, minidl::ValueError,
               "Discriminator: expected images (N, 1, ", kImageSize, ", ", kImageSize, "), found ",
               minidl::shape_str(x.sizes()));
  return main(x).view({x.size(0)});
}

DCGANImpl::DCGANImpl(const ModelConfig& c) : config_(c) {
  generator = register_module("generator", Generator(c));
  discriminator = register_module("discriminator", Discriminator(c));
}

void dcgan_init(nn::Module& model) {
  minidl::NoGradGuard no_grad;
  // By module type, as the tutorial's weights_init goes by class name.
  if (auto* conv = dynamic_cast<nn::Conv2dImpl*>(&model)) nn::init::normal_(conv->weight, 0.0, 0.02);
  if (auto* conv = dynamic_cast<nn::ConvTranspose2dImpl*>(&model)) nn::init::normal_(conv->weight, 0.0, 0.02);
  if (auto* bn = dynamic_cast<nn::BatchNormImplBase*>(&model)) {
    nn::init::normal_(bn->weight, 1.0, 0.02);
    nn::init::zeros_(bn->bias);
  }
  for (const auto& child : model.children()) dcgan_init(*child);
}

}  // namespace dcgan
