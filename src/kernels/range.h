#pragma once
// The values of the range factories (arange, linspace, logspace) for the CPU (src/cpu/range.cpp) and CUDA
// (src/cuda/range.cu) kernels, in PyTorch's arithmetic (its CPU kernels'), operation by operation:
// - arange: start + step * i in double, converted.
// - linspace: integral dtypes in double; floating dtypes in the dtype itself, bfloat16 and float16 rounding every
//   operation's float result as c10::Half's operators do. The first half counts up from start, the second down
//   from end, so both ends are exact.
// - logspace: base ^ exponent, the exponents counted from start and end as linspace's but in double (their step
//   the ends' difference in the dtype's arithmetic), the power in double.
// Products and sums are rounded as written (no fused multiply-add on the device), so both backends give the same
// bits.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/convert.h"
#include "kernels/dispatch_types.h"

#ifdef __CUDACC__
#define MINIDL_RANGE_HD __host__ __device__ __forceinline__
#else
#define MINIDL_RANGE_HD inline
#endif

namespace minidl {
namespace kernels {

/// linspace's and logspace's dtypes: all but bool.
using RangeTypes =
    DTypeSet<DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int64, DType::Int32, DType::UInt8>;

MINIDL_RANGE_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MINIDL_RANGE_HD double mul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
MINIDL_RANGE_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
MINIDL_RANGE_HD double add_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

template <class T>
struct Arange {
  double start, step;
  MINIDL_RANGE_HD T operator()(std::int64_t i) const {
    return convert<T>(add_rn(start, mul_rn(step, static_cast<double>(i))));
  }
};

/// Element i of `steps` (>= 2) values from start to end, in C: double for integral T, else opmath_t<T>.
template <class T>
struct LinspaceTerm {
  using C = std::conditional_t<std::is_integral_v<T>, double, opmath_t<T>>;
  C start, end, step;
  std::int64_t steps, halfway;

  /// x rounded to T where T's own arithmetic would round it (bfloat16, float16), else x.
  static MINIDL_RANGE_HD C r(C x) {
    if constexpr (is_reduced_float_v<T>) {
      return static_cast<float>(T(x));
    } else {
      return x;
    }
  }
  LinspaceTerm(double s, double e, std::int64_t n)
      : start(static_cast<C>(convert<T>(s))), end(static_cast<C>(convert<T>(e))), steps(n), halfway(n / 2) {
    if constexpr (std::is_integral_v<T>) {
      step = (end - start) / static_cast<double>(n - 1);
    } else {
      step = r(r(end - start) / r(static_cast<C>(n - 1)));
    }
  }
  MINIDL_RANGE_HD C operator()(std::int64_t i) const {
    if (i < halfway) return r(add_rn(start, r(mul_rn(step, r(static_cast<C>(i))))));
    return r(add_rn(end, -r(mul_rn(step, r(static_cast<C>(steps - i - 1))))));
  }
};

template <class T>
struct Linspace {
  LinspaceTerm<T> term;
  MINIDL_RANGE_HD T operator()(std::int64_t i) const { return convert<T>(term(i)); }
};

/// base ^ (element i of `steps` (>= 2) exponents from start to end), in double: start and end are values of T,
/// the step their difference (in T's arithmetic) over steps - 1, and the exponents and the power are doubles.
template <class T>
struct Logspace {
  double start, end, step, base;
  std::int64_t steps, halfway;

  Logspace(double s, double e, std::int64_t n, double b)
      : start(convert<double>(convert<T>(s))), end(convert<double>(convert<T>(e))), base(b), steps(n), halfway(n / 2) {
    using Term = LinspaceTerm<T>;
    using C = typename Term::C;
    double difference;
    if constexpr (std::is_integral_v<T>) {
      difference = static_cast<double>(static_cast<std::int64_t>(end) - static_cast<std::int64_t>(start));
    } else {
      difference = static_cast<double>(Term::r(static_cast<C>(end) - static_cast<C>(start)));
    }
    step = difference / static_cast<double>(n - 1);
  }
  MINIDL_RANGE_HD T operator()(std::int64_t i) const {
    const double e = i < halfway ? add_rn(start, mul_rn(step, static_cast<double>(i)))
                                 : add_rn(end, -mul_rn(step, static_cast<double>(steps - i - 1)));
    return convert<T>(::pow(base, e));
  }
};

}  // namespace kernels
}  // namespace minidl
