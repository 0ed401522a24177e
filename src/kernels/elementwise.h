#pragma once
// Elementwise operations as small functors compiled for both host and device, so the CPU and CUDA kernels
// evaluate exactly the same formulas. Each op is one entry of a table (MINIDL_UNARY_OPS, MINIDL_BINARY_OPS,
// MINIDL_TERNARY_OPS) naming its functor, the dtypes it runs on and its result; the enum, the op's name and the
// visit that turns the enum into a functor type come from the tables. visit_* does that once per call (not per
// element), so the inner loops stay branch-free. A functor computes in T = kernels::opmath_t of the stored type
// (float for bfloat16 / float16). Adding an op: its functor, its table entry, and its entry point in src/ops.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/convert.h"
#include "minidl/dtype.h"
#include "minidl/errors.h"

#ifdef __CUDACC__
#define MINIDL_HD __host__ __device__ __forceinline__
#else
#define MINIDL_HD inline
#endif

namespace minidl {
namespace kernels {

// Precision-preserving math wrappers: float stays float on host and device.
#define MINIDL_MATH_1(name, f32, f64)                    \
  MINIDL_HD float m_##name(float x) { return f32(x); }   \
  MINIDL_HD double m_##name(double x) { return f64(x); }
#define MINIDL_MATH_2(name, f32, f64)                                 \
  MINIDL_HD float m_##name(float x, float y) { return f32(x, y); }    \
  MINIDL_HD double m_##name(double x, double y) { return f64(x, y); }
MINIDL_MATH_1(exp, expf, ::exp)
MINIDL_MATH_1(exp2, exp2f, ::exp2)
MINIDL_MATH_1(expm1, expm1f, ::expm1)
MINIDL_MATH_1(log, logf, ::log)
MINIDL_MATH_1(log2, log2f, ::log2)
MINIDL_MATH_1(log10, log10f, ::log10)
MINIDL_MATH_1(log1p, log1pf, ::log1p)
MINIDL_MATH_1(sqrt, sqrtf, ::sqrt)
MINIDL_MATH_1(sin, sinf, ::sin)
MINIDL_MATH_1(cos, cosf, ::cos)
MINIDL_MATH_1(tan, tanf, ::tan)
MINIDL_MATH_1(asin, asinf, ::asin)
MINIDL_MATH_1(acos, acosf, ::acos)
MINIDL_MATH_1(atan, atanf, ::atan)
MINIDL_MATH_1(sinh, sinhf, ::sinh)
MINIDL_MATH_1(cosh, coshf, ::cosh)
MINIDL_MATH_1(tanh, tanhf, ::tanh)
MINIDL_MATH_1(erf, erff, ::erf)
MINIDL_MATH_1(erfc, erfcf, ::erfc)
MINIDL_MATH_1(abs, fabsf, ::fabs)
MINIDL_MATH_1(floor, floorf, ::floor)
MINIDL_MATH_1(ceil, ceilf, ::ceil)
MINIDL_MATH_1(trunc, truncf, ::trunc)
// Ties to even, in the default rounding mode (as std::nearbyint in PyTorch's round).
MINIDL_MATH_1(nearbyint, nearbyintf, ::nearbyint)
MINIDL_MATH_2(pow, powf, ::pow)
MINIDL_MATH_2(fmod, fmodf, ::fmod)
MINIDL_MATH_2(copysign, copysignf, ::copysign)
MINIDL_MATH_2(atan2, atan2f, ::atan2)
MINIDL_MATH_2(hypot, hypotf, ::hypot)
#undef MINIDL_MATH_1
#undef MINIDL_MATH_2

template <class T> MINIDL_HD bool m_isnan(T x) {
  if constexpr (std::is_floating_point<T>::value) {
    return x != x;
  } else {
    return false;
  }
}
template <class T> MINIDL_HD bool m_isinf(T x) {
  if constexpr (std::is_floating_point<T>::value) {
    return x == std::numeric_limits<T>::infinity() || x == -std::numeric_limits<T>::infinity();
  } else {
    return false;
  }
}

/// x * y; for bool, logical and (the same value, without the integer promotion).
template <class T> MINIDL_HD T m_mul(T x, T y) {
  if constexpr (std::is_same<T, bool>::value) {
    return x && y;
  } else {
    return x * y;
  }
}

/// The running maximum's rule (max, argmax, max pooling): v replaces the best so far when it is larger or NaN,
/// so the first maximum wins and a NaN propagates (the last NaN wins), as PyTorch's CPU kernels.
template <class T> MINIDL_HD bool replaces_max(T v, T best) { return v > best || m_isnan(v); }

// ---- unary functors: out = f(x) --------------------------------------------------------------------------
// `a` is the op's scalar (slope, addend, factor, exponent, bound), unused by the others; the few ops with a
// second scalar (clamp's upper bound) also have `b`.
template <class T> struct Neg { T a; MINIDL_HD T operator()(T x) const { return -x; } };
template <class T> struct Exp { T a; MINIDL_HD T operator()(T x) const { return m_exp(x); } };
template <class T> struct Exp2 { T a; MINIDL_HD T operator()(T x) const { return m_exp2(x); } };
template <class T> struct Expm1 { T a; MINIDL_HD T operator()(T x) const { return m_expm1(x); } };
template <class T> struct Log { T a; MINIDL_HD T operator()(T x) const { return m_log(x); } };
template <class T> struct Log2 { T a; MINIDL_HD T operator()(T x) const { return m_log2(x); } };
template <class T> struct Log10 { T a; MINIDL_HD T operator()(T x) const { return m_log10(x); } };
template <class T> struct Log1p { T a; MINIDL_HD T operator()(T x) const { return m_log1p(x); } };
template <class T> struct Sqrt { T a; MINIDL_HD T operator()(T x) const { return m_sqrt(x); } };
/// 1 / sqrt(x) rather than the device's approximate rsqrt, as PyTorch's CPU kernel: both backends agree.
template <class T> struct Rsqrt { T a; MINIDL_HD T operator()(T x) const { return T(1) / m_sqrt(x); } };
template <class T> struct Reciprocal { T a; MINIDL_HD T operator()(T x) const { return T(1) / x; } };
template <class T> struct Square { T a; MINIDL_HD T operator()(T x) const { return m_mul(x, x); } };
template <class T> struct Sin { T a; MINIDL_HD T operator()(T x) const { return m_sin(x); } };
template <class T> struct Cos { T a; MINIDL_HD T operator()(T x) const { return m_cos(x); } };
template <class T> struct Tan { T a; MINIDL_HD T operator()(T x) const { return m_tan(x); } };
template <class T> struct Asin { T a; MINIDL_HD T operator()(T x) const { return m_asin(x); } };
template <class T> struct Acos { T a; MINIDL_HD T operator()(T x) const { return m_acos(x); } };
template <class T> struct Atan { T a; MINIDL_HD T operator()(T x) const { return m_atan(x); } };
template <class T> struct Sinh { T a; MINIDL_HD T operator()(T x) const { return m_sinh(x); } };
template <class T> struct Cosh { T a; MINIDL_HD T operator()(T x) const { return m_cosh(x); } };
template <class T> struct Erf { T a; MINIDL_HD T operator()(T x) const { return m_erf(x); } };
template <class T> struct Erfc { T a; MINIDL_HD T operator()(T x) const { return m_erfc(x); } };
template <class T> struct Abs {
  T a;
  MINIDL_HD T operator()(T x) const {
    if constexpr (std::is_floating_point<T>::value) {
      return m_abs(x);
    } else if constexpr (std::is_signed<T>::value) {
      return x < T(0) ? T(-x) : x;
    } else {
      return x;
    }
  }
};
// Rounding: integral values are already whole (PyTorch returns a copy for them).
template <class T> struct Floor {
  T a;
  MINIDL_HD T operator()(T x) const {
    if constexpr (std::is_floating_point<T>::value) return m_floor(x);
    return x;
  }
};
template <class T> struct Ceil {
  T a;
  MINIDL_HD T operator()(T x) const {
    if constexpr (std::is_floating_point<T>::value) return m_ceil(x);
    return x;
  }
};
template <class T> struct Trunc {
  T a;
  MINIDL_HD T operator()(T x) const {
    if constexpr (std::is_floating_point<T>::value) return m_trunc(x);
    return x;
  }
};
/// Half-way cases to even.
template <class T> struct Round {
  T a;
  MINIDL_HD T operator()(T x) const {
    if constexpr (std::is_floating_point<T>::value) return m_nearbyint(x);
    return x;
  }
};
/// round(x, decimals), as PyTorch: a = 10^|decimals|; b != 0 for negative decimals (round to tens, hundreds...).
template <class T> struct RoundDecimals {
  T a, b;
  MINIDL_HD T operator()(T x) const { return b != T(0) ? m_nearbyint(x / a) * a : m_nearbyint(x * a) / a; }
};
template <class T> struct LogicalNot { T a; MINIDL_HD T operator()(T x) const { return x == T(0) ? T(1) : T(0); } };
template <class T> struct IsNan { T a; MINIDL_HD T operator()(T x) const { return m_isnan(x) ? T(1) : T(0); } };
template <class T> struct IsInf { T a; MINIDL_HD T operator()(T x) const { return m_isinf(x) ? T(1) : T(0); } };
template <class T> struct IsFinite {
  T a;
  MINIDL_HD T operator()(T x) const { return m_isnan(x) || m_isinf(x) ? T(0) : T(1); }
};
template <class T> struct Relu { T a; MINIDL_HD T operator()(T x) const { return x > T(0) ? x : T(0); } };
/// The activation a layer kernel applies to each output after the bias: the epilogue of the fused
/// convolution + bias + ReLU (nn::ConvReLU2d), evaluated with the same functor as the ReLU op.
enum class Activation : std::uint8_t { None, Relu };
template <class T> MINIDL_HD T activate(Activation act, T v) { return act == Activation::Relu ? Relu<T>{T(0)}(v) : v; }
template <class T> struct LeakyRelu { T a; MINIDL_HD T operator()(T x) const { return x > T(0) ? x : a * x; } };
template <class T> struct Gelu {
  T a;
  MINIDL_HD T operator()(T x) const { return T(0.5) * x * (T(1) + m_erf(x * T(0.70710678118654752440))); }
};
template <class T> struct Sigmoid {
  T a;
  // Split by sign so exp never overflows: finite for any finite x.
  MINIDL_HD T operator()(T x) const {
    if (x >= T(0)) return T(1) / (T(1) + m_exp(-x));
    const T e = m_exp(x);
    return e / (T(1) + e);
  }
};
template <class T> struct Tanh { T a; MINIDL_HD T operator()(T x) const { return m_tanh(x); } };
// The activations of nn/functional/activation.h, each with PyTorch's formula; the gradients are below.
/// x * sigmoid(x)
template <class T> struct Silu { T a; MINIDL_HD T operator()(T x) const { return x * Sigmoid<T>{T(0)}(x); } };
/// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): finite for any finite x.
template <class T> struct LogSigmoid {
  T a;
  MINIDL_HD T operator()(T x) const { return (x < T(0) ? x : T(0)) - m_log1p(m_exp(-m_abs(x))); }
};
/// log1p(exp(beta x)) / beta, and x itself where beta x > threshold (a = beta, b = threshold).
template <class T> struct Softplus {
  T a, b;
  MINIDL_HD T operator()(T x) const { return x * a > b ? x : m_log1p(m_exp(x * a)) / a; }
};
/// x for x > 0, else alpha (exp(x) - 1) (a = alpha).
template <class T> struct Elu { T a; MINIDL_HD T operator()(T x) const { return x > T(0) ? x : a * m_expm1(x); } };
/// x tanh(softplus(x))
template <class T> struct Mish { T a; MINIDL_HD T operator()(T x) const { return x * m_tanh(m_log1p(m_exp(x))); } };
/// x relu6(x + 3) / 6
template <class T> struct Hardswish {
  T a;
  MINIDL_HD T operator()(T x) const { return x <= T(-3) ? T(0) : x >= T(3) ? x : x * (x + T(3)) / T(6); }
};
/// GELU's tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class T> struct GeluTanh {
  T a;
  MINIDL_HD T operator()(T x) const {
    const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + m_tanh(inner));
  }
};
template <class T> struct AddScalar { T a; MINIDL_HD T operator()(T x) const { return x + a; } };
template <class T> struct MulScalar { T a; MINIDL_HD T operator()(T x) const { return m_mul(x, a); } };
template <class T> struct PowScalar { T a; MINIDL_HD T operator()(T x) const { return m_pow(x, a); } };
/// NaN gives 0, as PyTorch.
template <class T> struct Sign {
  T a;
  MINIDL_HD T operator()(T x) const { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)); }
};
/// u ~ U[0, 1) -> 0 with probability a (the drop rate), else 1 / (1 - a).
template <class T> struct DropoutMask {
  T a;
  MINIDL_HD T operator()(T u) const { return u < a ? T(0) : T(1) / (T(1) - a); }
};

// ---- binary functors: out = f(x, y) ----------------------------------------------------------------------
/// x broadcast to the output's shape (the expand of a gradient).
template <class T> struct FirstOp { T a; MINIDL_HD T operator()(T x, T) const { return x; } };
template <class T> struct AddOp { T a; MINIDL_HD T operator()(T x, T y) const { return x + a * y; } };
/// relu(x + a * y): a bias and the ReLU after it in one pass (nn::LinearReLU).
template <class T>
struct AddReluOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const { return Relu<T>{T(0)}(x + a * y); }
};
template <class T> struct SubOp { T a; MINIDL_HD T operator()(T x, T y) const { return x - a * y; } };
template <class T> struct MulOp { T a; MINIDL_HD T operator()(T x, T y) const { return m_mul(x, y); } };
template <class T> struct DivOp { T a; MINIDL_HD T operator()(T x, T y) const { return x / y; } };
template <class T> struct PowOp { T a; MINIDL_HD T operator()(T x, T y) const { return m_pow(x, y); } };
template <class T> struct Atan2Op { T a; MINIDL_HD T operator()(T x, T y) const { return m_atan2(x, y); } };
template <class T> struct HypotOp { T a; MINIDL_HD T operator()(T x, T y) const { return m_hypot(x, y); } };
/// NaN propagates from either side, as torch.maximum / torch.minimum.
template <class T> struct MaximumOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const { return m_isnan(x) ? x : (m_isnan(y) ? y : (x >= y ? x : y)); }
};
template <class T> struct MinimumOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const { return m_isnan(x) ? x : (m_isnan(y) ? y : (x <= y ? x : y)); }
};
/// Python's floor division (rounds towards -inf), as torch.floor_divide. Integral division by zero gives 0
/// here rather than a crash (the CPU op checks for it first and raises).
template <class T> struct FloorDivideOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const {
    if constexpr (std::is_floating_point<T>::value) {
      if (y == T(0)) return x / y;
      const T mod = m_fmod(x, y);
      T div = (x - mod) / y;
      if (mod != T(0) && ((y < T(0)) != (mod < T(0)))) div -= T(1);
      if (div == T(0)) return m_copysign(T(0), x / y);
      const T fl = m_floor(div);
      return div - fl > T(0.5) ? fl + T(1) : fl;
    } else {
      if (y == T(0)) return T(0);
      const T q = static_cast<T>(x / y);
      return (x % y != T(0) && ((x < T(0)) != (y < T(0)))) ? static_cast<T>(q - T(1)) : q;
    }
  }
};
/// Python's modulus (the sign of the divisor), as torch.remainder.
template <class T> struct RemainderOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const {
    if constexpr (std::is_floating_point<T>::value) {
      const T mod = m_fmod(x, y);
      return (mod != T(0) && ((y < T(0)) != (mod < T(0)))) ? mod + y : mod;
    } else {
      if (y == T(0)) return T(0);
      const T mod = static_cast<T>(x % y);
      return (mod != T(0) && ((y < T(0)) != (mod < T(0)))) ? static_cast<T>(mod + y) : mod;
    }
  }
};
/// C's modulus (the sign of the dividend), as torch.fmod; integral division by zero as FloorDivideOp.
template <class T> struct FmodOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const {
    if constexpr (std::is_floating_point<T>::value) {
      return m_fmod(x, y);
    } else {
      return y == T(0) ? T(0) : static_cast<T>(x % y);
    }
  }
};
/// fmod by the scalar a (nonzero for integral T: the op checks).
template <class T> struct FmodScalar { T a; MINIDL_HD T operator()(T x) const { return FmodOp<T>{a}(x, a); } };
/// PyTorch's lerp: start + w * (end - start), computed from the nearer end for |w| >= 0.5 (exact at w = 1); the
/// optimizers' moving averages (optim_update.h) use it too.
template <class T> MINIDL_HD T lerp(T start, T end, T w) {
  return (w < T(0.5) && w > T(-0.5)) ? start + w * (end - start) : end - (end - start) * (T(1) - w);
}
template <class T> struct LerpScalarOp { T a; MINIDL_HD T operator()(T x, T y) const { return lerp(x, y, a); } };
// clamp is max(x, lower) then min(., upper) as PyTorch (upper wins when lower > upper); a NaN anywhere gives NaN.
template <class T> MINIDL_HD T clamp(T x, T lower, T upper) {
  return MinimumOp<T>{T(0)}(MaximumOp<T>{T(0)}(x, lower), upper);
}
template <class T> struct Clamp { T a, b; MINIDL_HD T operator()(T x) const { return clamp(x, a, b); } };
template <class T> struct ClampMin { T a; MINIDL_HD T operator()(T x) const { return MaximumOp<T>{a}(x, a); } };
template <class T> struct ClampMax { T a; MINIDL_HD T operator()(T x) const { return MinimumOp<T>{a}(x, a); } };
// Comparisons and logical ops give 1 or 0 (stored as bool by the kernels).
template <class T> struct EqOp { T a; MINIDL_HD T operator()(T x, T y) const { return x == y ? T(1) : T(0); } };
template <class T> struct NeOp { T a; MINIDL_HD T operator()(T x, T y) const { return x != y ? T(1) : T(0); } };
template <class T> struct LtOp { T a; MINIDL_HD T operator()(T x, T y) const { return x < y ? T(1) : T(0); } };
template <class T> struct LeOp { T a; MINIDL_HD T operator()(T x, T y) const { return x <= y ? T(1) : T(0); } };
template <class T> struct GtOp { T a; MINIDL_HD T operator()(T x, T y) const { return x > y ? T(1) : T(0); } };
template <class T> struct GeOp { T a; MINIDL_HD T operator()(T x, T y) const { return x >= y ? T(1) : T(0); } };
template <class T> struct LogicalAndOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const { return (x != T(0) && y != T(0)) ? T(1) : T(0); }
};
template <class T> struct LogicalOrOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const { return (x != T(0) || y != T(0)) ? T(1) : T(0); }
};
template <class T> struct LogicalXorOp {
  T a;
  MINIDL_HD T operator()(T x, T y) const { return ((x != T(0)) != (y != T(0))) ? T(1) : T(0); }
};
// Backward rules, written as (grad, saved) -> grad_in.
/// g * (x > 0)
template <class T> struct ReluGradOp { T a; MINIDL_HD T operator()(T g, T x) const { return x > T(0) ? g : T(0); } };
template <class T> struct LeakyReluGradOp {
  T a;
  MINIDL_HD T operator()(T g, T x) const { return x > T(0) ? g : a * g; }
};
/// g * y * (1 - y), with y = sigmoid(x) saved from the forward pass
template <class T> struct SigmoidGradOp { T a; MINIDL_HD T operator()(T g, T y) const { return g * y * (T(1) - y); } };
/// g * (1 - y^2), with y = tanh(x)
template <class T> struct TanhGradOp { T a; MINIDL_HD T operator()(T g, T y) const { return g * (T(1) - y * y); } };
/// g * (Phi(x) + x * phi(x))
template <class T> struct GeluGradOp {
  T a;
  MINIDL_HD T operator()(T g, T x) const {
    const T cdf = T(0.5) * (T(1) + m_erf(x * T(0.70710678118654752440)));
    const T pdf = m_exp(T(-0.5) * x * x) * T(0.39894228040143267794);
    return g * (cdf + x * pdf);
  }
};
/// g * s (1 + x (1 - s)), s = sigmoid(x)
template <class T> struct SiluGradOp {
  T a;
  MINIDL_HD T operator()(T g, T x) const {
    const T s = Sigmoid<T>{T(0)}(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};
/// g * sigmoid(-x)
template <class T> struct LogSigmoidGradOp {
  T a;
  MINIDL_HD T operator()(T g, T x) const { return g * Sigmoid<T>{T(0)}(-x); }
};
/// g * z / (z + 1), z = exp(beta x); g where beta x > threshold
template <class T> struct SoftplusGradOp {
  T a, b;
  MINIDL_HD T operator()(T g, T x) const {
    if (x * a > b) return g;
    const T z = m_exp(x * a);
    return g * z / (z + T(1));
  }
};
/// g for x > 0, else g * alpha exp(x)
template <class T> struct EluGradOp {
  T a;
  MINIDL_HD T operator()(T g, T x) const { return x > T(0) ? g : g * a * m_exp(x); }
};
/// g * (t + x s (1 - t^2)), t = tanh(softplus(x)), s = sigmoid(x)
template <class T> struct MishGradOp {
  T a;
  MINIDL_HD T operator()(T g, T x) const {
    const T t = m_tanh(m_log1p(m_exp(x)));
    return g * (t + x * Sigmoid<T>{T(0)}(x) * (T(1) - t * t));
  }
};
/// 0 below -3, g (x / 3 + 1/2) up to 3, g above (PyTorch's choice at the kinks)
template <class T> struct HardswishGradOp {
  T a;
  MINIDL_HD T operator()(T g, T x) const {
    return x < T(-3) ? T(0) : x <= T(3) ? g * (x / T(3) + T(0.5)) : g;
  }
};
/// The derivative of GeluTanh, as PyTorch's gelu_backward(approximate='tanh').
template <class T> struct GeluTanhGradOp {
  T a;
  MINIDL_HD T operator()(T g, T x) const {
    const T k_beta = T(0.79788456080286535588), k_kappa = T(0.044715);
    const T t = m_tanh(k_beta * (x + k_kappa * x * x * x));
    const T left = T(0.5) * x, right = T(1) + t;
    const T d_right = left * (T(1) - t * t) * k_beta * (T(1) + T(3) * k_kappa * x * x);
    return g * (T(0.5) * right + d_right);
  }
};
/// g where a <= x <= b (clamp's bounds, infinite when absent), else 0: NaN x passes none, as PyTorch.
template <class T> struct ClampGradOp {
  T a, b;
  MINIDL_HD T operator()(T g, T x) const { return x >= a && x <= b ? g : T(0); }
};

// ---- ternary functors: out = f(x, y, z) ------------------------------------------------------------------
template <class T> struct LerpOp { T a; MINIDL_HD T operator()(T x, T y, T w) const { return lerp(x, y, w); } };
template <class T> struct ClampOp { T a; MINIDL_HD T operator()(T x, T lo, T hi) const { return clamp(x, lo, hi); } };

// ---- the tables ------------------------------------------------------------------------------------------
// X(enum name, domain, result, name in errors). The functor of unary op E is E<T>, of binary or ternary op E is
// E##Op<T>. Domain All: every dtype; Floating: floating T only (the op layer converts integral inputs to float32
// first, or refuses them). Result Same: the inputs' dtype; Bool: bool (comparisons, tests).
#define MINIDL_UNARY_OPS(X)                                                                                   \
  X(Neg, All, Same, "neg") X(Exp, Floating, Same, "exp") X(Log, Floating, Same, "log")                        \
  X(Sqrt, Floating, Same, "sqrt") X(Abs, All, Same, "abs") X(Relu, All, Same, "relu")                         \
  X(LeakyRelu, Floating, Same, "leaky_relu") X(Gelu, Floating, Same, "gelu")                                  \
  X(Sigmoid, Floating, Same, "sigmoid") X(Tanh, Floating, Same, "tanh") X(AddScalar, All, Same, "add")        \
  X(MulScalar, All, Same, "mul") X(PowScalar, Floating, Same, "pow") X(Sign, All, Same, "sign")               \
  X(DropoutMask, Floating, Same, "dropout") X(LogicalNot, All, Bool, "logical_not")                           \
  X(Exp2, Floating, Same, "exp2") X(Expm1, Floating, Same, "expm1") X(Log2, Floating, Same, "log2")           \
  X(Log10, Floating, Same, "log10") X(Log1p, Floating, Same, "log1p") X(Rsqrt, Floating, Same, "rsqrt")       \
  X(Reciprocal, Floating, Same, "reciprocal") X(Square, All, Same, "square") X(Sin, Floating, Same, "sin")     \
  X(Cos, Floating, Same, "cos") X(Tan, Floating, Same, "tan") X(Asin, Floating, Same, "asin")                 \
  X(Acos, Floating, Same, "acos") X(Atan, Floating, Same, "atan") X(Sinh, Floating, Same, "sinh")             \
  X(Cosh, Floating, Same, "cosh") X(Erf, Floating, Same, "erf") X(Erfc, Floating, Same, "erfc")               \
  X(Floor, All, Same, "floor") X(Ceil, All, Same, "ceil") X(Trunc, All, Same, "trunc")                        \
  X(Round, All, Same, "round") X(RoundDecimals, Floating, Same, "round") X(Clamp, All, Same, "clamp")         \
  X(ClampMin, All, Same, "clamp_min") X(ClampMax, All, Same, "clamp_max") X(FmodScalar, All, Same, "fmod")    \
  X(IsNan, All, Bool, "isnan") X(IsInf, All, Bool, "isinf") X(IsFinite, All, Bool, "isfinite")              \
  X(Silu, Floating, Same, "silu") X(Softplus, Floating, Same, "softplus") X(Elu, Floating, Same, "elu")       \
  X(Mish, Floating, Same, "mish") X(Hardswish, Floating, Same, "hardswish")                                   \
  X(GeluTanh, Floating, Same, "gelu") X(LogSigmoid, Floating, Same, "logsigmoid")

#define MINIDL_BINARY_OPS(X)                                                                                  \
  X(First, All, Same, "expand") X(Add, All, Same, "add") X(Sub, All, Same, "sub") X(Mul, All, Same, "mul")    \
  X(Div, Floating, Same, "div") X(Pow, Floating, Same, "pow") X(Maximum, All, Same, "maximum")                \
  X(Minimum, All, Same, "minimum") X(FloorDivide, All, Same, "floor_divide")                                  \
  X(Remainder, All, Same, "remainder") X(Fmod, All, Same, "fmod") X(Atan2, Floating, Same, "atan2")           \
  X(Hypot, Floating, Same, "hypot") X(LerpScalar, Floating, Same, "lerp") X(Eq, All, Bool, "eq")              \
  X(Ne, All, Bool, "ne") X(Lt, All, Bool, "lt") X(Le, All, Bool, "le") X(Gt, All, Bool, "gt")                 \
  X(Ge, All, Bool, "ge") X(LogicalAnd, All, Bool, "logical_and") X(LogicalOr, All, Bool, "logical_or")        \
  X(LogicalXor, All, Bool, "logical_xor") X(AddRelu, All, Same, "add_relu")                                   \
  X(ReluGrad, Floating, Same, "relu_backward") X(LeakyReluGrad, Floating, Same, "leaky_relu_backward")        \
  X(SigmoidGrad, Floating, Same, "sigmoid_backward") X(TanhGrad, Floating, Same, "tanh_backward")             \
  X(GeluGrad, Floating, Same, "gelu_backward") X(ClampGrad, Floating, Same, "clamp_backward")                \
  X(SiluGrad, Floating, Same, "silu_backward") X(SoftplusGrad, Floating, Same, "softplus_backward")           \
  X(EluGrad, Floating, Same, "elu_backward") X(MishGrad, Floating, Same, "mish_backward")                     \
  X(HardswishGrad, Floating, Same, "hardswish_backward") X(GeluTanhGrad, Floating, Same, "gelu_backward")  \
  X(LogSigmoidGrad, Floating, Same, "logsigmoid_backward")

#define MINIDL_TERNARY_OPS(X) X(Lerp, Floating, Same, "lerp") X(Clamp, All, Same, "clamp")

#define MINIDL_OP_ENUM(E, domain, result, name) E,
enum class UnaryOp : std::uint8_t { MINIDL_UNARY_OPS(MINIDL_OP_ENUM) };
enum class BinaryOp : std::uint8_t { MINIDL_BINARY_OPS(MINIDL_OP_ENUM) };
enum class TernaryOp : std::uint8_t { MINIDL_TERNARY_OPS(MINIDL_OP_ENUM) };
#undef MINIDL_OP_ENUM

enum class OpDomain : std::uint8_t { All, Floating };
enum class OpResult : std::uint8_t { Same, Bool };
struct OpTraits {
  const char* name;
  OpDomain domain;
  OpResult result;
};
#define MINIDL_OP_TRAITS(E, domain, result, name) OpTraits{name, OpDomain::domain, OpResult::result},
inline constexpr OpTraits kUnaryTraits[] = {MINIDL_UNARY_OPS(MINIDL_OP_TRAITS)};
inline constexpr OpTraits kBinaryTraits[] = {MINIDL_BINARY_OPS(MINIDL_OP_TRAITS)};
inline constexpr OpTraits kTernaryTraits[] = {MINIDL_TERNARY_OPS(MINIDL_OP_TRAITS)};
#undef MINIDL_OP_TRAITS
inline constexpr OpTraits kUnknownOp{"unknown op", OpDomain::All, OpResult::Same};
template <std::size_t N> constexpr const OpTraits& traits_at(const OpTraits (&table)[N], std::size_t i) {
  return i < N ? table[i] : kUnknownOp;
}
constexpr const OpTraits& traits(UnaryOp op) { return traits_at(kUnaryTraits, static_cast<std::size_t>(op)); }
constexpr const OpTraits& traits(BinaryOp op) { return traits_at(kBinaryTraits, static_cast<std::size_t>(op)); }
constexpr const OpTraits& traits(TernaryOp op) { return traits_at(kTernaryTraits, static_cast<std::size_t>(op)); }

/// The op's name in errors.
template <class Op> constexpr const char* op_name(Op op) { return traits(op).name; }
/// Ops whose results are bool (comparisons, logical ops, isnan ...).
template <class Op> constexpr bool returns_bool(Op op) { return traits(op).result == OpResult::Bool; }
/// Ops that compute on floating values only: integral inputs are converted to float32 by the op layer first
/// (exp of an int64 tensor is float32), or refused where PyTorch refuses them.
template <class Op> constexpr bool floating_only(Op op) { return traits(op).domain == OpDomain::Floating; }

/// The scalars of an op: most take one (a slope, addend, factor, exponent, bound), clamp two.
struct OpScalars {
  OpScalars(double a_ = 0.0, double b_ = 0.0) : a(a_), b(b_) {}  // NOLINT(google-explicit-constructor)
  double a, b;
};

namespace elementwise_detail {
template <class Fn, class = void> struct HasSecondScalar : std::false_type {};
template <class Fn> struct HasSecondScalar<Fn, std::void_t<decltype(&Fn::b)>> : std::true_type {};

template <class Fn, class C> Fn make_functor(const OpScalars& s) {
  if constexpr (HasSecondScalar<Fn>::value) {
    return Fn{convert<C>(s.a), convert<C>(s.b)};
  } else {
    return Fn{convert<C>(s.a)};
  }
}

/// Whether a kernel storing O for inputs stored as S runs op (known at compile time): its domain admits the
/// compute type, and its result is S (a Same op) or bool (a Bool op); for bool inputs both are bool.
template <class Op, Op op, class S, class O> constexpr bool runs() {
  constexpr OpTraits t = traits(op);
  constexpr bool domain_ok = t.domain == OpDomain::All || std::is_floating_point_v<opmath_t<S>>;
  constexpr bool result_ok = t.result == OpResult::Same ? std::is_same_v<O, S> : std::is_same_v<O, bool>;
  return domain_ok && result_ok;
}

[[noreturn]] inline void throw_not_implemented(const char* op, DType in, DType out) {
  throw TypeError(minidl::detail::str(op, ": not implemented for inputs of dtype ", dtype_name(in), " with a ",
                                      dtype_name(out), " result"));
}
}  // namespace elementwise_detail

// visit_*<S, O>(op, scalars, f) calls f(functor) on the host, the functor computing in opmath_t<S> for inputs
// stored as S and an output stored as O. Only the (op, S, O) combinations that can run are instantiated (see
// elementwise_detail::runs); any other is a TypeError naming the op.
#define MINIDL_VISIT_CASE(Enum, E, Functor)                                                  \
  case Enum::E:                                                                              \
    if constexpr (elementwise_detail::runs<Enum, Enum::E, S, O>()) {                       \
      return f(elementwise_detail::make_functor<Functor, C>(s));                             \
    }                                                                                        \
    break;
#define MINIDL_UNARY_CASE(E, domain, result, name) MINIDL_VISIT_CASE(UnaryOp, E, E<C>)
#define MINIDL_BINARY_CASE(E, domain, result, name) MINIDL_VISIT_CASE(BinaryOp, E, E##Op<C>)
#define MINIDL_TERNARY_CASE(E, domain, result, name) MINIDL_VISIT_CASE(TernaryOp, E, E##Op<C>)

template <class S, class O, class F> void visit_unary(UnaryOp op, const OpScalars& s, F&& f) {
  using C = opmath_t<S>;
  switch (op) { MINIDL_UNARY_OPS(MINIDL_UNARY_CASE) }
  elementwise_detail::throw_not_implemented(op_name(op), dtype_of<S>::value, dtype_of<O>::value);
}
template <class S, class O, class F> void visit_binary(BinaryOp op, const OpScalars& s, F&& f) {
  using C = opmath_t<S>;
  switch (op) { MINIDL_BINARY_OPS(MINIDL_BINARY_CASE) }
  elementwise_detail::throw_not_implemented(op_name(op), dtype_of<S>::value, dtype_of<O>::value);
}
template <class S, class O, class F> void visit_ternary(TernaryOp op, const OpScalars& s, F&& f) {
  using C = opmath_t<S>;
  switch (op) { MINIDL_TERNARY_OPS(MINIDL_TERNARY_CASE) }
  elementwise_detail::throw_not_implemented(op_name(op), dtype_of<S>::value, dtype_of<O>::value);
}
#undef MINIDL_VISIT_CASE
#undef MINIDL_UNARY_CASE
#undef MINIDL_BINARY_CASE
#undef MINIDL_TERNARY_CASE

}  // namespace kernels
}  // namespace minidl
