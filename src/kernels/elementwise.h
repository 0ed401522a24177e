#pragma once
// Elementwise operations as small functors compiled for both host and device, so the CPU (Eigen) and CUDA
// kernels evaluate exactly the same formulas. The op layer names an op by its enum; visit_* turns the enum
// into a functor type once per call (not per element), so the inner loops stay branch-free.
#include <cmath>
#include <cstdint>
#include <vector>

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

enum class UnaryOp : std::uint8_t {
  Neg, Exp, Log, Sqrt, Abs, Relu, LeakyRelu, Gelu, Sigmoid, Tanh, AddScalar, MulScalar, PowScalar, Sign, DropoutMask
};

/// `alpha` is the op's scalar (slope, addend, factor, exponent); unused by the others.
template <class T> struct Neg { T a; MINIDL_HD T operator()(T x) const { return -x; } };
template <class T> struct Exp { T a; MINIDL_HD T operator()(T x) const { return m_exp(x); } };
template <class T> struct Log { T a; MINIDL_HD T operator()(T x) const { return m_log(x); } };
template <class T> struct Sqrt { T a; MINIDL_HD T operator()(T x) const { return m_sqrt(x); } };
template <class T> struct Abs { T a; MINIDL_HD T operator()(T x) const { return m_abs(x); } };
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

template <class T, class F>
auto visit_unary(UnaryOp op, T alpha, F&& f) {
  switch (op) {
    case UnaryOp::Neg: return f(Neg<T>{alpha});
    case UnaryOp::Exp: return f(Exp<T>{alpha});
    case UnaryOp::Log: return f(Log<T>{alpha});
    case UnaryOp::Sqrt: return f(Sqrt<T>{alpha});
    case UnaryOp::Abs: return f(Abs<T>{alpha});
    case UnaryOp::Relu: return f(Relu<T>{alpha});
    case UnaryOp::LeakyRelu: return f(LeakyRelu<T>{alpha});
    case UnaryOp::Gelu: return f(Gelu<T>{alpha});
    case UnaryOp::Sigmoid: return f(Sigmoid<T>{alpha});
    case UnaryOp::Tanh: return f(Tanh<T>{alpha});
    case UnaryOp::AddScalar: return f(AddScalar<T>{alpha});
    case UnaryOp::MulScalar: return f(MulScalar<T>{alpha});
    case UnaryOp::PowScalar: return f(PowScalar<T>{alpha});
    case UnaryOp::Sign: return f(Sign<T>{alpha});
    case UnaryOp::DropoutMask: return f(DropoutMask<T>{alpha});
  }
  return f(Neg<T>{alpha});
}

/// Binary ops. The *Grad ops are the backward rules of activations, written as (grad, saved) -> grad_in.
enum class BinaryOp : std::uint8_t {
  First, Add, Sub, Mul, Div, Pow, Maximum, Eq, AddRelu, ReluGrad, LeakyReluGrad, SigmoidGrad, TanhGrad, GeluGrad
};

/// x broadcast to the output's shape (the expand of a gradient).
template <class T> struct FirstOp { T a; MINIDL_HD T operator()(T x, T) const { return x; } };
template <class T> struct AddOp { T a; MINIDL_HD T operator()(T x, T y) const { return x + a * y; } };
/// relu(x + a * y): a bias and the ReLU after it in one pass (nn::LinearReLU).
template <class T> struct AddReluOp { T a; MINIDL_HD T operator()(T x, T y) const { return Relu<T>{T(0)}(x + a * y); } };
template <class T> struct SubOp { T a; MINIDL_HD T operator()(T x, T y) const { return x - a * y; } };
template <class T> struct MulOp { T a; MINIDL_HD T operator()(T x, T y) const { return x * y; } };
template <class T> struct DivOp { T a; MINIDL_HD T operator()(T x, T y) const { return x / y; } };
template <class T> struct PowOp { T a; MINIDL_HD T operator()(T x, T y) const { return m_pow(x, y); } };
template <class T> struct MaximumOp { T a; MINIDL_HD T operator()(T x, T y) const { return x >= y ? x : y; } };
template <class T> struct EqOp { T a; MINIDL_HD T operator()(T x, T y) const { return x == y ? T(1) : T(0); } };
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

template <class T, class F>
auto visit_binary(BinaryOp op, T alpha, F&& f) {
  switch (op) {
    case BinaryOp::First: return f(FirstOp<T>{alpha});
    case BinaryOp::Add: return f(AddOp<T>{alpha});
    case BinaryOp::Sub: return f(SubOp<T>{alpha});
    case BinaryOp::Mul: return f(MulOp<T>{alpha});
    case BinaryOp::Div: return f(DivOp<T>{alpha});
    case BinaryOp::Pow: return f(PowOp<T>{alpha});
    case BinaryOp::Maximum: return f(MaximumOp<T>{alpha});
    case BinaryOp::Eq: return f(EqOp<T>{alpha});
    case BinaryOp::AddRelu: return f(AddReluOp<T>{alpha});
    case BinaryOp::ReluGrad: return f(ReluGradOp<T>{alpha});
    case BinaryOp::LeakyReluGrad: return f(LeakyReluGradOp<T>{alpha});
    case BinaryOp::SigmoidGrad: return f(SigmoidGradOp<T>{alpha});
    case BinaryOp::TanhGrad: return f(TanhGradOp<T>{alpha});
    case BinaryOp::GeluGrad: return f(GeluGradOp<T>{alpha});
  }
  return f(AddOp<T>{alpha});
}

/// Broadcast geometry of a binary op: for each output dim, the element stride of each operand (0 where the
/// operand is broadcast along that dim). At most kMaxDims dims.
constexpr int kMaxDims = 8;
struct BroadcastIndex {
  int ndim = 0;
  std::int64_t out_sizes[kMaxDims] = {};
  std::int64_t a_strides[kMaxDims] = {};
  std::int64_t b_strides[kMaxDims] = {};
  /// Offsets into a and b of the output element with flat index i.
  MINIDL_HD void offsets(std::int64_t i, std::int64_t& oa, std::int64_t& ob) const {
    oa = 0;
    ob = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t idx = i % out_sizes[d];
      i /= out_sizes[d];
      oa += idx * a_strides[d];
      ob += idx * b_strides[d];
    }
  }
};

/// Strides of a and b (shapes aligned at the right, as NumPy does) for an output of shape `out`.
BroadcastIndex broadcast_index(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b,
                               const std::vector<std::int64_t>& out);

/// When `operand` broadcast to `out` repeats one block along out's leading dims (its shape, leading 1s aside, is
/// out's trailing dims: a bias row added to a batch), the block's length; 0 otherwise.
std::int64_t repeat_period(const std::vector<std::int64_t>& operand, const std::vector<std::int64_t>& out);

/// Reductions run over the middle dim of a (outer, n, inner) view.
enum class ReduceOp : std::uint8_t { Sum, Max };

}  // namespace kernels
}  // namespace minidl
