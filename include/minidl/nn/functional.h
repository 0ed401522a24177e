#pragma once
// Stateless layer operations (LibTorch's torch::nn::functional). Each is one differentiable op whose forward
// and backward run on cuDNN/cuBLAS/own kernels on the GPU and Eigen on the CPU.
#include <array>
#include <cstdint>

#include "minidl/nn/functional/attention.h"
#include "minidl/ops.h"
#include "minidl/tensor.h"

namespace minidl {
namespace nn {

/// Two sizes (height, width); a single number means both (LibTorch's ExpandingArray<2>).
struct ExpandingArray2 {
  std::int64_t h, w;
  ExpandingArray2(std::int64_t v) : h(v), w(v) {}
  ExpandingArray2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  ExpandingArray2(std::initializer_list<std::int64_t> l);
  bool operator==(const ExpandingArray2& o) const { return h == o.h && w == o.w; }
};

/// LibTorch's reductions (also minidl::kNone, kMean, kSum, kBatchMean); BatchMean is kl_div's alone.
enum class Reduction { None, Mean, Sum, BatchMean };

/// Options of nn::ReLU and functional::relu, as LibTorch's ReLUOptions: `inplace` overwrites the input.
struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}  // implicit, as LibTorch's
  ReLUOptions& inplace(bool v) {
    inplace_ = v;
    return *this;
  }
  bool inplace() const { return inplace_; }

 private:
  bool inplace_;
};

namespace functional {

using ReLUFuncOptions = ReLUOptions;

/// y = x · weightᵀ + bias; x (..., in_features), weight (out_features, in_features), bias (out_features) or undefined.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());
/// relu(linear(input, weight, bias)) with the bias and the ReLU in one pass over the output (nn::LinearReLU).
Tensor linear_relu(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

/// input (N, C, H, W), weight (K, C/groups, R, S), bias (K) or undefined.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), ExpandingArray2 stride = 1,
              ExpandingArray2 padding = 0, ExpandingArray2 dilation = 1, std::int64_t groups = 1);
/// relu(conv2d(...)) with the ReLU applied by the convolution kernel as it writes the output (nn::ConvReLU2d):
/// the same values as the two ops, one pass over the output fewer in the forward and one kernel fewer.
Tensor conv2d_relu(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), ExpandingArray2 stride = 1,
                   ExpandingArray2 padding = 0, ExpandingArray2 dilation = 1, std::int64_t groups = 1);

/// stride defaults to kernel_size (pass 0).
Tensor max_pool2d(const Tensor& input, ExpandingArray2 kernel_size, ExpandingArray2 stride = 0,
                  ExpandingArray2 padding = 0);
/// count_include_pad = true (PyTorch's default).
Tensor avg_pool2d(const Tensor& input, ExpandingArray2 kernel_size, ExpandingArray2 stride = 0,
                  ExpandingArray2 padding = 0);
/// Output sizes that divide the input sizes (including 1x1, global average pooling).
Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray2 output_size);

/// input (N, C) or (N, C, L) or (N, C, H, W). In training mode normalises with batch statistics and updates
/// running_mean/running_var in place (if defined) with `momentum`; in eval mode uses the running statistics.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

/// Zeroes elements with probability p and scales the rest by 1/(1-p); identity when !training.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);
/// Zeroes whole channels of (N, C, H, W) input.
Tensor dropout2d(const Tensor& input, double p = 0.5, bool training = true);

/// ReLU; with inplace(true) the input is overwritten and returned (torch::relu_), which saves a buffer of the
/// input's size. LibTorch's names: functional::relu(x, ReLUFuncOptions().inplace(true)).
inline Tensor relu(Tensor x, const ReLUFuncOptions& options = {}) {
  return options.inplace() ? minidl::relu_(x) : minidl::relu(x);
}
inline Tensor leaky_relu(const Tensor& x, double slope = 0.01) { return minidl::leaky_relu(x, slope); }
inline Tensor gelu(const Tensor& x) { return minidl::gelu(x); }
inline Tensor sigmoid(const Tensor& x) { return minidl::sigmoid(x); }
inline Tensor tanh(const Tensor& x) { return minidl::tanh(x); }
inline Tensor softmax(const Tensor& x, std::int64_t dim) { return minidl::softmax(x, dim); }
inline Tensor log_softmax(const Tensor& x, std::int64_t dim) { return minidl::log_softmax(x, dim); }

/// Cross entropy from logits (N, C) and class indices (N, int64), fused and stable; label_smoothing as PyTorch.
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                     double label_smoothing = 0.0);
/// Negative log likelihood from log-probabilities (N, C) and class indices (N).
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace functional
}  // namespace nn
}  // namespace minidl

#include "minidl/nn/functional/basics.h"
#include "minidl/nn/functional/generative.h"
#include "minidl/nn/functional/normalization.h"
