#pragma once
// Element conversions between any two dtypes, as PyTorch's casts (c10::static_cast_with_inter_type): to bool,
// value != 0; to uint8, through int64 (negative values wrap, as in NumPy); to bfloat16 / float16, through float
// (a float64 rounds to float32 first, as in PyTorch); from them, through float. OpMath is the type a kernel
// computes in: float for the 16-bit floating types, the type itself otherwise.
#include <cstdint>
#include <type_traits>

#include "minidl/float16.h"

#ifdef __CUDACC__
#define MINIDL_CONVERT_HD __host__ __device__ __forceinline__
#else
#define MINIDL_CONVERT_HD inline
#endif

namespace minidl {
namespace kernels {

template <class T> struct OpMath { using type = T; };
template <> struct OpMath<BFloat16> { using type = float; };
template <> struct OpMath<Half> { using type = float; };
template <class T> using opmath_t = typename OpMath<T>::type;

template <class T>
constexpr bool is_reduced_float_v = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

template <class D, class S> MINIDL_CONVERT_HD D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (is_reduced_float_v<S>) {
    return convert<D>(static_cast<float>(s));
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else if constexpr (std::is_same_v<D, std::uint8_t>) {
    return static_cast<std::uint8_t>(static_cast<std::int64_t>(s));
  } else if constexpr (is_reduced_float_v<D>) {
    return D(static_cast<float>(s));
  } else {
    return static_cast<D>(s);
  }
}

}  // namespace kernels
}  // namespace minidl
