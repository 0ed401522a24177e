#include "net.h"

namespace mnist {

void require_input_size(const minidl::data::MnistDataset& data) {
  const minidl::Shape s = data.sample_shape();  // (1, rows, cols): MnistDataset reads one channel
  MINIDL_CHECK(s[1] == kImageRows && s[2] == kImageCols, minidl::FormatError, data.images_path(),
               ": the network takes images of ", kImageRows, "x", kImageCols, " pixels, found images of ", s[1], "x",
               s[2], " (an IDX file of another image size; MNIST and Fashion-MNIST have 28x28)");
}

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
