#pragma once
// Elementwise math functions (LibTorch's names, overloads and argument order; PyTorch's semantics), beside the
// arithmetic and activations of ops.h; each is also a Tensor method (x.sin(), x.clamp(0, 1)). Integral and bool
// inputs of the floating functions give float32; floor, ceil, round, trunc, sign, abs, square and clamp keep
// integral dtypes; bfloat16 and float16 compute in float32. Differentiable as PyTorch (derivatives.yaml): the
// rounding functions and sign have zero gradients, isnan / isinf / isfinite none (bool results).
#include <cstdint>
#include <optional>

#include "minidl/scalar.h"
#include "minidl/tensor.h"

namespace minidl {

Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tan(const Tensor& a);
Tensor asin(const Tensor& a);
Tensor acos(const Tensor& a);
Tensor atan(const Tensor& a);
Tensor sinh(const Tensor& a);
Tensor cosh(const Tensor& a);
Tensor erf(const Tensor& a);
Tensor erfc(const Tensor& a);
Tensor exp2(const Tensor& a);
Tensor expm1(const Tensor& a);
Tensor log2(const Tensor& a);
Tensor log10(const Tensor& a);
Tensor log1p(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor reciprocal(const Tensor& a);
/// a * a; bool gives int64 (as pow(a, 2)).
Tensor square(const Tensor& a);
/// -1, 0 or 1 (NaN gives 0).
Tensor sign(const Tensor& a);
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor trunc(const Tensor& a);
/// To the nearest integer, half-way cases to even.
Tensor round(const Tensor& a);
/// To `decimals` decimal places (negative: to tens, hundreds, ...); floating inputs only.
Tensor round(const Tensor& a, std::int64_t decimals);

/// atan(a / b) in the quadrant of (b, a).
Tensor atan2(const Tensor& a, const Tensor& b);
/// sqrt(a^2 + b^2) without overflow; floating inputs only.
Tensor hypot(const Tensor& a, const Tensor& b);
/// C's remainder (the sign of a, as std::fmod); integral division by zero is a ValueError on the CPU.
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Scalar& b);

/// min(max(a, min), max) elementwise: max wins when min > max, a NaN bound gives NaN; at least one bound.
/// The result dtype promotes a with the bounds (an int64 tensor clamped to 0.5 is float32).
Tensor clamp(const Tensor& a, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
/// Tensor bounds broadcast with a.
Tensor clamp(const Tensor& a, const std::optional<Tensor>& min = std::nullopt,
             const std::optional<Tensor>& max = std::nullopt);
Tensor clamp_min(const Tensor& a, const Scalar& min);
Tensor clamp_min(const Tensor& a, const Tensor& min);
Tensor clamp_max(const Tensor& a, const Scalar& max);
Tensor clamp_max(const Tensor& a, const Tensor& max);

/// start + weight * (end - start); floating tensors of one dtype (a tensor weight too), broadcast together.
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);

/// Bool tensors (integral inputs have no NaN or infinity).
Tensor isnan(const Tensor& a);
Tensor isinf(const Tensor& a);
Tensor isfinite(const Tensor& a);

}  // namespace minidl
