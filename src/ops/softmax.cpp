// softmax and log_softmax over one dim; the backward uses only the saved output. bfloat16 / float16: computed in
// float32 by the GPU kernels, through the float path on the CPU (layers/lowp.h); the result in the input's dtype.
#include "autocast/policy.h"
#include "layers/lowp.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

Tensor softmax_impl(const Tensor& a_in, std::int64_t dim, bool log, const char* name) {
  ops::check_defined(a_in, name, "self");
  const Tensor a = ops::dense(a_in);
  ops::check_floating(a, name);
  if (layers::needs_float_path(a, true)) return softmax_impl(layers::widen(a), dim, log, name).to(a.dtype());
  const auto d = static_cast<std::size_t>(ops::wrap_dim(dim, a.dim(), name));
  const Shape& s = a.sizes();
  const std::int64_t outer = ops::prod(s, 0, d), n = s.empty() ? 1 : s[d], inner = ops::prod(s, d + 1, s.size());
  Tensor y = ops::empty_as(s, a);
  if (a.numel() > 0) MINIDL_ON_BACKEND(a.device(), softmax_forward(a, y, outer, n, inner, log));
  autograd::SavedTensor sy(y, name);
  return autograd::record(y, log ? "LogSoftmaxBackward" : "SoftmaxBackward", {a}, [=](const Tensor& g) {
    Tensor dx = ops::empty_as(g.sizes(), g);
    const Tensor yv = sy.get();
    MINIDL_ON_BACKEND(g.device(), softmax_backward(yv, g, dx, outer, n, inner, log));
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

Tensor softmax(const Tensor& a, std::int64_t dim) {
  MINIDL_AUTOCAST(softmax, a, dim);
  return softmax_impl(a, dim, false, "softmax");
}
Tensor log_softmax(const Tensor& a, std::int64_t dim) {
  MINIDL_AUTOCAST(log_softmax, a, dim);
  return softmax_impl(a, dim, true, "log_softmax");
}

}  // namespace minidl
