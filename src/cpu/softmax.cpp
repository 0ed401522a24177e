// CPU softmax and log-softmax over the middle dimension of an (outer, n, inner) view, and their backward (see
// kernels/backend.h).
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {

void softmax_forward(const Tensor& x, Tensor& y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool log) {
  kernels::dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
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
