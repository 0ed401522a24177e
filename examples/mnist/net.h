#pragma once
// The classic pytorch/examples MNIST CNN: conv 1→32 k3, ReLU, conv 32→64 k3, ReLU, maxpool 2, dropout 0.25,
// flatten, fc 9216→128, ReLU, dropout 0.5, fc 128→10. forward() returns logits; the loss is the fused
// cross_entropy (= log_softmax + nll_loss). Each ReLU is fused into the layer before it (ConvReLU2d, LinearReLU:
// the same values, one pass over the activations fewer); the parameter names are those of the PyTorch model.
#include <minidl/minidl.h>

namespace mnist {

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
