#pragma once
// Elementwise operations as small functors compiled for both host and device, so the CPU and CUDA kernels
// evaluate exactly the same formulas. The op layer names an op by its enum; visit_* turns the enum into a
// functor type once per call (not per element), so the inner loops stay branch-free. T is the type a kernel
// computes in (kernels::opmath_t of the stored type: float for bfloat16 / float16); ops that only make sense on
// floating values are not instantiated for integral T, and visiting them there is a TypeError.
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "minidl/errors.h"

#ifdef __CUDACC__
#define MINIDL_HD __host__ __device__ __forceinline__
#else
#define MINIDL_HD inline
#endif

namespace minidl {
namespace kernels {

// Precision-preserving math wrappers: float stays float on host and device.
MINIDL_HD float m_exp(float x) { return expf(x); }
MINIDL_HD double m_exp(double x) { return ::exp(x); }
MINIDL_HD float m_log(float x) { return logf(x); }
MINIDL_HD double m_log(double x) { return ::log(x); }
MINIDL_HD float m_sqrt(float x) { return sqrtf(x); }
MINIDL_HD double m_sqrt(double x) { return ::sqrt(x); }
MINIDL_HD float m_tanh(float x) { return tanhf(x); }
MINIDL_HD double m_tanh(double x) { return ::tanh(x); }
MINIDL_HD float m_erf(float x) { return erff(x); }
MINIDL_HD double m_erf(double x) { return ::erf(x); }
MINIDL_HD float m_pow(float x, float y) { return powf(x, y); }
MINIDL_HD double m_pow(double x, double y) { return ::pow(x, y); }
MINIDL_HD float m_abs(float x) { return fabsf(x); }
MINIDL_HD double m_abs(double x) { return ::fabs(x); }
MINIDL_HD float m_fmod(float x, float y) { return fmodf(x, y); }
MINIDL_HD double m_fmod(double x, double y) { return ::fmod(x, y); }
MINIDL_HD float m_floor(float x) { return floorf(x); }
MINIDL_HD double m_floor(double x) { return ::floor(x); }
MINIDL_HD float m_copysign(float x, float y) { return copysignf(x, y); }
MINIDL_HD double m_copysign(double x, double y) { return ::copysign(x, y); }
template <class T> MINIDL_HD bool m_isnan(T x) {
  if constexpr (std::is_floating_point<T>::value) {
    return x != x;
  } else {
    return false;
  }
}

/// The running maximum's rule (max, argmax, max pooling): v replaces the best so far when it is larger or NaN,
/// so the first maximum wins and a NaN propagates (the last NaN wins), as PyTorch's CPU kernels.
template <class T> MINIDL_HD bool replaces_max(T v, T best) { return v > best || m_isnan(v); }

enum class UnaryOp : std::uint8_t {
  Neg, Exp, Log, Sqrt, Abs, Relu, LeakyRelu, Gelu, Sigmoid, Tanh, AddScalar, MulScalar, PowScalar, Sign, DropoutMask,
  LogicalNot
};

/// `alpha` is the op's scalar (slope, addend, factor, exponent); unused by the others.
template <class T> struct Neg { T a; MINIDL_HD T operator()(T x) const { return -x; } };
template <class T> struct Exp { T a; MINIDL_HD T operator()(T x) const { return m_exp(x); } };
template <class T> struct Log { T a; MINIDL_HD T operator()(T x) const { return m_log(x); } };
template <class T> struct Sqrt { T a; MINIDL_HD T operator()(T x) const { return m_sqrt(x); } };
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
template <class T> struct LogicalNot { T a; MINIDL_HD T operator()(T x) const { return x == T(0) ? T(1) : T(0); } };
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
template <class T> struct AddScalar { T a; MINIDL_HD T operator()(T x) const { return x + a; } };
template <class T> struct MulScalar { T a; MINIDL_HD T operator()(T x) const { return x * a; } };
template <class T> struct PowScalar { T a; MINIDL_HD T operator()(T x) const { return m_pow(x, a); } };
template <class T> struct Sign {
  T a;
  MINIDL_HD T operator()(T x) const { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)); }
};

/// u ~ U[0, 1) -> 0 with probability a (the drop rate), else 1 / (1 - a).
template <class T> struct DropoutMask {
  T a;
  MINIDL_HD T operator()(T u) const { return u < a ? T(0) : T(1) / (T(1) - a); }
};

/// The op's name in errors about the dtype it was given.
const char* op_name(UnaryOp op);

/// Calls f(functor) for op, on the host. Ops on floating values alone throw TypeError for an integral T.
template <class T, class F>
void visit_unary(UnaryOp op, T alpha, F&& f) {
  constexpr bool fp = std::is_floating_point<T>::value;
  switch (op) {
    case UnaryOp::Neg: return f(Neg<T>{alpha});
    case UnaryOp::Abs: return f(Abs<T>{alpha});
    case UnaryOp::Relu: return f(Relu<T>{alpha});
    case UnaryOp::AddScalar: return f(AddScalar<T>{alpha});
    case UnaryOp::MulScalar: return f(MulScalar<T>{alpha});
    case UnaryOp::Sign: return f(Sign<T>{alpha});
    case UnaryOp::LogicalNot: return f(LogicalNot<T>{alpha});
    default: break;
  }
  if constexpr (fp) {
    switch (op) {
      case UnaryOp::Exp: return f(Exp<T>{alpha});
      case UnaryOp::Log: return f(Log<T>{alpha});
      case UnaryOp::Sqrt: return f(Sqrt<T>{alpha});
      case UnaryOp::LeakyRelu: return f(LeakyRelu<T>{alpha});
      case UnaryOp::Gelu: return f(Gelu<T>{alpha});
      case UnaryOp::Sigmoid: return f(Sigmoid<T>{alpha});
      case UnaryOp::Tanh: return f(Tanh<T>{alpha});
      case UnaryOp::PowScalar: return f(PowScalar<T>{alpha});
      case UnaryOp::DropoutMask: return f(DropoutMask<T>{alpha});
      default: break;
    }
  }
  throw TypeError(detail::str(op_name(op), ": not implemented for an integral or bool dtype"));
}

/// Binary ops. The *Grad ops are the backward rules of activations, written as (grad, saved) -> grad_in.
enum class BinaryOp : std::uint8_t {
  First, Add, Sub, Mul, Div, Pow, Maximum, Minimum, FloorDivide, Remainder, Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd,
  LogicalOr, LogicalXor, AddRelu, ReluGrad, LeakyReluGrad, SigmoidGrad, TanhGrad, GeluGrad
};

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
template <class T> struct MulOp { T a; MINIDL_HD T operator()(T x, T y) const { return x * y; } };
template <class T> struct DivOp { T a; MINIDL_HD T operator()(T x, T y) const { return x / y; } };
template <class T> struct PowOp { T a; MINIDL_HD T operator()(T x, T y) const { return m_pow(x, y); } };
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

const char* op_name(BinaryOp op);
/// Comparisons and logical ops: their results are bool.
constexpr bool returns_bool(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::LogicalXor; }

/// As visit_unary.
template <class T, class F>
void visit_binary(BinaryOp op, T alpha, F&& f) {
  switch (op) {
    case BinaryOp::First: return f(FirstOp<T>{alpha});
    case BinaryOp::Add: return f(AddOp<T>{alpha});
    case BinaryOp::Sub: return f(SubOp<T>{alpha});
    case BinaryOp::Mul: return f(MulOp<T>{alpha});
    case BinaryOp::Maximum: return f(MaximumOp<T>{alpha});
    case BinaryOp::Minimum: return f(MinimumOp<T>{alpha});
    case BinaryOp::FloorDivide: return f(FloorDivideOp<T>{alpha});
    case BinaryOp::Remainder: return f(RemainderOp<T>{alpha});
    case BinaryOp::Eq: return f(EqOp<T>{alpha});
    case BinaryOp::Ne: return f(NeOp<T>{alpha});
    case BinaryOp::Lt: return f(LtOp<T>{alpha});
    case BinaryOp::Le: return f(LeOp<T>{alpha});
    case BinaryOp::Gt: return f(GtOp<T>{alpha});
    case BinaryOp::Ge: return f(GeOp<T>{alpha});
    case BinaryOp::LogicalAnd: return f(LogicalAndOp<T>{alpha});
    case BinaryOp::LogicalOr: return f(LogicalOrOp<T>{alpha});
    case BinaryOp::LogicalXor: return f(LogicalXorOp<T>{alpha});
    case BinaryOp::AddRelu: return f(AddReluOp<T>{alpha});
    default: break;
  }
  if constexpr (std::is_floating_point<T>::value) {
    switch (op) {
      case BinaryOp::Div: return f(DivOp<T>{alpha});
      case BinaryOp::Pow: return f(PowOp<T>{alpha});
      case BinaryOp::ReluGrad: return f(ReluGradOp<T>{alpha});
      case BinaryOp::LeakyReluGrad: return f(LeakyReluGradOp<T>{alpha});
      case BinaryOp::SigmoidGrad: return f(SigmoidGradOp<T>{alpha});
      case BinaryOp::TanhGrad: return f(TanhGradOp<T>{alpha});
      case BinaryOp::GeluGrad: return f(GeluGradOp<T>{alpha});
      default: break;
    }
  }
  throw TypeError(detail::str(op_name(op), ": not implemented for an integral or bool dtype"));
}

}  // namespace kernels
}  // namespace minidl
