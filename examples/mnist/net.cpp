#include "net.h"

namespace mnist {

namespace nn = minidl::nn;
namespace F = minidl::nn::functional;

NetImpl::NetImpl()
    : Module("Net"),
      conv1(nn::Conv2dOptions(1, 32, 3)),
      conv2(nn::Conv2dOptions(32, 64, 3)),
      dropout1(0.25),
      dropout2(0.5),
      fc1(9216, 128),
      fc2(128, 10) {
  register_module("conv1", conv1.ptr());
  register_module("conv2", conv2.ptr());
  register_module("dropout1", dropout1.ptr());
  register_module("dropout2", dropout2.ptr());
  register_module("fc1", fc1.ptr());
  register_module("fc2", fc2.ptr());
}

minidl::Tensor NetImpl::forward(const minidl::Tensor& input) {
  minidl::Tensor x = conv1(input);  // each with its ReLU
  x = conv2(x);
  x = F::max_pool2d(x, 2);
  x = dropout1(x).flatten(1);
  x = fc1(x);
  return fc2(dropout2(x));
}

}  // namespace mnist
