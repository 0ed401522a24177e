#pragma once
// The scans' formulas for both backends: the running sum or product (accumulated as kernels/reduce.h's sums and
// products: int64 for integral elements, float32 for the 16-bit floats) and the exact gradient of cumprod.
#include <cstdint>

#include "kernels/convert.h"
#include "kernels/reduce.h"

namespace minidl {
namespace kernels {

enum class ScanOp : std::uint8_t { Sum, Prod };

struct ScanSum {
  template <class A>
  MINIDL_HD A operator()(A a, A b) const {
    return wrap_add(a, b);
  }
};
struct ScanProd {
  template <class A>
  MINIDL_HD A operator()(A a, A b) const {
    return wrap_mul(a, b);
  }
};

/// Calls f(op functor, identity) for op.
template <class A, class F>
void visit_scan(ScanOp op, F&& f) {
  if (op == ScanOp::Sum) return f(ScanSum{}, A(0));
  return f(ScanProd{}, A(1));
}

/// One slice of n elements, `stride` apart: dx[k] = sum over j >= k of g[j] * prod over i <= j, i != k of x[i],
/// as P[k] * S[k] with the prefix product P[k] = prod_{i<k} x[i] and S[k] = g[k] + x[k+1] * S[k+1]. No division,
/// so zeros in x need no special case (PyTorch's cumprod_backward handles them apart). dx holds P first.
template <class T>
MINIDL_HD void cumprod_backward_slice(const T* x, const T* g, T* dx, std::int64_t n, std::int64_t stride) {
  using A = opmath_t<T>;
  A p = A(1);
  for (std::int64_t k = 0; k < n; ++k) {
    dx[k * stride] = convert<T>(p);
    p *= convert<A>(x[k * stride]);
  }
  A s = A(0);
  for (std::int64_t k = n - 1; k >= 0; --k) {
    s = k == n - 1 ? convert<A>(g[k * stride]) : convert<A>(g[k * stride]) + convert<A>(x[(k + 1) * stride]) * s;
    dx[k * stride] = convert<T>(convert<A>(dx[k * stride]) * s);
  }
}

}  // namespace kernels
}  // namespace minidl
