// The math functions of minidl/math.h, their backward rules (PyTorch's derivatives.yaml, composed from the
// elementwise ops) and their Tensor methods. Each forward pass is one kernel of the functor tables in
// kernels/elementwise.h; the backward rules compose existing ops (they run once per step, and stay readable).
#include <cmath>
#include <limits>

#include "autocast/policy.h"
#include "autograd/inplace.h"
#include "minidl/math.h"
#include "ops/elementwise.h"

namespace minidl {

using autograd::SavedTensor;
using kernels::BinaryOp;
using kernels::TernaryOp;
using kernels::UnaryOp;
using ops::binary_forward;
using ops::record_binary;
using ops::unary_forward;

namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn10 = 2.30258509299404568402;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A unary op whose gradient is grad(g, x) of its (converted) input x.
template <class Grad>
Tensor unary_from_input(UnaryOp op, const Tensor& a_in, const char* name, const char* node, Grad grad) {
  Tensor a = a_in;
  Tensor out = unary_forward(op, 0.0, a, name);
  SavedTensor sa(a, name);
  return autograd::record(out, node, {a},
                          [sa, grad](const Tensor& g) { return std::vector<Tensor>{grad(g, sa.get())}; });
}

/// A unary op whose gradient is grad(g, y) of its result y.
template <class Grad>
Tensor unary_from_output(UnaryOp op, const Tensor& a_in, const char* name, const char* node, Grad grad) {
  Tensor a = a_in;
  Tensor out = unary_forward(op, 0.0, a, name);
  SavedTensor so(out, name);
  return autograd::record(out, node, {a},
                          [so, grad](const Tensor& g) { return std::vector<Tensor>{grad(g, so.get())}; });
}

/// A piecewise-constant op (floor, ceil, round, trunc, sign): its gradient is zero, as PyTorch's.
Tensor unary_constant_pieces(UnaryOp op, const kernels::OpScalars& s, const Tensor& a_in, const char* name,
                             const char* node) {
  Tensor a = a_in;
  Tensor out = unary_forward(op, s, a, name);
  return autograd::record(out, node, {a}, [](const Tensor& g) { return std::vector<Tensor>{zeros_like(g)}; });
}

/// The rounding ops keep integral dtypes but, as PyTorch, have no bool form.
void check_rounding_input(const Tensor& a, const char* name) {
  ops::check_defined(a, name, "self");
  MINIDL_CHECK(a.dtype() != kBool, TypeError, name, ": not implemented for bool tensors");
}

/// g where mask holds, else 0.
Tensor masked_grad(const Tensor& g, const Tensor& mask) { return mul(g, mask.to(g.dtype())); }

/// An optional tensor argument that is present: LibTorch treats an undefined tensor as absent too.
bool present(const std::optional<Tensor>& t) { return t.has_value() && t->defined(); }

/// PyTorch's check that a bound converts to the dtype an op computes in without overflow.
void check_representable(const Scalar& s, DType t, const char* op, const char* arg) {
  const double v = s.to_double();
  double lo = 0, hi = 0;
  switch (t) {
    case kInt32:
      lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
      break;
    case kUInt8:
      lo = 0, hi = 255;
      break;
    case kFloat16:
      lo = -65504.0, hi = 65504.0;
      break;
    case kFloat32:
    case kBFloat16:
      lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
      break;
    default:
      return;
  }
  MINIDL_CHECK(!std::isfinite(v) || (v >= lo && v <= hi), ValueError, op, ": '", arg, "' value ", v,
               " cannot be converted to type ", t, " without overflow");
}

/// Checks a's and the tensor bounds' devices, converts all to their result_type, and returns that dtype.
DType convert_operands(std::vector<Tensor*> operands, const char* name) {
  std::vector<Tensor> all;
  for (Tensor* t : operands) all.push_back(*t);
  const DType t = ops::result_type_of(all, {}, name);
  for (Tensor* op : operands) {
    MINIDL_CHECK(op->device() == operands[0]->device(), TypeError, name, ": expected all tensors on the same "
                 "device, found ", operands[0]->device(), " and ", op->device());
    if (op->dtype() != t) *op = op->to(t);
  }
  return t;
}

Shape broadcast3(const Tensor& a, const Tensor& b, const Tensor& c, const char* name) {
  return broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes(), name), c.sizes(), name);
}

/// lerp's rule: floating tensors of one dtype on one device (PyTorch promotes none of them).
void check_lerp_operand(const Tensor& start, const Tensor& t, const char* name, const char* arg) {
  ops::check_defined(t, name, arg);
  MINIDL_CHECK(t.device() == start.device(), TypeError, name, ": expected '", arg, "' on ", start.device(), ", found ",
               t.device());
  MINIDL_CHECK(t.dtype() == start.dtype(), TypeError, name, ": expected dtype ", start.dtype(), " for '", arg,
               "', found ", t.dtype());
}

void check_lerp_start(const Tensor& start, const char* name) {
  ops::check_defined(start, name, "self");
  MINIDL_CHECK(is_floating_point(start.dtype()), TypeError, name, ": expected a floating tensor for 'self', found ",
               start.dtype());
}

}  // namespace

// ---- floating functions ----------------------------------------------------------------------------------

Tensor sin(const Tensor& a) {
  return unary_from_input(UnaryOp::Sin, a, "sin", "SinBackward",
                          [](const Tensor& g, const Tensor& x) { return mul(g, cos(x)); });
}
Tensor cos(const Tensor& a) {
  return unary_from_input(UnaryOp::Cos, a, "cos", "CosBackward",
                          [](const Tensor& g, const Tensor& x) { return neg(mul(g, sin(x))); });
}
Tensor tan(const Tensor& a) {
  MINIDL_AUTOCAST(tan, a);
  return unary_from_output(UnaryOp::Tan, a, "tan", "TanBackward",
                           [](const Tensor& g, const Tensor& y) { return mul(g, add(square(y), 1)); });
}
Tensor asin(const Tensor& a) {
  MINIDL_AUTOCAST(asin, a);
  return unary_from_input(UnaryOp::Asin, a, "asin", "AsinBackward",
                          [](const Tensor& g, const Tensor& x) { return mul(g, rsqrt(add(neg(square(x)), 1))); });
}
Tensor acos(const Tensor& a) {
  MINIDL_AUTOCAST(acos, a);
  return unary_from_input(UnaryOp::Acos, a, "acos", "AcosBackward",
                          [](const Tensor& g, const Tensor& x) { return neg(mul(g, rsqrt(add(neg(square(x)), 1)))); });
}
Tensor atan(const Tensor& a) {
  return unary_from_input(UnaryOp::Atan, a, "atan", "AtanBackward",
                          [](const Tensor& g, const Tensor& x) { return div(g, add(square(x), 1)); });
}
Tensor sinh(const Tensor& a) {
  MINIDL_AUTOCAST(sinh, a);
  return unary_from_input(UnaryOp::Sinh, a, "sinh", "SinhBackward",
                          [](const Tensor& g, const Tensor& x) { return mul(g, cosh(x)); });
}
Tensor cosh(const Tensor& a) {
  MINIDL_AUTOCAST(cosh, a);
  return unary_from_input(UnaryOp::Cosh, a, "cosh", "CoshBackward",
                          [](const Tensor& g, const Tensor& x) { return mul(g, sinh(x)); });
}
Tensor erf(const Tensor& a) {
  return unary_from_input(UnaryOp::Erf, a, "erf", "ErfBackward", [](const Tensor& g, const Tensor& x) {
    return mul(g, mul(exp(neg(square(x))), kTwoOverSqrtPi));
  });
}
Tensor erfc(const Tensor& a) {
  return unary_from_input(UnaryOp::Erfc, a, "erfc", "ErfcBackward", [](const Tensor& g, const Tensor& x) {
    return mul(g, mul(exp(neg(square(x))), -kTwoOverSqrtPi));
  });
}
Tensor exp2(const Tensor& a) {
  return unary_from_output(UnaryOp::Exp2, a, "exp2", "Exp2Backward",
                           [](const Tensor& g, const Tensor& y) { return mul(mul(g, y), kLn2); });
}
Tensor expm1(const Tensor& a) {
  MINIDL_AUTOCAST(expm1, a);
  return unary_from_output(UnaryOp::Expm1, a, "expm1", "Expm1Backward",
                           [](const Tensor& g, const Tensor& y) { return mul(g, add(y, 1)); });
}
Tensor log2(const Tensor& a) {
  MINIDL_AUTOCAST(log2, a);
  return unary_from_input(UnaryOp::Log2, a, "log2", "Log2Backward",
                          [](const Tensor& g, const Tensor& x) { return div(g, mul(x, kLn2)); });
}
Tensor log10(const Tensor& a) {
  MINIDL_AUTOCAST(log10, a);
  return unary_from_input(UnaryOp::Log10, a, "log10", "Log10Backward",
                          [](const Tensor& g, const Tensor& x) { return div(g, mul(x, kLn10)); });
}
Tensor log1p(const Tensor& a) {
  MINIDL_AUTOCAST(log1p, a);
  return unary_from_input(UnaryOp::Log1p, a, "log1p", "Log1pBackward",
                          [](const Tensor& g, const Tensor& x) { return div(g, add(x, 1)); });
}
Tensor rsqrt(const Tensor& a) {
  MINIDL_AUTOCAST(rsqrt, a);
  return unary_from_output(UnaryOp::Rsqrt, a, "rsqrt", "RsqrtBackward",
                           [](const Tensor& g, const Tensor& y) { return mul(mul(g, mul(square(y), y)), -0.5); });
}
Tensor reciprocal(const Tensor& a) {
  MINIDL_AUTOCAST(reciprocal, a);
  return unary_from_output(UnaryOp::Reciprocal, a, "reciprocal", "ReciprocalBackward",
                           [](const Tensor& g, const Tensor& y) { return neg(mul(g, square(y))); });
}

// ---- dtype-keeping functions -----------------------------------------------------------------------------

Tensor square(const Tensor& a) {
  ops::check_defined(a, "square", "self");
  return unary_from_input(UnaryOp::Square, a.dtype() == kBool ? a.to(kInt64) : a, "square", "SquareBackward",
                          [](const Tensor& g, const Tensor& x) { return mul(g, mul(x, 2)); });
}
Tensor sign(const Tensor& a) {
  ops::check_defined(a, "sign", "self");
  return unary_constant_pieces(UnaryOp::Sign, 0.0, a, "sign", "SignBackward");
}
Tensor floor(const Tensor& a) {
  check_rounding_input(a, "floor");
  return unary_constant_pieces(UnaryOp::Floor, 0.0, a, "floor", "FloorBackward");
}
Tensor ceil(const Tensor& a) {
  check_rounding_input(a, "ceil");
  return unary_constant_pieces(UnaryOp::Ceil, 0.0, a, "ceil", "CeilBackward");
}
Tensor trunc(const Tensor& a) {
  check_rounding_input(a, "trunc");
  return unary_constant_pieces(UnaryOp::Trunc, 0.0, a, "trunc", "TruncBackward");
}
Tensor round(const Tensor& a) {
  check_rounding_input(a, "round");
  return unary_constant_pieces(UnaryOp::Round, 0.0, a, "round", "RoundBackward");
}
Tensor round(const Tensor& a, std::int64_t decimals) {
  ops::check_defined(a, "round", "self");
  MINIDL_CHECK(is_floating_point(a.dtype()), TypeError, "round: 'decimals' needs a floating tensor, found ", a.dtype());
  const double scale = std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals));
  return unary_constant_pieces(UnaryOp::RoundDecimals, {scale, decimals < 0 ? 1.0 : 0.0}, a, "round", "RoundBackward");
}

// ---- tests -----------------------------------------------------------------------------------------------

Tensor isnan(const Tensor& a_in) {
  Tensor a = a_in;
  return unary_forward(UnaryOp::IsNan, 0.0, a, "isnan");
}
Tensor isinf(const Tensor& a_in) {
  Tensor a = a_in;
  return unary_forward(UnaryOp::IsInf, 0.0, a, "isinf");
}
Tensor isfinite(const Tensor& a_in) {
  Tensor a = a_in;
  return unary_forward(UnaryOp::IsFinite, 0.0, a, "isfinite");
}

// ---- binary functions ------------------------------------------------------------------------------------

Tensor atan2(const Tensor& a_in, const Tensor& b_in) {
  MINIDL_AUTOCAST(atan2, a_in, b_in);
  Tensor a = a_in, b = b_in;
  Tensor out = binary_forward(BinaryOp::Atan2, 0.0, a, b, "atan2");
  SavedTensor sa(a, "atan2"), sb(b, "atan2");
  return record_binary(out, "Atan2Backward", a, b, [sa, sb](const Tensor& g, bool need_a, bool need_b) {
    const Tensor x = sa.get(), y = sb.get();
    const Tensor scale = div(g, add(square(x), square(y)));
    return std::make_pair(need_a ? mul(scale, y) : Tensor(), need_b ? neg(mul(scale, x)) : Tensor());
  });
}

Tensor hypot(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  ops::check_defined(a, "hypot", "self");
  ops::check_defined(b, "hypot", "other");
  const DType t = result_type(a, b);
  MINIDL_CHECK(is_floating_point(t), TypeError, "hypot: expected floating tensors, found ", a.dtype(), " and ",
               b.dtype());
  Tensor out = binary_forward(BinaryOp::Hypot, 0.0, a, b, "hypot");
  SavedTensor sa(a, "hypot"), sb(b, "hypot"), so(out, "hypot");
  return record_binary(out, "HypotBackward", a, b, [sa, sb, so](const Tensor& g, bool need_a, bool need_b) {
    const Tensor scale = div(g, so.get());
    return std::make_pair(need_a ? mul(scale, sa.get()) : Tensor(), need_b ? mul(scale, sb.get()) : Tensor());
  });
}

Tensor fmod(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  ops::check_defined(a, "fmod", "self");
  ops::check_defined(b, "fmod", "other");
  MINIDL_CHECK(result_type(a, b) != kBool, TypeError, "fmod: not implemented for bool tensors");
  Tensor out = binary_forward(BinaryOp::Fmod, 0.0, a, b, "fmod");
  SavedTensor sa(a, "fmod"), sb(b, "fmod");
  // fmod(a, b) = a - trunc(a / b) * b
  return record_binary(out, "FmodBackward", a, b, [sa, sb](const Tensor& g, bool need_a, bool need_b) {
    return std::make_pair(need_a ? g : Tensor(), need_b ? neg(mul(g, trunc(div(sa.get(), sb.get())))) : Tensor());
  });
}

Tensor fmod(const Tensor& a_in, const Scalar& s) {
  ops::check_defined(a_in, "fmod", "self");
  const DType t = result_type(a_in, s);
  MINIDL_CHECK(t != kBool, TypeError, "fmod: not implemented for bool tensors");
  MINIDL_CHECK(!is_integral(t, false) || s.to_long() != 0, ValueError, "fmod: integer division by zero ('other' is 0)");
  Tensor a = ops::scalar_operand(a_in, s, "fmod");
  // PyTorch casts the divisor to the op's dtype first (0.3 is 0.30078125 for a bfloat16 tensor).
  double divisor = s.to_double();
  kernels::dispatch_all(t, "fmod", [&](auto tag) {
    using T = typename decltype(tag)::type;
    divisor = kernels::convert<double>(kernels::convert<T>(divisor));
  });
  Tensor out = unary_forward(UnaryOp::FmodScalar, divisor, a, "fmod");
  return autograd::record(out, "FmodBackward", {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

// ---- clamp -----------------------------------------------------------------------------------------------

namespace {

/// clamp with scalar bounds, either of which may be absent: one pass, and one for the backward.
Tensor clamp_scalars(const Tensor& a_in, const std::optional<Scalar>& min, const std::optional<Scalar>& max,
                     const char* name) {
  ops::check_defined(a_in, name, "self");
  MINIDL_CHECK(min || max, ValueError, name, ": at least one of 'min' or 'max' must not be None");
  std::vector<Scalar> bounds;
  if (min) bounds.push_back(*min);
  if (max) bounds.push_back(*max);
  const DType t = ops::result_type_of({a_in}, bounds, name);
  if (min) check_representable(*min, t, name, "min");
  if (max) check_representable(*max, t, name, "max");
  Tensor a = a_in.dtype() == t ? a_in : a_in.to(t);
  const double lo = min ? min->to_double() : -kInf, hi = max ? max->to_double() : kInf;
  const UnaryOp op = min && max ? UnaryOp::Clamp : (min ? UnaryOp::ClampMin : UnaryOp::ClampMax);
  Tensor out = unary_forward(op, min ? kernels::OpScalars(lo, hi) : kernels::OpScalars(hi), a, name);
  SavedTensor sa(a, name);
  return autograd::record(out, "ClampBackward", {a}, [sa, lo, hi](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::ClampGrad, {lo, hi}, g, sa.get())};
  });
}

/// clamp_min / clamp_max with a tensor bound: maximum / minimum forward (NaN from either side), with PyTorch's
/// clamp gradient (a tie gives self the gradient, not half to each).
Tensor clamp_one_tensor(const Tensor& a_in, const Tensor& bound_in, bool is_min, const char* name) {
  Tensor a = a_in, bound = bound_in;
  Tensor out = binary_forward(is_min ? BinaryOp::Maximum : BinaryOp::Minimum, 0.0, a, bound, name);
  SavedTensor sa(a, name), sb(bound, name);
  return record_binary(out, is_min ? "ClampMinBackward" : "ClampMaxBackward", a, bound,
                       [sa, sb, is_min](const Tensor& g, bool need_a, bool need_b) {
                         const Tensor x = sa.get(), b = sb.get();
                         return std::make_pair(need_a ? masked_grad(g, is_min ? ge(x, b) : le(x, b)) : Tensor(),
                                               need_b ? masked_grad(g, is_min ? lt(x, b) : gt(x, b)) : Tensor());
                       });
}

Tensor clamp_tensors(const Tensor& a_in, const std::optional<Tensor>& min, const std::optional<Tensor>& max,
                     const char* name) {
  ops::check_defined(a_in, name, "self");
  MINIDL_CHECK(present(min) || present(max), ValueError, name, ": at least one of 'min' or 'max' must not be None");
  if (!present(max)) return clamp_one_tensor(a_in, *min, true, name);
  if (!present(min)) return clamp_one_tensor(a_in, *max, false, name);
  Tensor a = a_in, lo = *min, hi = *max;
  const DType t = convert_operands({&a, &lo, &hi}, name);
  Tensor out = empty(broadcast3(a, lo, hi, name), TensorOptions(t).device(a.device()));
  MINIDL_ON_BACKEND(a.device(), ternary(TernaryOp::Clamp, 0.0, a, lo, hi, out));
  SavedTensor sa(a, name), sl(lo, name), sh(hi, name);
  const Shape shape_a = a.sizes(), shape_lo = lo.sizes(), shape_hi = hi.sizes();
  const bool need_a = a.requires_grad(), need_lo = lo.requires_grad(), need_hi = hi.requires_grad();
  return autograd::record(out, "ClampBackward", {a, lo, hi}, [=](const Tensor& g) {
    const Tensor x = sa.get(), l = sl.get(), h = sh.get();
    // PyTorch's clamp_backward_min_max: with min > max every element is max, whose gradient it is.
    return std::vector<Tensor>{need_a ? sum_to(masked_grad(g, logical_and(ge(x, l), le(x, h))), shape_a) : Tensor(),
                               need_lo ? sum_to(masked_grad(g, logical_and(lt(x, l), lt(l, h))), shape_lo) : Tensor(),
                               need_hi ? sum_to(masked_grad(g, logical_or(gt(x, h), lt(h, l))), shape_hi) : Tensor()};
  });
}

}  // namespace

Tensor clamp(const Tensor& a, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  return clamp_scalars(a, min, max, "clamp");
}
Tensor clamp(const Tensor& a, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  return clamp_tensors(a, min, max, "clamp");
}
Tensor clamp_min(const Tensor& a, const Scalar& min) { return clamp_scalars(a, min, std::nullopt, "clamp_min"); }
Tensor clamp_max(const Tensor& a, const Scalar& max) { return clamp_scalars(a, std::nullopt, max, "clamp_max"); }
Tensor clamp_min(const Tensor& a, const Tensor& min) {
  ops::check_defined(min, "clamp_min", "min");
  return clamp_tensors(a, min, std::nullopt, "clamp_min");
}
Tensor clamp_max(const Tensor& a, const Tensor& max) {
  ops::check_defined(max, "clamp_max", "max");
  return clamp_tensors(a, std::nullopt, max, "clamp_max");
}

// ---- lerp ------------------------------------------------------------------------------------------------

Tensor lerp(const Tensor& start_in, const Tensor& end_in, const Scalar& weight) {
  check_lerp_start(start_in, "lerp");
  check_lerp_operand(start_in, end_in, "lerp", "end");
  Tensor a = start_in, b = end_in;
  const double w = weight.to_double();
  Tensor out = binary_forward(BinaryOp::LerpScalar, w, a, b, "lerp");
  return record_binary(out, "LerpBackward", a, b, [w](const Tensor& g, bool need_a, bool need_b) {
    return std::make_pair(need_a ? mul(g, 1.0 - w) : Tensor(), need_b ? mul(g, w) : Tensor());
  });
}

Tensor lerp(const Tensor& start_in, const Tensor& end_in, const Tensor& weight_in) {
  check_lerp_start(start_in, "lerp");
  check_lerp_operand(start_in, end_in, "lerp", "end");
  check_lerp_operand(start_in, weight_in, "lerp", "weight");
  const Tensor& a = start_in;
  const Tensor& b = end_in;
  const Tensor& w = weight_in;
  Tensor out = empty(broadcast3(a, b, w, "lerp"), TensorOptions(a.dtype()).device(a.device()));
  MINIDL_ON_BACKEND(a.device(), ternary(TernaryOp::Lerp, 0.0, a, b, w, out));
  SavedTensor sa(a, "lerp"), sb(b, "lerp"), sw(w, "lerp");
  const Shape shape_a = a.sizes(), shape_b = b.sizes(), shape_w = w.sizes();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad(), need_w = w.requires_grad();
  return autograd::record(out, "LerpBackward", {a, b, w}, [=](const Tensor& g) {
    const Tensor weight = sw.get();
    return std::vector<Tensor>{need_a ? sum_to(mul(g, add(neg(weight), 1)), shape_a) : Tensor(),
                               need_b ? sum_to(mul(g, weight), shape_b) : Tensor(),
                               need_w ? sum_to(mul(g, sub(sb.get(), sa.get())), shape_w) : Tensor()};
  });
}

// ---- in place --------------------------------------------------------------------------------------------

namespace {
Tensor& rounding_inplace(Tensor& self, UnaryOp op, const char* name, Tensor (*compute)(const Tensor&)) {
  check_rounding_input(self, name);
  return ops::unary_inplace(self, op, 0.0, name, compute);
}
}  // namespace

Tensor& Tensor::sin_() {
  return ops::unary_inplace(*this, UnaryOp::Sin, 0.0, "sin_", [](const Tensor& x) { return minidl::sin(x); });
}
Tensor& Tensor::cos_() {
  return ops::unary_inplace(*this, UnaryOp::Cos, 0.0, "cos_", [](const Tensor& x) { return minidl::cos(x); });
}
Tensor& Tensor::rsqrt_() {
  return ops::unary_inplace(*this, UnaryOp::Rsqrt, 0.0, "rsqrt_", [](const Tensor& x) { return minidl::rsqrt(x); });
}
Tensor& Tensor::reciprocal_() {
  return ops::unary_inplace(*this, UnaryOp::Reciprocal, 0.0, "reciprocal_",
                            [](const Tensor& x) { return minidl::reciprocal(x); });
}
Tensor& Tensor::square_() {
  ops::check_defined(*this, "square_", "self");
  MINIDL_CHECK(dtype() != kBool, TypeError, "square_: result type ", kInt64,
               " can't be cast to the desired output "
               "type ",
               kBool);
  return ops::unary_inplace(*this, UnaryOp::Square, 0.0, "square_", [](const Tensor& x) { return minidl::square(x); });
}
Tensor& Tensor::floor_() {
  return rounding_inplace(*this, UnaryOp::Floor, "floor_", [](const Tensor& x) { return minidl::floor(x); });
}
Tensor& Tensor::ceil_() {
  return rounding_inplace(*this, UnaryOp::Ceil, "ceil_", [](const Tensor& x) { return minidl::ceil(x); });
}
Tensor& Tensor::round_() {
  return rounding_inplace(*this, UnaryOp::Round, "round_", [](const Tensor& x) { return minidl::round(x); });
}
Tensor& Tensor::trunc_() {
  return rounding_inplace(*this, UnaryOp::Trunc, "trunc_", [](const Tensor& x) { return minidl::trunc(x); });
}

Tensor& Tensor::clamp_(const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  ops::check_defined(*this, "clamp_", "self");
  MINIDL_CHECK(min || max, ValueError, "clamp_: at least one of 'min' or 'max' must not be None");
  std::vector<Scalar> bounds;
  if (min) bounds.push_back(*min);
  if (max) bounds.push_back(*max);
  const DType result = ops::result_type_of({*this}, bounds, "clamp_");
  if (min) check_representable(*min, dtype(), "clamp_", "min");
  if (max) check_representable(*max, dtype(), "clamp_", "max");
  const UnaryOp op = min && max ? UnaryOp::Clamp : (min ? UnaryOp::ClampMin : UnaryOp::ClampMax);
  const kernels::OpScalars s =
      min ? kernels::OpScalars(min->to_double(), max ? max->to_double() : 0.0) : kernels::OpScalars(max->to_double());
  return ops::apply_inplace(
      *this, "clamp_", result, {}, [&] { MINIDL_ON_BACKEND(device(), unary(op, s, *this, *this)); },
      [&](const Tensor& x) { return minidl::clamp(x, min, max); });
}

Tensor& Tensor::clamp_(const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  ops::check_defined(*this, "clamp_", "self");
  MINIDL_CHECK(present(min) || present(max), ValueError, "clamp_: at least one of 'min' or 'max' must not be None");
  std::vector<Tensor> operands{*this};
  if (present(min)) operands.push_back(*min);
  if (present(max)) operands.push_back(*max);
  const DType result = ops::result_type_of(operands, {}, "clamp_");
  const Tensor lo = present(min) ? ops::inplace_operand(*this, *min, "clamp_") : Tensor();
  const Tensor hi = present(max) ? ops::inplace_operand(*this, *max, "clamp_") : Tensor();
  return ops::apply_inplace(
      *this, "clamp_", result, {lo, hi},
      [&] {
        if (lo.defined() && hi.defined()) {
          MINIDL_ON_BACKEND(device(), ternary(TernaryOp::Clamp, 0.0, *this, lo, hi, *this));
        } else {
          MINIDL_ON_BACKEND(device(), binary(lo.defined() ? BinaryOp::Maximum : BinaryOp::Minimum, 0.0, *this,
                                             lo.defined() ? lo : hi, *this));
        }
      },
      [&](const Tensor& x) { return minidl::clamp(x, min, max); });
}

Tensor& Tensor::clamp_min_(const Scalar& min) { return clamp_(min, std::nullopt); }
Tensor& Tensor::clamp_max_(const Scalar& max) { return clamp_(std::nullopt, max); }

Tensor& Tensor::lerp_(const Tensor& end, const Scalar& weight) {
  check_lerp_start(*this, "lerp_");
  check_lerp_operand(*this, end, "lerp_", "end");
  const Tensor other = ops::inplace_operand(*this, end, "lerp_");
  const double w = weight.to_double();
  return ops::apply_inplace(
      *this, "lerp_", dtype(), {other},
      [&] { MINIDL_ON_BACKEND(device(), binary(BinaryOp::LerpScalar, w, *this, other, *this)); },
      [&](const Tensor& x) { return minidl::lerp(x, other, weight); });
}

Tensor& Tensor::lerp_(const Tensor& end, const Tensor& weight) {
  check_lerp_start(*this, "lerp_");
  check_lerp_operand(*this, end, "lerp_", "end");
  check_lerp_operand(*this, weight, "lerp_", "weight");
  const Tensor e = ops::inplace_operand(*this, end, "lerp_"), w = ops::inplace_operand(*this, weight, "lerp_");
  return ops::apply_inplace(
      *this, "lerp_", dtype(), {e, w},
      [&] { MINIDL_ON_BACKEND(device(), ternary(TernaryOp::Lerp, 0.0, *this, e, w, *this)); },
      [&](const Tensor& x) { return minidl::lerp(x, e, w); });
}

// ---- methods ---------------------------------------------------------------------------------------------

Tensor Tensor::fmod(const Tensor& other) const { return minidl::fmod(*this, other); }
Tensor Tensor::fmod(const Scalar& other) const { return minidl::fmod(*this, other); }
Tensor Tensor::atan2(const Tensor& other) const { return minidl::atan2(*this, other); }
Tensor Tensor::hypot(const Tensor& other) const { return minidl::hypot(*this, other); }
Tensor Tensor::lerp(const Tensor& end, const Scalar& weight) const { return minidl::lerp(*this, end, weight); }
Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const { return minidl::lerp(*this, end, weight); }
Tensor Tensor::sign() const { return minidl::sign(*this); }
Tensor Tensor::square() const { return minidl::square(*this); }
Tensor Tensor::rsqrt() const { return minidl::rsqrt(*this); }
Tensor Tensor::reciprocal() const { return minidl::reciprocal(*this); }
Tensor Tensor::exp2() const { return minidl::exp2(*this); }
Tensor Tensor::expm1() const { return minidl::expm1(*this); }
Tensor Tensor::log2() const { return minidl::log2(*this); }
Tensor Tensor::log10() const { return minidl::log10(*this); }
Tensor Tensor::log1p() const { return minidl::log1p(*this); }
Tensor Tensor::sin() const { return minidl::sin(*this); }
Tensor Tensor::cos() const { return minidl::cos(*this); }
Tensor Tensor::tan() const { return minidl::tan(*this); }
Tensor Tensor::asin() const { return minidl::asin(*this); }
Tensor Tensor::acos() const { return minidl::acos(*this); }
Tensor Tensor::atan() const { return minidl::atan(*this); }
Tensor Tensor::sinh() const { return minidl::sinh(*this); }
Tensor Tensor::cosh() const { return minidl::cosh(*this); }
Tensor Tensor::erf() const { return minidl::erf(*this); }
Tensor Tensor::erfc() const { return minidl::erfc(*this); }
Tensor Tensor::floor() const { return minidl::floor(*this); }
Tensor Tensor::ceil() const { return minidl::ceil(*this); }
Tensor Tensor::round() const { return minidl::round(*this); }
Tensor Tensor::round(std::int64_t decimals) const { return minidl::round(*this, decimals); }
Tensor Tensor::trunc() const { return minidl::trunc(*this); }
Tensor Tensor::clamp(const std::optional<Scalar>& min, const std::optional<Scalar>& max) const {
  return minidl::clamp(*this, min, max);
}
Tensor Tensor::clamp(const std::optional<Tensor>& min, const std::optional<Tensor>& max) const {
  return minidl::clamp(*this, min, max);
}
Tensor Tensor::clamp_min(const Scalar& min) const { return minidl::clamp_min(*this, min); }
Tensor Tensor::clamp_min(const Tensor& min) const { return minidl::clamp_min(*this, min); }
Tensor Tensor::clamp_max(const Scalar& max) const { return minidl::clamp_max(*this, max); }
Tensor Tensor::clamp_max(const Tensor& max) const { return minidl::clamp_max(*this, max); }
Tensor Tensor::isnan() const { return minidl::isnan(*this); }
Tensor Tensor::isinf() const { return minidl::isinf(*this); }
Tensor Tensor::isfinite() const { return minidl::isfinite(*this); }

}  // namespace minidl
