#pragma once
// The order of sort, argsort and topk on both backends, as an unsigned key per element whose integer order is
// PyTorch's order of the values: NaN above every number (all NaNs equal), -0 equal to +0. Keys sort with radix
// sorts on the GPU and with comparisons on the CPU, so the two give the same permutations; descending order
// and the smallest elements of topk use the complemented key.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/convert.h"
#include "minidl/float16.h"

#ifdef __CUDACC__
#define MINIDL_KEY_HD __host__ __device__ __forceinline__
#else
#define MINIDL_KEY_HD inline
#endif

namespace minidl {
namespace kernels {

template <class T>
struct KeyOf {
  using type = std::make_unsigned_t<T>;
};
template <>
struct KeyOf<float> {
  using type = std::uint32_t;
};
template <>
struct KeyOf<double> {
  using type = std::uint64_t;
};
template <>
struct KeyOf<BFloat16> {
  using type = std::uint16_t;
};
template <>
struct KeyOf<Half> {
  using type = std::uint16_t;
};
template <>
struct KeyOf<bool> {
  using type = std::uint8_t;
};
template <class T>
using key_t = typename KeyOf<T>::type;

/// A floating value's bits mapped to an increasing unsigned order: negative values complemented, positive ones
/// with the sign bit set; `exp_mask` marks the exponent (all ones: inf or NaN).
template <class U>
MINIDL_KEY_HD U float_key(U bits, U exp_mask) {
  constexpr U sign = static_cast<U>(U(1) << (sizeof(U) * 8 - 1));
  const U mag = static_cast<U>(bits & static_cast<U>(~sign));
  if (mag > exp_mask) return static_cast<U>(~U(0));  // NaN
  if (mag == 0) return sign;                         // -0 and +0
  return (bits & sign) ? static_cast<U>(~bits) : static_cast<U>(bits | sign);
}

template <class T>
MINIDL_KEY_HD key_t<T> order_key(T x) {
  using U = key_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    return float_key<U>(detail::float_bits(x), 0x7F800000u);
  } else if constexpr (std::is_same_v<T, double>) {
#ifdef __CUDA_ARCH__
    const U bits = static_cast<U>(__double_as_longlong(x));
#else
    U bits;
    std::memcpy(&bits, &x, sizeof bits);
#endif
    return float_key<U>(bits, 0x7FF0000000000000ull);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return float_key<U>(x.bits, 0x7F80u);
  } else if constexpr (std::is_same_v<T, Half>) {
    return float_key<U>(x.bits, 0x7C00u);
  } else if constexpr (std::is_same_v<T, bool>) {
    return x ? U(1) : U(0);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<U>(static_cast<U>(x) ^ static_cast<U>(U(1) << (sizeof(U) * 8 - 1)));
  } else {
    return static_cast<U>(x);
  }
}

/// The key complemented when `flip`: its ascending order is the values' descending order (the largest first).
template <class T>
MINIDL_KEY_HD key_t<T> order_key(T x, bool flip) {
  const key_t<T> k = order_key(x);
  return flip ? static_cast<key_t<T>>(~k) : k;
}

}  // namespace kernels
}  // namespace minidl
