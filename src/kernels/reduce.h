#pragma once
// The reductions' formulas: one functor per op, compiled for host and device, so that both backends reduce with
// the same arithmetic and differ only in the order of their partial results. A reducer R over stored elements In
// keeps an accumulator R::acc_t (trivially constructible, so it can live in CUDA shared memory) and provides
//   identity()             the accumulator of no elements;
//   step(acc, x, r)        acc after element x, at position r of its slice (positions grow along one step chain);
//   combine(a, b)          two partial accumulators; associative and commutative up to rounding (a position breaks
//                          the ties of max and min, so their result does not depend on the order either);
//   project<Out>(acc)      the result, stored as Out;
//   writes<Out>            whether Out is a dtype it stores: its result's, and for the ops that a reduction over
//                          several separate runs of dims splits into passes (Sum, Prod, Max, Min, Any, All) the
//                          intermediate one that keeps full precision (float32 for 16-bit floats).
// Every accumulation happens in float32 for bfloat16 / float16, in int64 for integral sums and products (which
// wrap around on overflow, as PyTorch's).
#include <cstdint>
#include <type_traits>

#include "kernels/convert.h"
#include "kernels/elementwise.h"
#include "minidl/errors.h"

namespace minidl {
namespace kernels {

/// Reductions run over the middle dim of an (outer, n, inner) view.
enum class ReduceOp : std::uint8_t {
  Sum,
  Prod,
  Max,
  Min,
  Any,
  All,
  Norm1,
  Norm2,
  NormInf,
  NormNegInf,
  Norm0,
  NormP,
  Var,
  LogSumExp
};

struct ReduceParams {
  double scale = 1;        // Sum: the result times scale (a mean: 1 / count)
  double p = 2;            // NormP: the exponent
  double correction = 1;   // Var: the divisor is max(count - correction, 0)
  bool take_sqrt = false;  // Var: the standard deviation
};

template <class T>
constexpr bool is_floating_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;
/// The accumulator of sums and products: int64 for integral and bool elements, float for the 16-bit floats.
template <class T>
using sum_acc_t = std::conditional_t<std::is_integral_v<T>, std::int64_t, opmath_t<T>>;

template <class T>
MINIDL_HD T infinity_of() {
  return static_cast<T>(INFINITY);
}

/// Integral sums and products wrap around (in unsigned arithmetic: signed overflow is undefined in C++).
template <class T>
MINIDL_HD T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
  } else {
    return a + b;
  }
}
template <class T>
MINIDL_HD T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
  } else {
    return a * b;
  }
}

/// Whether x is nonzero (a NaN is), as PyTorch's any / all see it.
template <class T>
MINIDL_HD bool truthy(T x) {
  if constexpr (is_reduced_float_v<T>) {
    return static_cast<float>(x) != 0.0f;
  } else {
    return x != T(0);
  }
}

template <class In>
struct SumReducer {
  using acc_t = sum_acc_t<In>;
  acc_t scale;
  template <class Out>
  static constexpr bool writes = std::is_same_v<Out, acc_t> || (std::is_same_v<Out, In> && is_floating_v<In>);
  MINIDL_HD acc_t identity() const { return acc_t(0); }
  MINIDL_HD acc_t step(acc_t a, In x, std::int64_t) const { return wrap_add(a, convert<acc_t>(x)); }
  MINIDL_HD acc_t combine(acc_t a, acc_t b) const { return wrap_add(a, b); }
  template <class Out>
  MINIDL_HD Out project(acc_t a) const {
    if constexpr (std::is_integral_v<acc_t>) {
      return convert<Out>(a);
    } else {
      return convert<Out>(a * scale);
    }
  }
};

template <class In>
struct ProdReducer {
  using acc_t = sum_acc_t<In>;
  template <class Out>
  static constexpr bool writes = SumReducer<In>::template writes<Out>;
  MINIDL_HD acc_t identity() const { return acc_t(1); }
  MINIDL_HD acc_t step(acc_t a, In x, std::int64_t) const { return wrap_mul(a, convert<acc_t>(x)); }
  MINIDL_HD acc_t combine(acc_t a, acc_t b) const { return wrap_mul(a, b); }
  template <class Out>
  MINIDL_HD Out project(acc_t a) const {
    return convert<Out>(a);
  }
};

/// A value and its position (-1: no element yet).
template <class V>
struct ValueIndex {
  V v;
  std::int64_t i;
};

/// Max (Largest) or min with the position of the first extremum; a NaN wins over every number, and among NaNs
/// the first (PyTorch's rule).
template <class In, bool Largest>
struct ExtremumReducer {
  using V = opmath_t<In>;
  using acc_t = ValueIndex<V>;
  template <class Out>
  static constexpr bool writes = std::is_same_v<Out, In>;
  /// Whether b (at a later position than a when tied) replaces a.
  static MINIDL_HD bool beats(V b, V a) {
    if (m_isnan(a)) return false;
    if (m_isnan(b)) return true;
    return Largest ? b > a : b < a;
  }
  MINIDL_HD acc_t identity() const { return {V(0), -1}; }
  MINIDL_HD acc_t step(acc_t a, In x, std::int64_t r) const {
    const V v = convert<V>(x);
    return a.i < 0 || beats(v, a.v) ? acc_t{v, r} : a;
  }
  MINIDL_HD acc_t combine(acc_t a, acc_t b) const {
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    if (a.i > b.i) {
      const acc_t t = a;
      a = b;
      b = t;
    }
    return beats(b.v, a.v) ? b : a;
  }
  template <class Out>
  MINIDL_HD Out project(acc_t a) const {
    return convert<Out>(a.v);
  }
};

/// any (IsAll false) / all: bool results, uint8 for uint8 elements (PyTorch's rule).
template <class In, bool IsAll>
struct LogicalReducer {
  using acc_t = bool;
  template <class Out>
  static constexpr bool writes = std::is_same_v<Out, bool> ||
                                 (std::is_same_v<Out, In> && std::is_same_v<In, std::uint8_t>);
  MINIDL_HD acc_t identity() const { return IsAll; }
  MINIDL_HD acc_t step(acc_t a, In x, std::int64_t) const { return IsAll ? (a && truthy(x)) : (a || truthy(x)); }
  MINIDL_HD acc_t combine(acc_t a, acc_t b) const { return IsAll ? (a && b) : (a || b); }
  template <class Out>
  MINIDL_HD Out project(acc_t a) const {
    return static_cast<Out>(a);
  }
};

enum class NormKind : std::uint8_t { One, Two, Inf, NegInf, Zero, P };

/// The vector p-norms: a sum of |x|^p (then the 1/p-th power), or the largest / smallest |x| (NaN propagates).
template <class In, NormKind K>
struct NormReducer {
  using acc_t = opmath_t<In>;
  acc_t p, inv_p;
  template <class Out>
  static constexpr bool writes = std::is_same_v<Out, In>;
  MINIDL_HD acc_t identity() const { return K == NormKind::NegInf ? infinity_of<acc_t>() : acc_t(0); }
  MINIDL_HD acc_t step(acc_t a, In x, std::int64_t) const {
    const acc_t v = convert<acc_t>(x);
    const acc_t m = m_abs(v);
    switch (K) {
      case NormKind::One:
        return combine(a, m);
      case NormKind::Two:
        return combine(a, v * v);
      case NormKind::Zero:
        return combine(a, v != acc_t(0) ? acc_t(1) : acc_t(0));
      case NormKind::P:
        return combine(a, m_pow(m, p));
      default:
        return combine(a, m);
    }
  }
  MINIDL_HD acc_t combine(acc_t a, acc_t b) const {
    if (K == NormKind::Inf) return m_isnan(a) || a > b ? a : b;
    if (K == NormKind::NegInf) return m_isnan(a) || a < b ? a : b;
    return a + b;
  }
  template <class Out>
  MINIDL_HD Out project(acc_t a) const {
    if (K == NormKind::Two) return convert<Out>(m_sqrt(a));
    if (K == NormKind::P) return convert<Out>(m_pow(a, inv_p));
    return convert<Out>(a);
  }
};

template <class A>
struct WelfordAcc {
  A mean, m2;
  std::int64_t n;
};

/// Variance (or standard deviation) by Welford's update, partial results merged by Chan's formula.
template <class In>
struct VarReducer {
  using A = opmath_t<In>;
  using acc_t = WelfordAcc<A>;
  A correction;
  bool take_sqrt;
  template <class Out>
  static constexpr bool writes = std::is_same_v<Out, In>;
  MINIDL_HD acc_t identity() const { return {A(0), A(0), 0}; }
  MINIDL_HD acc_t step(acc_t a, In x, std::int64_t) const {
    const A v = convert<A>(x);
    const std::int64_t n = a.n + 1;
    const A d = v - a.mean;
    const A mean = a.mean + d / static_cast<A>(n);
    return {mean, a.m2 + d * (v - mean), n};
  }
  MINIDL_HD acc_t combine(acc_t a, acc_t b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const std::int64_t n = a.n + b.n;
    const A d = b.mean - a.mean, f = static_cast<A>(b.n) / static_cast<A>(n);
    return {a.mean + d * f, a.m2 + b.m2 + d * d * static_cast<A>(a.n) * f, n};
  }
  template <class Out>
  MINIDL_HD Out project(acc_t a) const {
    A divisor = static_cast<A>(a.n) - correction;
    if (divisor < A(0)) divisor = A(0);
    const A v = a.m2 / divisor;
    return convert<Out>(take_sqrt ? m_sqrt(v) : v);
  }
};

template <class A>
struct MaxSumExp {
  A m, s;  // the running maximum and the sum of exp(x - m)
};

/// log(sum(exp(x))) with a running maximum (one exp per element); +inf gives +inf, all -inf gives -inf, NaN NaN.
template <class In>
struct LogSumExpReducer {
  using A = opmath_t<In>;
  using acc_t = MaxSumExp<A>;
  template <class Out>
  static constexpr bool writes = std::is_same_v<Out, In>;
  MINIDL_HD acc_t identity() const { return {-infinity_of<A>(), A(0)}; }
  MINIDL_HD acc_t step(acc_t a, In x, std::int64_t) const { return combine(a, acc_t{convert<A>(x), A(1)}); }
  MINIDL_HD acc_t combine(acc_t a, acc_t b) const {
    if (m_isnan(a.m) || m_isnan(b.m)) return {a.m + b.m, A(1)};
    if (b.m == -infinity_of<A>()) return a;
    if (a.m == -infinity_of<A>()) return b;
    if (a.m == b.m) return {a.m, a.s + b.s};
    if (a.m > b.m) return {a.m, a.s + b.s * m_exp(b.m - a.m)};
    return {b.m, b.s + a.s * m_exp(a.m - b.m)};
  }
  template <class Out>
  MINIDL_HD Out project(acc_t a) const {
    if (m_isnan(a.m) || m_isinf(a.m)) return convert<Out>(a.m);
    return convert<Out>(a.m + m_log(a.s));
  }
};

/// Writes the position of an extremum; other accumulators carry none.
template <class A>
MINIDL_HD void store_index(std::int64_t*, std::int64_t, const A&) {}
template <class V>
MINIDL_HD void store_index(std::int64_t* idx, std::int64_t j, const ValueIndex<V>& a) {
  if (idx) idx[j] = a.i;
}

/// Calls f(reducer) for op on elements of type In, on the host. Ops of floating values alone (norms, var,
/// logsumexp) throw TypeError for other In (the op layer has checked the dtype before).
template <class In, class F>
void visit_reducer(ReduceOp op, const ReduceParams& p, F&& f) {
  using S = sum_acc_t<In>;
  switch (op) {
    case ReduceOp::Sum:
      return f(SumReducer<In>{static_cast<S>(p.scale)});
    case ReduceOp::Prod:
      return f(ProdReducer<In>{});
    case ReduceOp::Max:
      return f(ExtremumReducer<In, true>{});
    case ReduceOp::Min:
      return f(ExtremumReducer<In, false>{});
    case ReduceOp::Any:
      return f(LogicalReducer<In, false>{});
    case ReduceOp::All:
      return f(LogicalReducer<In, true>{});
    default:
      break;
  }
  if constexpr (is_floating_v<In>) {
    using A = opmath_t<In>;
    const A pp = static_cast<A>(p.p), inv = static_cast<A>(1.0 / p.p);
    switch (op) {
      case ReduceOp::Norm1:
        return f(NormReducer<In, NormKind::One>{pp, inv});
      case ReduceOp::Norm2:
        return f(NormReducer<In, NormKind::Two>{pp, inv});
      case ReduceOp::NormInf:
        return f(NormReducer<In, NormKind::Inf>{pp, inv});
      case ReduceOp::NormNegInf:
        return f(NormReducer<In, NormKind::NegInf>{pp, inv});
      case ReduceOp::Norm0:
        return f(NormReducer<In, NormKind::Zero>{pp, inv});
      case ReduceOp::NormP:
        return f(NormReducer<In, NormKind::P>{pp, inv});
      case ReduceOp::Var:
        return f(VarReducer<In>{static_cast<A>(p.correction), p.take_sqrt});
      case ReduceOp::LogSumExp:
        return f(LogSumExpReducer<In>{});
      default:
        break;
    }
  }
  throw TypeError("reduce: this reduction takes floating tensors only");
}

}  // namespace kernels
}  // namespace minidl
