// Batch norm over (N, C, HW), viewed as the column-major (HW, N*C) matrix whose column j = n*C + c is the plane
// of image n, channel c. Every pass works plane by plane with Eigen column expressions, spread over
// parallel_for; per-channel statistics are sums of per-plane sums, accumulated in double (as PyTorch's CPU
// kernel does for float) in a fixed order, so they are accurate and independent of the thread count.
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include "kernels/backend.h"

#include <Eigen/Core>
#include <vector>

namespace minidl {
namespace cpu {
namespace {

using kernels::BatchNormParams;
using Index = std::int64_t;
template <class T>
using Planes = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>;
template <class T>
using MutPlanes = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>;
template <class T>
using ConstArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

void check_params(const BatchNormParams& p, const char* op) {
  MINIDL_CHECK(p.N > 0, ValueError, op, ": batch size must be positive, found ", p.N);
  MINIDL_CHECK(p.C > 0, ValueError, op, ": channels must be positive, found ", p.C);
  MINIDL_CHECK(p.HW > 0, ValueError, op, ": spatial size must be positive, found ", p.HW);
  MINIDL_CHECK(p.eps >= 0, ValueError, op, ": eps must be >= 0, found ", p.eps);
}

/// Per-call working memory: a per-thread buffer that only grows, so steady-state steps do not allocate.
class Workspace {
 public:
  explicit Workspace(Index doubles) {
    thread_local std::vector<double> buffer;
    if (static_cast<Index>(buffer.size()) < doubles) buffer.resize(static_cast<std::size_t>(doubles));
    next_ = buffer.data();
  }
  /// The next n doubles of the buffer, as an array.
  Arr<double> take(Index n) {
    Arr<double> a(next_, n);
    next_ += n;
    return a;
  }

 private:
  double* next_;
};

/// Calls f(j, c) for every plane j (of channel c), spread over the pool; `cost` is cycles per value.
template <class F>
void for_each_plane(const BatchNormParams& p, double cost, F&& f) {
  parallel_for(p.N * p.C, cost * static_cast<double>(p.HW), [&](Index begin, Index end) {
    for (Index j = begin; j < end; ++j) f(j, j % p.C);
  });
}

/// totals[c] = sum over n of per_plane[n * C + c], always in the same order.
void sum_over_batch(const BatchNormParams& p, const Arr<double>& per_plane, Arr<double> totals) {
  totals = Eigen::Map<const Eigen::MatrixXd>(per_plane.data(), p.C, p.N).rowwise().sum().array();
}

/// Folds the normalisation and the affine transform into y = x * scale + shift:
/// scale = invstd * gamma, shift = beta - mean * scale.
template <class T>
void fold_affine(const BatchNormParams& p, const T* gamma, const T* beta, const Arr<double>& mean,
                 const Arr<double>& invstd, Arr<double> scale, Arr<double> shift) {
  scale = invstd;
  if (gamma) scale *= ConstArr<T>(gamma, p.C).template cast<double>();
  shift = -mean * scale;
  if (beta) shift += ConstArr<T>(beta, p.C).template cast<double>();
}

template <class T>
void apply_scale_shift(const BatchNormParams& p, const T* x, const Arr<double>& scale, const Arr<double>& shift,
                       T* y) {
  const Planes<T> X(x, p.HW, p.N * p.C);
  MutPlanes<T> Y(y, p.HW, p.N * p.C);
  for_each_plane(p, 1.0, [&](Index j, Index c) {
    Y.col(j).array() = X.col(j).array() * static_cast<T>(scale[c]) + static_cast<T>(shift[c]);
  });
}

}  // namespace

template <class T>
void batch_norm_forward_train(const BatchNormParams& p, const T* x, const kernels::opmath_t<T>* gamma,
                              const kernels::opmath_t<T>* beta, T* y, kernels::opmath_t<T>* save_mean,
                              kernels::opmath_t<T>* save_invstd, kernels::opmath_t<T>* running_mean,
                              kernels::opmath_t<T>* running_var) {
  check_params(p, "batch_norm_forward_train");
  const Index M = p.N * p.HW;
  MINIDL_CHECK(M > 1, ValueError, "batch_norm_forward_train: expected more than 1 value per channel (N * HW), found ",
               M);
  Workspace ws(p.N * p.C + 5 * p.C);
  Arr<double> per_plane = ws.take(p.N * p.C), mean = ws.take(p.C), var = ws.take(p.C), invstd = ws.take(p.C),
              scale = ws.take(p.C), shift = ws.take(p.C);
  const Planes<T> X(x, p.HW, p.N * p.C);

  // Two passes (mean, then squared deviations) instead of E[x^2] - E[x]^2, which cancels badly.
  for_each_plane(p, 1.0, [&](Index j, Index) { per_plane[j] = X.col(j).template cast<double>().sum(); });
  sum_over_batch(p, per_plane, mean);
  mean /= static_cast<double>(M);
  for_each_plane(p, 2.0, [&](Index j, Index c) {
    per_plane[j] = (X.col(j).template cast<double>().array() - mean[c]).square().sum();
  });
  sum_over_batch(p, per_plane, var);
  var /= static_cast<double>(M);
  invstd = (var + p.eps).rsqrt();

  Arr<T>(save_mean, p.C) = mean.template cast<T>();
  Arr<T>(save_invstd, p.C) = invstd.template cast<T>();
  if (running_mean) {
    Arr<T> rm(running_mean, p.C);
    rm = ((1.0 - p.momentum) * rm.template cast<double>() + p.momentum * mean).template cast<T>();
  }
  if (running_var) {
    Arr<T> rv(running_var, p.C);
    const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
    rv = ((1.0 - p.momentum) * rv.template cast<double>() + (p.momentum * unbias) * var).template cast<T>();
  }
  fold_affine(p, gamma, beta, mean, invstd, scale, shift);
  apply_scale_shift(p, x, scale, shift, y);
}

template <class T>
void batch_norm_forward_eval(const BatchNormParams& p, const T* x, const kernels::opmath_t<T>* gamma,
                             const kernels::opmath_t<T>* beta, const kernels::opmath_t<T>* running_mean,
                             const kernels::opmath_t<T>* running_var, T* y) {
  check_params(p, "batch_norm_forward_eval");
  Workspace ws(4 * p.C);
  Arr<double> mean = ws.take(p.C), invstd = ws.take(p.C), scale = ws.take(p.C), shift = ws.take(p.C);
  mean = ConstArr<T>(running_mean, p.C).template cast<double>();
  invstd = (ConstArr<T>(running_var, p.C).template cast<double>() + p.eps).rsqrt();
  fold_affine(p, gamma, beta, mean, invstd, scale, shift);
  apply_scale_shift(p, x, scale, shift, y);
}

template <class T>
void batch_norm_backward(const BatchNormParams& p, const T* x, const T* dy, const kernels::opmath_t<T>* gamma,
                         const kernels::opmath_t<T>* save_mean, const kernels::opmath_t<T>* save_invstd, T* dx,
                         kernels::opmath_t<T>* dgamma, kernels::opmath_t<T>* dbeta) {
  check_params(p, "batch_norm_backward");
  const Index planes = p.N * p.C;
  const double M = static_cast<double>(p.N * p.HW);
  Workspace ws(2 * planes + 4 * p.C);
  Arr<double> plane_dy = ws.take(planes), plane_dy_xmu = ws.take(planes), mean = ws.take(p.C),
              invstd = ws.take(p.C), sum_dy = ws.take(p.C), sum_dy_xmu = ws.take(p.C);
  mean = ConstArr<T>(save_mean, p.C).template cast<double>();
  invstd = ConstArr<T>(save_invstd, p.C).template cast<double>();
  const Planes<T> X(x, p.HW, planes), dY(dy, p.HW, planes);

  for_each_plane(p, 3.0, [&](Index j, Index c) {
    const auto g = dY.col(j).template cast<double>().array();
    plane_dy[j] = g.sum();
    plane_dy_xmu[j] = (g * (X.col(j).template cast<double>().array() - mean[c])).sum();
  });
  sum_over_batch(p, plane_dy, sum_dy);
  sum_over_batch(p, plane_dy_xmu, sum_dy_xmu);
  if (dbeta) Arr<T>(dbeta, p.C) = sum_dy.template cast<T>();
  if (dgamma) Arr<T>(dgamma, p.C) = (sum_dy_xmu * invstd).template cast<T>();

  // dx = gamma * invstd * (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean))).
  // The per-channel coefficients overwrite the sums they come from.
  Arr<double>& gain = invstd;
  Arr<double>& mean_dy = sum_dy;
  Arr<double>& k = sum_dy_xmu;
  k *= invstd.square() / M;
  mean_dy /= M;
  if (gamma) gain *= ConstArr<T>(gamma, p.C).template cast<double>();
  MutPlanes<T> dX(dx, p.HW, planes);
  for_each_plane(p, 2.0, [&](Index j, Index c) {
    dX.col(j).array() = ((dY.col(j).array() - static_cast<T>(mean_dy[c])) -
                         (X.col(j).array() - static_cast<T>(mean[c])) * static_cast<T>(k[c])) *
                        static_cast<T>(gain[c]);
  });
}

#define MINIDL_INSTANTIATE_BATCH_NORM(T)                                                                        \
  template void batch_norm_forward_train<T>(const BatchNormParams&, const T*, const T*, const T*, T*, T*, T*,  \
                                            T*, T*);                                                        \
  template void batch_norm_forward_eval<T>(const BatchNormParams&, const T*, const T*, const T*, const T*,     \
                                           const T*, T*);                                                   \
  template void batch_norm_backward<T>(const BatchNormParams&, const T*, const T*, const T*, const T*,         \
                                       const T*, T*, T*, T*);
MINIDL_INSTANTIATE_BATCH_NORM(float)
MINIDL_INSTANTIATE_BATCH_NORM(double)
#undef MINIDL_INSTANTIATE_BATCH_NORM

}  // namespace cpu
}  // namespace minidl
