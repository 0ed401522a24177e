// CPU cross-entropy on log-probabilities (see kernels/backend.h): per-sample losses, their scaled sum, and the
// gradient, with label smoothing.
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {

void cross_entropy_loss_sum(const Tensor& log_probs, const Tensor& target, double smoothing, double scale,
                            Tensor& out) {
  Tensor losses = empty({log_probs.size(0)}, TensorOptions(log_probs.dtype()));
  cross_entropy_loss(log_probs, target, smoothing, losses);
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>> l(losses.data_ptr<T>(), losses.numel());
    out.data_ptr<T>()[0] = static_cast<T>(scale) * l.sum();
  });
}

void cross_entropy_loss(const Tensor& log_probs, const Tensor& target, double smoothing, Tensor& losses) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  const std::int64_t* t = target.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    MINIDL_CHECK(t[i] >= 0 && t[i] < c, IndexError, "cross_entropy: target[", i, "] = ", t[i],
                 " is out of range for ", c, " classes");
  }
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> lp(
        log_probs.data_ptr<T>(), n, c);
    T* out = losses.data_ptr<T>();
    const T eps = static_cast<T>(smoothing);
    for (std::int64_t i = 0; i < n; ++i) {
      out[i] = -((T(1) - eps) * lp(i, t[i]) + (eps / static_cast<T>(c)) * lp.row(i).sum());
    }
  });
}

void cross_entropy_backward(const Tensor& log_probs, const Tensor& target, const Tensor& grad, double smoothing,
                            bool from_logits, double scale, Tensor& dx) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  const std::int64_t* t = target.data_ptr<std::int64_t>();
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::Map<const Mat> lp(log_probs.data_ptr<T>(), n, c);
    Eigen::Map<Mat> d(dx.data_ptr<T>(), n, c);
    const T eps = static_cast<T>(smoothing);
    if (from_logits) {
      d = lp.array().exp().matrix();
    } else {
      d.setZero();
    }
    d.array() -= eps / static_cast<T>(c);
    for (std::int64_t i = 0; i < n; ++i) d(i, t[i]) -= T(1) - eps;
    if (grad.numel() == 1) {
      d *= static_cast<T>(scale) * grad.data_ptr<T>()[0];
    } else {
      const Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>> g(grad.data_ptr<T>(), n);
      d = (static_cast<T>(scale) * g).asDiagonal() * d;
    }
  });
}

}  // namespace cpu
}  // namespace minidl
