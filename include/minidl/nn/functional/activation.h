#pragma once
// The activations of LibTorch's torch/nn/functional/activation.h beyond relu/leaky_relu/sigmoid/tanh (functional.h):
// silu, softplus, elu, mish, hardswish, gelu with `approximate`, softmax2d, and softmax/log_softmax with options.
// Each elementwise one is one kernel forward and one backward (the functors of src/kernels/elementwise.h).
#include <cstdint>
#include <string>

#include "minidl/tensor.h"

#include "minidl/arg.h"

namespace minidl {
namespace nn {

struct SoftplusOptions {
  MINIDL_ARG(double, beta) = 1.0;
  MINIDL_ARG(double, threshold) = 20.0;
};
struct ELUOptions {
  MINIDL_ARG(double, alpha) = 1.0;
  MINIDL_ARG(bool, inplace) = false;
};
struct LeakyReLUOptions {
  MINIDL_ARG(double, negative_slope) = 1e-2;
  MINIDL_ARG(bool, inplace) = false;
};
/// approximate: "none" (the exact erf form) or "tanh".
struct GELUOptions {
  MINIDL_ARG(std::string, approximate) = "none";
};
struct SoftmaxOptions {
  SoftmaxOptions(std::int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor): LibTorch's
  MINIDL_ARG(std::int64_t, dim);
};
struct LogSoftmaxOptions {
  LogSoftmaxOptions(std::int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor): LibTorch's
  MINIDL_ARG(std::int64_t, dim);
};

namespace functional {

using SoftplusFuncOptions = SoftplusOptions;
using ELUFuncOptions = ELUOptions;
using LeakyReLUFuncOptions = LeakyReLUOptions;
using GELUFuncOptions = GELUOptions;
using SoftmaxFuncOptions = SoftmaxOptions;
using LogSoftmaxFuncOptions = LogSoftmaxOptions;

/// x * sigmoid(x)
Tensor silu(const Tensor& input);
/// log(sigmoid(x)), stable for any x.
Tensor logsigmoid(const Tensor& input);
/// log(1 + exp(beta x)) / beta, reverting to x where beta x > threshold.
Tensor softplus(const Tensor& input, const SoftplusFuncOptions& options = {});
/// x for x > 0, else alpha (exp(x) - 1); with inplace(true) the input is overwritten and returned.
Tensor elu(Tensor input, const ELUFuncOptions& options = {});
/// x for x > 0, else negative_slope x; with inplace(true) the input is overwritten and returned.
Tensor leaky_relu(Tensor input, const LeakyReLUFuncOptions& options);
/// x * tanh(softplus(x))
Tensor mish(const Tensor& input);
/// x * relu6(x + 3) / 6
Tensor hardswish(const Tensor& input);
/// GELU, exact ("none") or with the tanh approximation; an other string is a ValueError.
Tensor gelu(const Tensor& input, const GELUFuncOptions& options);
/// Softmax over the channels (dim -3) of a (C, H, W) or (N, C, H, W) input.
Tensor softmax2d(const Tensor& input);
Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& options);
Tensor log_softmax(const Tensor& input, const LogSoftmaxFuncOptions& options);

}  // namespace functional
}  // namespace nn
}  // namespace minidl

