// CPU softmax and log-softmax over the middle dimension of an (outer, n, inner) view, and their backward (see
// kernels/backend.h).
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

#include <Eigen/Core>
#include <cmath>
#include <limits>
#include <type_traits>

namespace minidl {
namespace cpu {
namespace {

/// exp(z) of z <= 0 through Eigen's vector exp, which clamps its argument (exp(-inf) would be 4.5e-39 in float32,
/// not 0): below the log of the smallest normal number the result is 0, so masked-out scores (-inf) get weight 0
/// exactly, as in PyTorch, and only subnormal results are flushed.
template <class T, class Z>
auto exp_nonpositive(const Z& z) {
  const T lowest = std::log(std::numeric_limits<T>::min());
  return (z < lowest).select(T(0), z.exp());  // NaN stays NaN
}

/// Rows along the last dim (inner 1) of float32 / float64: Eigen's vector max, exp and sums, one exp per element
/// (the strided loop below calls libm's exp twice per element, which dominated an attention's softmax). The maximum
/// propagates NaN, so a row holding one is NaN throughout, as the loop's.
template <class T>
void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t n, bool log) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  parallel_for(rows, 4.0 * static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const ConstRow xs(x + r * n, n);
      Row ys(y + r * n, n);
      const T mx = xs.template maxCoeff<Eigen::PropagateNaN>();
      if (log) {
        const T lse = std::log(exp_nonpositive<T>(xs - mx).sum());
        ys = xs - mx - lse;
      } else {
        ys = exp_nonpositive<T>(xs - mx);
        ys *= T(1) / ys.sum();
      }
    }
  });
}

template <class T>
void softmax_rows_backward(const T* y, const T* dy, T* dx, std::int64_t rows, std::int64_t n, bool log) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  parallel_for(rows, 3.0 * static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const ConstRow ys(y + r * n, n), dys(dy + r * n, n);
      Row dxs(dx + r * n, n);
      if (log) {
        dxs = dys - exp_nonpositive<T>(ys) * dys.sum();
      } else {
        dxs = ys * (dys - (dys * ys).sum());
      }
    }
  });
}

template <class T>
constexpr bool kEigenRows = std::is_same<T, float>::value || std::is_same<T, double>::value;

}  // namespace

void softmax_forward(const Tensor& x, Tensor& y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool log) {
  kernels::dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
    if constexpr (kEigenRows<T>) {
      if (inner == 1) {
        if (n > 0) softmax_rows(px, py, outer, n, log);
        return;
      }
    }
    parallel_for(outer * inner, 10.0 * static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t j = begin; j < end; ++j) {
        const std::int64_t o = j / inner, i = j % inner;
        const T* xs = px + o * n * inner + i;
        T* ys = py + o * n * inner + i;
        // Subtract the maximum first: exp never overflows, so logits of +-1000 stay finite.
        T mx = xs[0];
        for (std::int64_t r = 1; r < n; ++r) mx = xs[r * inner] > mx ? xs[r * inner] : mx;
        T sum = 0;
        for (std::int64_t r = 0; r < n; ++r) sum += kernels::m_exp(xs[r * inner] - mx);
        const T lse = kernels::m_log(sum);
        for (std::int64_t r = 0; r < n; ++r) {
          const T z = xs[r * inner] - mx;
          ys[r * inner] = log ? z - lse : kernels::m_exp(z) / sum;
        }
      }
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, std::int64_t outer, std::int64_t n,
                      std::int64_t inner, bool log) {
  kernels::dispatch_floating(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* py = y.data_ptr<T>();
    const T* pdy = dy.data_ptr<T>();
    T* pdx = dx.data_ptr<T>();
    if constexpr (kEigenRows<T>) {
      if (inner == 1) {
        if (n > 0) softmax_rows_backward(py, pdy, pdx, outer, n, log);
        return;
      }
    }
    parallel_for(outer * inner, 6.0 * static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t j = begin; j < end; ++j) {
        const std::int64_t base = (j / inner) * n * inner + j % inner;
        T s = 0;
        // softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy)
        for (std::int64_t r = 0; r < n; ++r)
          s += log ? pdy[base + r * inner] : pdy[base + r * inner] * py[base + r * inner];
        for (std::int64_t r = 0; r < n; ++r) {
          const std::int64_t q = base + r * inner;
          pdx[q] = log ? pdy[q] - kernels::m_exp(py[q]) * s : py[q] * (pdy[q] - s);
        }
      }
    });
  });
}

}  // namespace cpu
}  // namespace minidl
