#pragma once
// Swish (SiLU), swish(x) = x * sigmoid(x), as a user-defined differentiable op: the forward pass runs
// minidl's tensor ops with gradient recording off, and autograd::record attaches a hand-written backward,
//   d swish / dx = s + x * s * (1 - s) = s * (1 + x * (1 - s)),   s = sigmoid(x),
// instead of letting the engine chain the gradients of sigmoid and mul (one node instead of two, and only
// x and s kept for backward). It runs on whatever device x is on. tests/test_custom_op_example.cpp checks it
// with autograd::gradcheck.
#include <minidl/minidl.h>

namespace custom_model {

inline minidl::Tensor swish(const minidl::Tensor& x) {
  minidl::Tensor s, out;
  {
    minidl::NoGradGuard no_grad;
    s = minidl::sigmoid(x);
    out = x * s;
  }
  // SavedTensor remembers x's version: modifying x in place before backward is reported, not silently wrong.
  const minidl::autograd::SavedTensor saved_x(x, "swish");
  return minidl::autograd::record(out, "SwishBackward", {x}, [saved_x, s](const minidl::Tensor& grad) {
    const minidl::Tensor x = saved_x.get();
    return std::vector<minidl::Tensor>{grad * s * (1.0 + x * (1.0 - s))};
  });
}

/// The op as a module, usable inside nn::Sequential like nn::ReLU.
struct SwishImpl : minidl::nn::Module {
  SwishImpl() : Module("Swish") {}
  minidl::Tensor forward(const minidl::Tensor& x) override { return swish(x); }
};
MINIDL_MODULE(Swish);

}  // namespace custom_model
