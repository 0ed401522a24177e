#pragma once
// The formulas of gradient-norm clipping (torch.nn.utils.clip_grad_norm_), compiled for host and device so the
// CPU and CUDA backends compute the same norm and the same clipping coefficient. A norm is accumulated as
// term() of each element combined with combine() (a sum, or a NaN-propagating maximum for the inf norm), over
// all gradients at once, then finish()ed; mathematically PyTorch's norm of the per-tensor norms.
#include <cmath>
#include <cstdint>

#include "kernels/elementwise.h"

namespace minidl {
namespace kernels {

struct GradNorm {
  enum class Kind : std::uint8_t { One, Two, Inf, P };
  Kind kind = Kind::Two;
  double p = 2.0;

  /// norm_type > 0 or +inf (the caller has checked).
  static GradNorm of(double norm_type) {
    GradNorm n;
    n.p = norm_type;
    n.kind = std::isinf(norm_type) ? Kind::Inf : norm_type == 1.0 ? Kind::One : norm_type == 2.0 ? Kind::Two : Kind::P;
    return n;
  }

  /// The contribution of one element, in the accumulation type A.
  template <class A, class T>
  MINIDL_HD A term(T x) const {
    const A a = static_cast<A>(x) < A(0) ? -static_cast<A>(x) : static_cast<A>(x);
    switch (kind) {
      case Kind::One: return a;
      case Kind::Two: return a * a;
      case Kind::Inf: return a;
      default: return static_cast<A>(::pow(a, static_cast<A>(p)));
    }
  }

  /// Combines two partial results; NaN wins the maximum, as torch.max.
  template <class A>
  MINIDL_HD A combine(A a, A b) const {
    if (kind != Kind::Inf) return a + b;
    return (a != a || a > b) ? a : b;
  }

  /// The norm from the combined terms of all elements.
  MINIDL_HD double finish(double s) const {
    switch (kind) {
      case Kind::One: return s;
      case Kind::Two: return ::sqrt(s);
      case Kind::Inf: return s;
      default: return ::pow(s, 1.0 / p);
    }
  }
};

/// PyTorch's clip_coef_clamped = clamp(max_norm / (total + 1e-6), max=1), in the total norm's dtype R; a NaN
/// total gives NaN (clamp keeps it), an infinite one 0.
template <class R>
MINIDL_HD R clip_coef(R max_norm, R total) {
  const R c = max_norm / (total + static_cast<R>(1e-6));
  return c > R(1) ? R(1) : c;
}

}  // namespace kernels
}  // namespace minidl
