#pragma once
// The two 16-bit floating types, as storage: BFloat16 (8 exponent bits, float32's range) and Half (IEEE
// binary16). Arithmetic happens in float: a value converts to float exactly, and float converts back with
// round-to-nearest-even. On the host the rounding is written out in integer arithmetic (bitwise PyTorch's CPU
// results: NaN becomes 0x7FC0 / 0x7E00 with its sign); in device code the hardware conversion is used, as
// PyTorch's CUDA kernels do (the same values; a NaN may carry other payload bits).
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define MINIDL_HOST_DEVICE __host__ __device__
#else
#define MINIDL_HOST_DEVICE
#endif

namespace minidl {
namespace detail {

MINIDL_HOST_DEVICE inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

MINIDL_HOST_DEVICE inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/// The nearest bfloat16 (ties to even) of a float's bits.
MINIDL_HOST_DEVICE inline std::uint16_t bf16_from_float_bits(std::uint32_t u) {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7FC0u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/// The nearest binary16 (ties to even) of a float's bits: overflow gives infinity, tiny values subnormals or zero.
MINIDL_HOST_DEVICE inline std::uint16_t half_from_float_bits(std::uint32_t u) {
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);  // NaN
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to infinity
  if (a >= 0x38800000u) {                                                   // normal: >= 2^-14
    const std::uint32_t r = a - 0x38000000u;                                // rebias the exponent (127 -> 15)
    return static_cast<std::uint16_t>(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
  }
  const std::uint32_t e = a >> 23;
  if (e < 102) return static_cast<std::uint16_t>(sign);  // below half the smallest subnormal (2^-25): zero
  // Subnormal: the value in units of 2^-24 is m * 2^(e - 126) with the 24-bit significand m.
  const std::uint32_t m = (a & 0x7FFFFFu) | 0x800000u, shift = 126 - e;
  const std::uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
  return static_cast<std::uint16_t>(sign | (q + ((rest > halfway || (rest == halfway && (q & 1u))) ? 1u : 0u)));
}

MINIDL_HOST_DEVICE inline float float_from_half_bits(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (man << 13));  // infinity, NaN
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24, exact in float.
  const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

}  // namespace detail

struct BFloat16 {
  std::uint16_t bits;
  BFloat16() = default;
  MINIDL_HOST_DEVICE BFloat16(float f)  // NOLINT(google-explicit-constructor): converts like a built-in type
#if defined(__CUDA_ARCH__)
      : bits(__bfloat16_as_ushort(__float2bfloat16_rn(f))) {}
#else
      : bits(detail::bf16_from_float_bits(detail::float_bits(f))) {}
#endif
  MINIDL_HOST_DEVICE operator float() const {  // NOLINT(google-explicit-constructor)
    return detail::bits_float(static_cast<std::uint32_t>(bits) << 16);
  }
  static constexpr BFloat16 from_bits(std::uint16_t b) { return BFloat16(b, 0); }

 private:
  constexpr BFloat16(std::uint16_t b, int) : bits(b) {}
};

struct Half {
  std::uint16_t bits;
  Half() = default;
  MINIDL_HOST_DEVICE Half(float f)  // NOLINT(google-explicit-constructor)
#if defined(__CUDA_ARCH__)
      : bits(__half_as_ushort(__float2half_rn(f))) {}
#else
      : bits(detail::half_from_float_bits(detail::float_bits(f))) {}
#endif
  MINIDL_HOST_DEVICE operator float() const {  // NOLINT(google-explicit-constructor)
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits));
#else
    return detail::float_from_half_bits(bits);
#endif
  }
  static constexpr Half from_bits(std::uint16_t b) { return Half(b, 0); }

 private:
  constexpr Half(std::uint16_t b, int) : bits(b) {}
};

}  // namespace minidl
