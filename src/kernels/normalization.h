#pragma once
// Row normalisation, the one statistics code behind layer_norm, rms_norm, group_norm and instance_norm: x is a
// contiguous (rows, n) matrix and each row is normalised on its own. LayerNorm's rows are the leading dims and n
// the normalized_shape; GroupNorm views (N, C, *) as (N * groups, C / groups * spatial) and InstanceNorm as
// (N * C, spatial), with their per-channel affine applied outside (it is per channel, not per column).
//
//   centered (LayerNorm):  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(mean((x - mean)^2) + eps)
//   not centered (RMSNorm): xhat = x * rstd,         rstd = 1 / sqrt(mean(x^2) + eps)    (mean is 0)
//   y = xhat * gamma + beta  (gamma, beta: n values per column, or absent)
//
// The backward of one row, with g = dy * gamma and the row's means over its n columns:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (the mean(g) term only when centered)
//   dgamma[c] = sum over rows of dy * xhat,  dbeta[c] = sum over rows of dy.
// The formulas below are shared by the CPU kernel (src/cpu/normalization.cpp, accumulating in double) and the CUDA
// kernels (src/cuda/normalization.cu, accumulating in float for float rows).
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MINIDL_NORM_HD __host__ __device__ __forceinline__
#else
#define MINIDL_NORM_HD inline
#endif

namespace minidl {
namespace kernels {

struct RowNormParams {
  std::int64_t rows = 0, n = 0;
  double eps = 1e-5;
  bool centered = true;  // false: RMSNorm (no mean subtracted, mean written as 0)
};

/// The row's statistics from its sum (centered only) and its sum of squared deviations from `mean`.
template <class A>
struct RowStats {
  A mean, rstd;
  MINIDL_NORM_HD static A mean_of(A sum, std::int64_t n, bool centered) {
    return centered ? sum / static_cast<A>(n) : A(0);
  }
  MINIDL_NORM_HD static A rstd_of(A sum_sq_dev, std::int64_t n, double eps) {
    return A(1) / std::sqrt(sum_sq_dev / static_cast<A>(n) + static_cast<A>(eps));
  }
  MINIDL_NORM_HD A xhat(A x) const { return (x - mean) * rstd; }
};

/// dx of one element from the row's sums of g and g * xhat (g = dy * gamma).
template <class A>
struct RowNormGrad {
  A rstd, mean_g, mean_gx;
  MINIDL_NORM_HD RowNormGrad(A rstd_, A sum_g, A sum_gx, std::int64_t n, bool centered)
      : rstd(rstd_), mean_g(centered ? sum_g / static_cast<A>(n) : A(0)), mean_gx(sum_gx / static_cast<A>(n)) {}
  MINIDL_NORM_HD A operator()(A g, A xhat) const { return rstd * (g - mean_g - xhat * mean_gx); }
};

}  // namespace kernels
}  // namespace minidl
