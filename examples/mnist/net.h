#pragma once
// The classic pytorch/examples MNIST CNN: conv 1→32 k3, ReLU, conv 32→64 k3, ReLU, maxpool 2, dropout 0.25,
// flatten, fc 9216→128, ReLU, dropout 0.5, fc 128→10. forward() returns logits; the loss is the fused
// cross_entropy (= log_softmax + nll_loss).
#include <minidl/minidl.h>

namespace mnist {

struct NetImpl : minidl::nn::Module {
  NetImpl();
  minidl::Tensor forward(const minidl::Tensor& x) override;

  minidl::nn::Conv2d conv1, conv2;
  minidl::nn::Dropout dropout1, dropout2;
  minidl::nn::Linear fc1, fc2;
};
MINIDL_MODULE(Net);

}  // namespace mnist
