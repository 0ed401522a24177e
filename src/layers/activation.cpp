// The activations of nn/functional/activation.h. Each elementwise one is one kernel op of the tables in
// src/kernels/elementwise.h, whose backward is the matching gradient functor on the saved input, so the CPU and
// the GPU evaluate the same formula.
#include "autocast/policy.h"
#include "minidl/nn/functional/activation.h"

#include "minidl/autograd.h"
#include "minidl/nn/functional.h"
#include "ops/elementwise.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

using kernels::BinaryOp;
using kernels::OpScalars;
using kernels::UnaryOp;

/// op(x) recorded with the backward grad_op(g, x).
Tensor activation(const Tensor& input, UnaryOp op, BinaryOp grad_op, const OpScalars& s, const char* name,
                  const char* node) {
  ops::check_defined(input, name, "input");
  ops::check_floating(input, name);  // PyTorch has no integral activations
  Tensor a = input;
  Tensor out = ops::unary_forward(op, s, a, name);
  const autograd::SavedTensor saved(a, name);
  return autograd::record(out, node, {a}, [saved, grad_op, s](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(grad_op, s, g, saved.get())};
  });
}

}  // namespace

Tensor silu(const Tensor& input) {
  return activation(input, UnaryOp::Silu, BinaryOp::SiluGrad, 0.0, "silu", "SiluBackward");
}

Tensor logsigmoid(const Tensor& input) {
  return activation(input, UnaryOp::LogSigmoid, BinaryOp::LogSigmoidGrad, 0.0, "logsigmoid", "LogSigmoidBackward");
}

Tensor softplus(const Tensor& input, const SoftplusFuncOptions& o) {
  MINIDL_AUTOCAST(softplus, input, o);
  MINIDL_CHECK(o.beta() != 0.0, ValueError, "softplus: beta must be nonzero, found ", o.beta());
  return activation(input, UnaryOp::Softplus, BinaryOp::SoftplusGrad, OpScalars(o.beta(), o.threshold()), "softplus",
                    "SoftplusBackward");
}

Tensor elu(Tensor input, const ELUFuncOptions& o) {
  if (!o.inplace()) return activation(input, UnaryOp::Elu, BinaryOp::EluGrad, o.alpha(), "elu", "EluBackward");
  ops::check_defined(input, "elu_", "input");
  ops::check_floating(input, "elu_");
  const double alpha = o.alpha();
  return ops::unary_inplace(input, UnaryOp::Elu, alpha, "elu_", [alpha](const Tensor& x) {
    return activation(x, UnaryOp::Elu, BinaryOp::EluGrad, alpha, "elu", "EluBackward");
  });
}

Tensor leaky_relu(Tensor input, const LeakyReLUFuncOptions& o) {
  return o.inplace() ? minidl::leaky_relu_(input, o.negative_slope()) : minidl::leaky_relu(input, o.negative_slope());
}

Tensor mish(const Tensor& input) {
  return activation(input, UnaryOp::Mish, BinaryOp::MishGrad, 0.0, "mish", "MishBackward");
}

Tensor hardswish(const Tensor& input) {
  return activation(input, UnaryOp::Hardswish, BinaryOp::HardswishGrad, 0.0, "hardswish", "HardswishBackward");
}

Tensor gelu(const Tensor& input, const GELUFuncOptions& o) {
  MINIDL_CHECK(o.approximate() == "none" || o.approximate() == "tanh", ValueError,
               "gelu: approximate must be \"none\" or \"tanh\", found \"", o.approximate(), "\"");
  if (o.approximate() == "none") return minidl::gelu(input);
  return activation(input, UnaryOp::GeluTanh, BinaryOp::GeluTanhGrad, 0.0, "gelu", "GeluBackward");
}

Tensor softmax2d(const Tensor& input) {
  ops::check_defined(input, "softmax2d", "input");
  MINIDL_CHECK(input.dim() == 3 || input.dim() == 4, ValueError,
               "Softmax2d: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, found shape ", shape_str(input.sizes()));
  return minidl::softmax(input, -3);
}

Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& o) { return minidl::softmax(input, o.dim()); }
Tensor log_softmax(const Tensor& input, const LogSoftmaxFuncOptions& o) { return minidl::log_softmax(input, o.dim()); }

}  // namespace functional
}  // namespace nn
}  // namespace minidl
