// Row normalisation on the CPU (kernels/backend.h, formulas in kernels/normalization.h): rows spread over
// parallel_for, each row's sums accumulated in double in a fixed order; the parameter gradients are summed over
// the rows per column block, so every result is independent of the thread count. Also the reference the CUDA
// kernels are tested against.
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include <algorithm>
#include <vector>

#include "kernels/backend.h"

namespace minidl {
namespace cpu {
namespace {

using kernels::RowNormGrad;
using kernels::RowNormParams;
using kernels::RowStats;
using Index = std::int64_t;

/// The columns each parameter-gradient task sums over every row: wide enough for whole cache lines per row.
constexpr Index kColumnBlock = 64;

template <class T>
RowStats<double> row_stats(const RowNormParams& p, const T* xr) {
  double sum = 0;
  if (p.centered) {
    for (Index c = 0; c < p.n; ++c) sum += static_cast<double>(xr[c]);
  }
  const double mean = RowStats<double>::mean_of(sum, p.n, p.centered);
  double sq = 0;  // two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels badly
  for (Index c = 0; c < p.n; ++c) {
    const double d = static_cast<double>(xr[c]) - mean;
    sq += d * d;
  }
  return {mean, RowStats<double>::rstd_of(sq, p.n, p.eps)};
}

}  // namespace

template <class T>
void row_norm_forward(const RowNormParams& p, const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd) {
  if (p.rows == 0 || p.n == 0) return;
  parallel_for(p.rows, 4.0 * static_cast<double>(p.n), [&](Index begin, Index end) {
    for (Index r = begin; r < end; ++r) {
      const T* xr = x + r * p.n;
      T* yr = y + r * p.n;
      const RowStats<double> s = row_stats(p, xr);
      for (Index c = 0; c < p.n; ++c) {
        double v = s.xhat(static_cast<double>(xr[c]));
        if (gamma) v *= static_cast<double>(gamma[c]);
        if (beta) v += static_cast<double>(beta[c]);
        yr[c] = static_cast<T>(v);
      }
      if (mean) mean[r] = static_cast<T>(s.mean);
      if (rstd) rstd[r] = static_cast<T>(s.rstd);
    }
  });
}

template <class T>
void row_norm_backward(const RowNormParams& p, const T* x, const T* dy, const T* gamma, const T* mean, const T* rstd,
                       T* dx, T* dgamma, T* dbeta) {
  if (p.n == 0) return;
  const auto stats = [&](Index r) {
    return RowStats<double>{static_cast<double>(mean[r]), static_cast<double>(rstd[r])};
  };
  if (dx && p.rows > 0) {
    parallel_for(p.rows, 6.0 * static_cast<double>(p.n), [&](Index begin, Index end) {
      for (Index r = begin; r < end; ++r) {
        const T *xr = x + r * p.n, *dyr = dy + r * p.n;
        const RowStats<double> s = stats(r);
        double sum_g = 0, sum_gx = 0;
        for (Index c = 0; c < p.n; ++c) {
          const double g = static_cast<double>(dyr[c]) * (gamma ? static_cast<double>(gamma[c]) : 1.0);
          sum_g += g;
          sum_gx += g * s.xhat(static_cast<double>(xr[c]));
        }
        const RowNormGrad<double> grad(s.rstd, sum_g, sum_gx, p.n, p.centered);
        for (Index c = 0; c < p.n; ++c) {
          const double g = static_cast<double>(dyr[c]) * (gamma ? static_cast<double>(gamma[c]) : 1.0);
          dx[r * p.n + c] = static_cast<T>(grad(g, s.xhat(static_cast<double>(xr[c]))));
        }
      }
    });
  }
  if (!dgamma && !dbeta) return;
  const Index blocks = (p.n + kColumnBlock - 1) / kColumnBlock;
  parallel_for(blocks, 3.0 * static_cast<double>(p.rows * kColumnBlock), [&](Index begin, Index end) {
    std::vector<double> dg(kColumnBlock), db(kColumnBlock);
    for (Index b = begin; b < end; ++b) {
      const Index c0 = b * kColumnBlock, width = std::min(kColumnBlock, p.n - c0);
      std::fill(dg.begin(), dg.end(), 0.0);
      std::fill(db.begin(), db.end(), 0.0);
      for (Index r = 0; r < p.rows; ++r) {
        const RowStats<double> s = stats(r);
        const T *xr = x + r * p.n + c0, *dyr = dy + r * p.n + c0;
        for (Index c = 0; c < width; ++c) {
          const double g = static_cast<double>(dyr[c]);
          dg[static_cast<std::size_t>(c)] += g * s.xhat(static_cast<double>(xr[c]));
          db[static_cast<std::size_t>(c)] += g;
        }
      }
      for (Index c = 0; c < width; ++c) {
        if (dgamma) dgamma[c0 + c] = static_cast<T>(dg[static_cast<std::size_t>(c)]);
        if (dbeta) dbeta[c0 + c] = static_cast<T>(db[static_cast<std::size_t>(c)]);
      }
    }
  });
}

#define MINIDL_INSTANTIATE_ROW_NORM(T)                                                                               \
  template void row_norm_forward<T>(const RowNormParams&, const T*, const T*, const T*, T*, T*, T*);                 \
  template void row_norm_backward<T>(const RowNormParams&, const T*, const T*, const T*, const T*, const T*, T*, T*, \
                                     T*);
MINIDL_INSTANTIATE_ROW_NORM(float)
MINIDL_INSTANTIATE_ROW_NORM(double)
#undef MINIDL_INSTANTIATE_ROW_NORM

}  // namespace cpu
}  // namespace minidl
