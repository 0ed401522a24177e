#pragma once
// The classic pytorch/examples MNIST CNN: conv 1→32 k3, ReLU, conv 32→64 k3, ReLU, maxpool 2, dropout 0.25,
// flatten, fc 9216→128, ReLU, dropout 0.5, fc 128→10. forward() returns logits; the loss is the fused
// cross_entropy (= log_softmax + nll_loss). Each ReLU is fused into the layer before it (ConvReLU2d, LinearReLU:
// the same values, one pass over the activations fewer); the parameter names are those of the PyTorch model.
#include <minidl/minidl.h>

#include <cstdint>

namespace mnist {

/// The image size the network takes: fc1's 9216 inputs are conv2's 64 channels of 12x12 after two 3x3
/// convolutions and a 2x2 pool of a 28x28 image.
inline constexpr std::int64_t kImageRows = 28, kImageCols = 28;

/// Throws FormatError naming the dataset's images file, the expected and the found image size when its images
/// are not kImageRows x kImageCols with one channel: the network would otherwise fail deep inside (in fc1).
void require_input_size(const minidl::data::MnistDataset& data);

struct NetImpl : minidl::nn::Module {
  NetImpl();
  minidl::Tensor forward(const minidl::Tensor& x) override;

  minidl::nn::ConvReLU2d conv1, conv2;
  minidl::nn::Dropout dropout1, dropout2;
  minidl::nn::LinearReLU fc1;
  minidl::nn::Linear fc2;
};
MINIDL_MODULE(Net);

}  // namespace mnist
