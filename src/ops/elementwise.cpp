// Elementwise arithmetic, comparisons and activations, their backward rules and their Tensor methods, and
// the helpers of ops/elementwise.h (the math functions are in math.cpp). Binary ops broadcast like NumPy and
// reduce each gradient back to its input's exact shape with sum_to.
#include "autocast/policy.h"
#include "ops/elementwise.h"

#include <cmath>

#include "autograd/inplace.h"

namespace minidl {

using autograd::bump_version;
using autograd::check_inplace_allowed;

using kernels::BinaryOp;
using kernels::UnaryOp;
using autograd::SavedTensor;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    MINIDL_CHECK(da == db || da == 1 || db == 1, ValueError, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                 " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace ops {

void check_not_bool(DType t, const char* name, const char* what, const char* instead) {
  MINIDL_CHECK(t != kBool, TypeError, name, ": ", what, " on bool tensors is not supported (use ", instead,
               " instead)");
}

Tensor binary_forward(BinaryOp op, const kernels::OpScalars& s, Tensor& a, Tensor& b, const char* name) {
  check_defined(a, name, "self");
  check_defined(b, name, "other");
  MINIDL_CHECK(a.device() == b.device(), TypeError, name, ": expected both operands on the same device, found ",
               a.device(), " (shape ", shape_str(a.sizes()), ") and ", b.device(), " (shape ",
               shape_str(b.sizes()), ")");
  DType common = result_type(a, b);
  if (kernels::floating_only(op)) common = floating_result(common);
  if (op == BinaryOp::Sub) check_not_bool(common, name, "subtraction", "logical_xor");
  if (a.dtype() != common) a = a.to(common);
  if (b.dtype() != common) b = b.to(common);
  if (op == BinaryOp::FloorDivide || op == BinaryOp::Remainder || op == BinaryOp::Fmod) {
    check_integral_divisor(b, name);
  }
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), name),
                     TensorOptions(kernels::returns_bool(op) ? kBool : common).device(a.device()));
  MINIDL_ON_BACKEND(a.device(), binary(op, s, a, b, out));
  return out;
}

Tensor unary_forward(UnaryOp op, const kernels::OpScalars& s, Tensor& a, const char* name) {
  check_defined(a, name, "self");
  if (kernels::floating_only(op) && !is_floating_point(a.dtype())) a = a.to(kFloat32);
  Tensor out = empty(a.sizes(), TensorOptions(kernels::returns_bool(op) ? kBool : a.dtype()).device(a.device()));
  MINIDL_ON_BACKEND(a.device(), unary(op, s, a, out));
  return out;
}

Tensor scalar_operand(const Tensor& a, const Scalar& s, const char* name) {
  check_defined(a, name, "self");
  const DType t = result_type(a, s);
  return a.dtype() == t ? a : a.to(t);
}

Tensor scalar_tensor(const Tensor& a, const Scalar& s, const char* name) {
  check_defined(a, name, "self");
  return full({}, s, TensorOptions(result_type(a, s)).device(a.device()));
}

Tensor inplace_operand(const Tensor& self, const Tensor& other, const char* op) {
  check_defined(self, op, "self");
  check_defined(other, op, "other");
  MINIDL_CHECK(other.device() == self.device(), TypeError, op, ": self is on ", self.device(), ", other on ",
               other.device());
  const DType r = result_type(self, other);
  MINIDL_CHECK(can_cast(r, self.dtype()), TypeError, op, ": result type ", r, " can't be cast to the desired output "
               "type ", self.dtype());
  MINIDL_CHECK(broadcast_shapes(self.sizes(), other.sizes(), op) == self.sizes(), ValueError, op, ": other of shape ",
               shape_str(other.sizes()), " does not broadcast to self's shape ", shape_str(self.sizes()));
  return other.dtype() == self.dtype() ? other : other.to(self.dtype());
}

void check_inplace_scalar(const Tensor& self, const Scalar& s, const char* op) {
  check_defined(self, op, "self");
  const DType r = result_type(self, s);
  MINIDL_CHECK(can_cast(r, self.dtype()), TypeError, op, ": result type ", r, " can't be cast to the desired output "
               "type ", self.dtype());
}

Tensor& apply_inplace(Tensor& self, const char* name, DType result, std::initializer_list<Tensor> others,
                      const std::function<void()>& write, const std::function<Tensor(const Tensor&)>& compute) {
  check_defined(self, name, "self");
  MINIDL_CHECK(can_cast(result, self.dtype()), TypeError, name, ": result type ", result, " can't be cast to the "
               "desired output type ", self.dtype());
  check_inplace_allowed(self, name);
  bool records = autograd::grad_mode_enabled() && is_floating_point(self.dtype()) && self.requires_grad();
  for (const Tensor& t : others) records = records || (autograd::grad_mode_enabled() && t.requires_grad());
  if (records) return self.copy_(compute(self.clone()));
  write();
  bump_version(self);
  return self;
}

Tensor& unary_inplace(Tensor& self, UnaryOp op, const kernels::OpScalars& s, const char* name,
                      const std::function<Tensor(const Tensor&)>& compute) {
  check_defined(self, name, "self");
  const DType result = kernels::floating_only(op) ? floating_result(self.dtype()) : self.dtype();
  return apply_inplace(
      self, name, result, {}, [&] { MINIDL_ON_BACKEND(self.device(), unary(op, s, self, self)); }, compute);
}

}  // namespace ops

using ops::binary_forward;
using ops::check_not_bool;
using ops::record_binary;
using ops::scalar_operand;
using ops::scalar_tensor;
using ops::unary_forward;

namespace {
/// alpha * s as a Scalar of the higher of their categories (an integer stays an integer).
Scalar scaled(const Scalar& s, const Scalar& alpha) {
  if (s.is_floating_point() || alpha.is_floating_point()) return s.to_double() * alpha.to_double();
  if (s.is_boolean() && alpha.is_boolean()) return s.to_long() != 0 && alpha.to_long() != 0;
  return s.to_long() * alpha.to_long();
}
}  // namespace

Tensor add(const Tensor& a_in, const Tensor& b_in, const Scalar& alpha_in) {
  Tensor a = a_in, b = b_in;
  const double alpha = alpha_in.to_double();
  Tensor out = binary_forward(BinaryOp::Add, alpha, a, b, "add");
  return record_binary(out, "AddBackward", a, b, [alpha](const Tensor& g, bool, bool need_b) {
    return std::make_pair(g, need_b && alpha != 1.0 ? mul(g, alpha) : g);
  });
}

Tensor sub(const Tensor& a_in, const Tensor& b_in, const Scalar& alpha_in) {
  Tensor a = a_in, b = b_in;
  const double alpha = alpha_in.to_double();
  Tensor out = binary_forward(BinaryOp::Sub, alpha, a, b, "sub");
  return record_binary(out, "SubBackward", a, b, [alpha](const Tensor& g, bool, bool need_b) {
    return std::make_pair(g, need_b ? mul(g, -alpha) : Tensor());
  });
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  Tensor out = binary_forward(BinaryOp::Mul, 1.0, a, b, "mul");
  SavedTensor sa(a, "mul"), sb(b, "mul");
  return record_binary(out, "MulBackward", a, b, [sa, sb](const Tensor& g, bool need_a, bool need_b) {
    return std::make_pair(need_a ? mul(g, sb.get()) : Tensor(), need_b ? mul(g, sa.get()) : Tensor());
  });
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  Tensor out = binary_forward(BinaryOp::Div, 1.0, a, b, "div");
  SavedTensor sa(a, "div"), sb(b, "div");
  return record_binary(out, "DivBackward", a, b, [sa, sb](const Tensor& g, bool need_a, bool need_b) {
    const Tensor bv = sb.get();
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2
    return std::make_pair(need_a ? div(g, bv) : Tensor(), need_b ? neg(div(mul(g, sa.get()), mul(bv, bv))) : Tensor());
  });
}

Tensor pow(const Tensor& a_in, const Tensor& b_in) {
  MINIDL_AUTOCAST(pow, a_in, b_in);
  Tensor a = a_in, b = b_in;
  Tensor out = binary_forward(BinaryOp::Pow, 1.0, a, b, "pow");
  SavedTensor sa(a, "pow"), sb(b, "pow"), so(out, "pow");
  return record_binary(out, "PowBackward", a, b, [sa, sb, so](const Tensor& g, bool need_a, bool need_b) {
    const Tensor av = sa.get(), bv = sb.get();
    // d(a^b)/da = b * a^(b-1); d(a^b)/db = a^b * log(a)
    return std::make_pair(need_a ? mul(g, mul(bv, pow(av, sub(bv, ones_like(bv))))) : Tensor(),
                          need_b ? mul(g, mul(so.get(), log(av))) : Tensor());
  });
}

namespace {
/// maximum / minimum: the gradient goes to the operand that was chosen (ties to a).
Tensor extremum(BinaryOp op, const Tensor& a_in, const Tensor& b_in, const char* name, const char* node) {
  Tensor a = a_in, b = b_in;
  Tensor out = binary_forward(op, 1.0, a, b, name);
  SavedTensor sa(a, name), so(out, name);
  return record_binary(out, node, a, b, [sa, so](const Tensor& g, bool need_a, bool need_b) {
    const Tensor a_wins = eq(so.get(), sa.get()).to(g.dtype());  // 1 where a was chosen
    return std::make_pair(need_a ? mul(g, a_wins) : Tensor(), need_b ? mul(g, add(neg(a_wins), 1.0)) : Tensor());
  });
}

/// An op whose result carries no gradient (comparisons, logical ops, floor division).
Tensor nondifferentiable(BinaryOp op, const Tensor& a_in, const Tensor& b_in, const char* name) {
  Tensor a = a_in, b = b_in;
  return binary_forward(op, 1.0, a, b, name);
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::Maximum, a, b, "maximum", "MaximumBackward");
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::Minimum, a, b, "minimum", "MinimumBackward");
}
Tensor floor_divide(const Tensor& a, const Tensor& b) {
  return nondifferentiable(BinaryOp::FloorDivide, a, b, "floor_divide");
}

Tensor remainder(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  MINIDL_CHECK(result_type(a, b) != kBool, TypeError, "remainder: not implemented for bool tensors");
  Tensor out = binary_forward(BinaryOp::Remainder, 1.0, a, b, "remainder");
  SavedTensor sa(a, "remainder"), sb(b, "remainder");
  // a % b = a - floor(a / b) * b: gradient 1 for a, -floor(a / b) for b.
  return record_binary(out, "RemainderBackward", a, b, [sa, sb](const Tensor& g, bool need_a, bool need_b) {
    return std::make_pair(need_a ? g : Tensor(), need_b ? mul(g, neg(floor_divide(sa.get(), sb.get()))) : Tensor());
  });
}

Tensor eq(const Tensor& a, const Tensor& b) { return nondifferentiable(BinaryOp::Eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return nondifferentiable(BinaryOp::Ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return nondifferentiable(BinaryOp::Lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return nondifferentiable(BinaryOp::Le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return nondifferentiable(BinaryOp::Gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return nondifferentiable(BinaryOp::Ge, a, b, "ge"); }
Tensor eq(const Tensor& a, const Scalar& b) { return eq(a, scalar_tensor(a, b, "eq")); }
Tensor ne(const Tensor& a, const Scalar& b) { return ne(a, scalar_tensor(a, b, "ne")); }
Tensor lt(const Tensor& a, const Scalar& b) { return lt(a, scalar_tensor(a, b, "lt")); }
Tensor le(const Tensor& a, const Scalar& b) { return le(a, scalar_tensor(a, b, "le")); }
Tensor gt(const Tensor& a, const Scalar& b) { return gt(a, scalar_tensor(a, b, "gt")); }
Tensor ge(const Tensor& a, const Scalar& b) { return ge(a, scalar_tensor(a, b, "ge")); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return nondifferentiable(BinaryOp::LogicalAnd, a, b, "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return nondifferentiable(BinaryOp::LogicalOr, a, b, "logical_or");
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return nondifferentiable(BinaryOp::LogicalXor, a, b, "logical_xor");
}

Tensor logical_not(const Tensor& a_in) {
  Tensor a = a_in;
  return unary_forward(UnaryOp::LogicalNot, 0.0, a, "logical_not");
}

Tensor add(const Tensor& a_in, const Scalar& s) {
  Tensor a = scalar_operand(a_in, s, "add");
  Tensor out = unary_forward(UnaryOp::AddScalar, s.to_double(), a, "add");
  return autograd::record_strided(out, "AddScalarBackward", {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor sub(const Tensor& a, const Scalar& s) {
  check_not_bool(result_type(a, s), "sub", "subtraction", "logical_xor");
  return add(a, s.is_floating_point() ? Scalar(-s.to_double()) : Scalar(-s.to_long()));
}

Tensor mul(const Tensor& a_in, const Scalar& s_in) {
  Tensor a = scalar_operand(a_in, s_in, "mul");
  const double s = s_in.to_double();
  Tensor out = unary_forward(UnaryOp::MulScalar, s, a, "mul");
  return autograd::record_strided(out, "MulScalarBackward", {a},
                          [s](const Tensor& g) { return std::vector<Tensor>{mul(g, s)}; });
}

/// Multiplies by the reciprocal, as minidl's division by a scalar always has (the last bit may differ from
/// PyTorch's true division).
Tensor div(const Tensor& a, const Scalar& s) {
  ops::check_defined(a, "div", "self");
  return mul(is_floating_point(a.dtype()) ? a : a.to(kFloat32), 1.0 / s.to_double());
}
Tensor floor_divide(const Tensor& a, const Scalar& s) { return floor_divide(a, scalar_tensor(a, s, "floor_divide")); }
Tensor remainder(const Tensor& a, const Scalar& s) { return remainder(a, scalar_tensor(a, s, "remainder")); }

Tensor pow(const Tensor& a_in, double p) {
  MINIDL_AUTOCAST(pow, a_in, p);
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::PowScalar, p, a, "pow");
  SavedTensor sa(a, "pow");
  return autograd::record_strided(out, "PowScalarBackward", {a}, [sa, p](const Tensor& g) {
    return std::vector<Tensor>{mul(g, mul(pow(sa.get(), p - 1.0), p))};
  });
}

Tensor neg(const Tensor& a_in) {
  Tensor a = a_in;
  ops::check_defined(a, "neg", "self");
  check_not_bool(a.dtype(), "neg", "negation", "logical_not");
  Tensor out = unary_forward(UnaryOp::Neg, 0.0, a, "neg");
  return autograd::record_strided(out, "NegBackward", {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor exp(const Tensor& a_in) {
  MINIDL_AUTOCAST(exp, a_in);
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Exp, 0.0, a, "exp");
  SavedTensor so(out, "exp");
  return autograd::record_strided(out, "ExpBackward", {a},
                          [so](const Tensor& g) { return std::vector<Tensor>{mul(g, so.get())}; });
}

Tensor log(const Tensor& a_in) {
  MINIDL_AUTOCAST(log, a_in);
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Log, 0.0, a, "log");
  SavedTensor sa(a, "log");
  return autograd::record_strided(out, "LogBackward", {a},
                          [sa](const Tensor& g) { return std::vector<Tensor>{div(g, sa.get())}; });
}

Tensor sqrt(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Sqrt, 0.0, a, "sqrt");
  SavedTensor so(out, "sqrt");
  return autograd::record_strided(out, "SqrtBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{div(mul(g, 0.5), so.get())};
  });
}

Tensor abs(const Tensor& a_in) {
  Tensor a = a_in;
  ops::check_defined(a, "abs", "self");
  MINIDL_CHECK(a.dtype() != kBool, TypeError, "abs: not implemented for bool tensors");
  Tensor out = unary_forward(UnaryOp::Abs, 0.0, a, "abs");
  SavedTensor sa(a, "abs");
  return autograd::record_strided(out, "AbsBackward", {a}, [sa](const Tensor& g) {
    Tensor saved = sa.get();
    return std::vector<Tensor>{mul(g, unary_forward(UnaryOp::Sign, 0.0, saved, "sign"))};
  });
}

Tensor relu(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Relu, 0.0, a, "relu");
  SavedTensor so(out, "relu");  // out > 0 exactly where a > 0, and keeping out lets a be freed
  return autograd::record_strided(out, "ReluBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::ReluGrad, 0.0, g, so.get())};
  });
}

Tensor& relu_(Tensor& a) {
  ops::check_defined(a, "relu_", "self");
  ops::check_floating(a, "relu_");
  autograd::check_inplace_allowed(a, "relu_");
  const autograd::InplaceRecord rec(a, "relu_", "Relu_Backward");
  MINIDL_ON_BACKEND(a.device(), unary(UnaryOp::Relu, 0.0, a, a));
  autograd::bump_version(a);
  SavedTensor so(a, "relu_");  // the result: out > 0 exactly where the input was > 0
  rec.finish(
      a, [so](const Tensor& g) { return std::vector<Tensor>{ops::binary_grad(BinaryOp::ReluGrad, 0.0, g, so.get())}; });
  return a;
}

Tensor& leaky_relu_(Tensor& a, double slope) {
  ops::check_defined(a, "leaky_relu_", "self");
  ops::check_floating(a, "leaky_relu_");
  return ops::unary_inplace(a, UnaryOp::LeakyRelu, slope, "leaky_relu_",
                            [slope](const Tensor& self) { return minidl::leaky_relu(self, slope); });
}

Tensor leaky_relu(const Tensor& a_in, double slope) {
  Tensor a = a_in;
  ops::check_floating(a, "leaky_relu");
  Tensor out = unary_forward(UnaryOp::LeakyRelu, slope, a, "leaky_relu");
  SavedTensor sa(a, "leaky_relu");
  return autograd::record_strided(out, "LeakyReluBackward", {a}, [sa, slope](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::LeakyReluGrad, slope, g, sa.get())};
  });
}

Tensor gelu(const Tensor& a_in) {
  Tensor a = a_in;
  ops::check_defined(a, "gelu", "self");
  ops::check_floating(a, "gelu");  // PyTorch has no integral gelu
  Tensor out = unary_forward(UnaryOp::Gelu, 0.0, a, "gelu");
  SavedTensor sa(a, "gelu");
  return autograd::record_strided(out, "GeluBackward", {a}, [sa](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::GeluGrad, 0.0, g, sa.get())};
  });
}

Tensor sigmoid(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Sigmoid, 0.0, a, "sigmoid");
  SavedTensor so(out, "sigmoid");
  return autograd::record_strided(out, "SigmoidBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::SigmoidGrad, 0.0, g, so.get())};
  });
}

Tensor tanh(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Tanh, 0.0, a, "tanh");
  SavedTensor so(out, "tanh");
  return autograd::record_strided(out, "TanhBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::TanhGrad, 0.0, g, so.get())};
  });
}

// ---- in place ------------------------------------------------------------------------------------------

Tensor& Tensor::add_(const Tensor& other_in, const Scalar& alpha_in) {
  const Tensor other = ops::inplace_operand(*this, other_in, "add_");
  const double alpha = alpha_in.to_double();
  check_inplace_allowed(*this, "add_");
  const autograd::InplaceRecord rec(*this, "add_", "Add_Backward", {other});
  MINIDL_ON_BACKEND(device(), binary(kernels::BinaryOp::Add, alpha, *this, other, *this));
  bump_version(*this);
  const bool other_grad = other.requires_grad();
  const Shape other_shape = other.sizes();
  rec.finish(*this, [=](const Tensor& g) {
    return std::vector<Tensor>{g, other_grad ? sum_to(alpha == 1.0 ? g : g * alpha, other_shape) : Tensor()};
  });
  return *this;
}

Tensor& Tensor::add_(const Scalar& other, const Scalar& alpha) {
  ops::check_inplace_scalar(*this, other, "add_");
  ops::check_inplace_scalar(*this, alpha, "add_");
  check_inplace_allowed(*this, "add_");
  const autograd::InplaceRecord rec(*this, "add_", "AddScalar_Backward");
  MINIDL_ON_BACKEND(device(), unary(kernels::UnaryOp::AddScalar, scaled(other, alpha).to_double(), *this, *this));
  bump_version(*this);
  rec.finish(*this, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return *this;
}

Tensor& Tensor::mul_(const Scalar& value_in) {
  ops::check_inplace_scalar(*this, value_in, "mul_");
  check_inplace_allowed(*this, "mul_");
  const double value = value_in.to_double();
  const autograd::InplaceRecord rec(*this, "mul_", "MulScalar_Backward");
  MINIDL_ON_BACKEND(device(), unary(kernels::UnaryOp::MulScalar, value, *this, *this));
  bump_version(*this);
  rec.finish(*this, [value](const Tensor& g) { return std::vector<Tensor>{g * value}; });
  return *this;
}

Tensor& Tensor::sub_(const Tensor& other, const Scalar& alpha) {
  check_not_bool(dtype(), "sub_", "subtraction", "logical_xor");
  return add_(other, alpha.is_floating_point() ? Scalar(-alpha.to_double()) : Scalar(-alpha.to_long()));
}
Tensor& Tensor::sub_(const Scalar& other, const Scalar& alpha) {
  check_not_bool(dtype(), "sub_", "subtraction", "logical_xor");
  return add_(other, alpha.is_floating_point() ? Scalar(-alpha.to_double()) : Scalar(-alpha.to_long()));
}

Tensor& Tensor::mul_(const Tensor& other_in) {
  const Tensor other = ops::inplace_operand(*this, other_in, "mul_");
  return ops::apply_inplace(
      *this, "mul_", dtype(), {other},
      [&] { MINIDL_ON_BACKEND(device(), binary(BinaryOp::Mul, 1.0, *this, other, *this)); },
      [&](const Tensor& self) { return minidl::mul(self, other); });
}

Tensor& Tensor::div_(const Tensor& other_in) {
  ops::check_defined(*this, "div_", "self");
  ops::check_defined(other_in, "div_", "other");
  const DType result = ops::floating_result(result_type(*this, other_in));
  MINIDL_CHECK(can_cast(result, dtype()), TypeError, "div_: result type ", result, " can't be cast to the desired "
               "output type ", dtype());
  const Tensor other = ops::inplace_operand(*this, other_in, "div_");
  return ops::apply_inplace(
      *this, "div_", result, {other},
      [&] { MINIDL_ON_BACKEND(device(), binary(BinaryOp::Div, 1.0, *this, other, *this)); },
      [&](const Tensor& self) { return minidl::div(self, other); });
}

Tensor& Tensor::div_(const Scalar& other) {
  ops::check_defined(*this, "div_", "self");
  MINIDL_CHECK(is_floating_point(), TypeError, "div_: result type ", kFloat32, " can't be cast to the desired "
               "output type ", dtype());
  return mul_(1.0 / other.to_double());
}

Tensor& Tensor::pow_(double exponent) {
  return ops::unary_inplace(*this, UnaryOp::PowScalar, exponent, "pow_",
                            [exponent](const Tensor& self) { return minidl::pow(self, exponent); });
}

Tensor& Tensor::neg_() {
  ops::check_defined(*this, "neg_", "self");
  check_not_bool(dtype(), "neg_", "negation", "logical_not");
  return ops::unary_inplace(*this, UnaryOp::Neg, 0.0, "neg_", [](const Tensor& self) { return minidl::neg(self); });
}
Tensor& Tensor::abs_() {
  ops::check_defined(*this, "abs_", "self");
  MINIDL_CHECK(dtype() != kBool, TypeError, "abs_: not implemented for bool tensors");
  return ops::unary_inplace(*this, UnaryOp::Abs, 0.0, "abs_", [](const Tensor& self) { return minidl::abs(self); });
}
Tensor& Tensor::exp_() {
  return ops::unary_inplace(*this, UnaryOp::Exp, 0.0, "exp_", [](const Tensor& self) { return minidl::exp(self); });
}
Tensor& Tensor::log_() {
  return ops::unary_inplace(*this, UnaryOp::Log, 0.0, "log_", [](const Tensor& self) { return minidl::log(self); });
}
Tensor& Tensor::sqrt_() {
  return ops::unary_inplace(*this, UnaryOp::Sqrt, 0.0, "sqrt_", [](const Tensor& self) { return minidl::sqrt(self); });
}
Tensor& Tensor::sigmoid_() {
  return ops::unary_inplace(*this, UnaryOp::Sigmoid, 0.0, "sigmoid_",
                            [](const Tensor& self) { return minidl::sigmoid(self); });
}
Tensor& Tensor::tanh_() {
  return ops::unary_inplace(*this, UnaryOp::Tanh, 0.0, "tanh_", [](const Tensor& self) { return minidl::tanh(self); });
}
Tensor& Tensor::relu_() { return minidl::relu_(*this); }

// ---- methods -------------------------------------------------------------------------------------------

Tensor Tensor::add(const Tensor& other, const Scalar& alpha) const { return minidl::add(*this, other, alpha); }
Tensor Tensor::add(const Scalar& other, const Scalar& alpha) const { return minidl::add(*this, scaled(other, alpha)); }
Tensor Tensor::sub(const Tensor& other, const Scalar& alpha) const { return minidl::sub(*this, other, alpha); }
Tensor Tensor::sub(const Scalar& other, const Scalar& alpha) const { return minidl::sub(*this, scaled(other, alpha)); }
Tensor Tensor::mul(const Tensor& other) const { return minidl::mul(*this, other); }
Tensor Tensor::mul(const Scalar& other) const { return minidl::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return minidl::div(*this, other); }
Tensor Tensor::div(const Scalar& other) const { return minidl::div(*this, other); }
Tensor Tensor::floor_divide(const Tensor& other) const { return minidl::floor_divide(*this, other); }
Tensor Tensor::floor_divide(const Scalar& other) const { return minidl::floor_divide(*this, other); }
Tensor Tensor::remainder(const Tensor& other) const { return minidl::remainder(*this, other); }
Tensor Tensor::remainder(const Scalar& other) const { return minidl::remainder(*this, other); }
Tensor Tensor::pow(const Tensor& exponent) const { return minidl::pow(*this, exponent); }
Tensor Tensor::pow(double exponent) const { return minidl::pow(*this, exponent); }
Tensor Tensor::maximum(const Tensor& other) const { return minidl::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return minidl::minimum(*this, other); }
Tensor Tensor::neg() const { return minidl::neg(*this); }
Tensor Tensor::abs() const { return minidl::abs(*this); }
Tensor Tensor::exp() const { return minidl::exp(*this); }
Tensor Tensor::log() const { return minidl::log(*this); }
Tensor Tensor::sqrt() const { return minidl::sqrt(*this); }
Tensor Tensor::relu() const { return minidl::relu(*this); }
Tensor Tensor::sigmoid() const { return minidl::sigmoid(*this); }
Tensor Tensor::tanh() const { return minidl::tanh(*this); }
Tensor Tensor::eq(const Tensor& other) const { return minidl::eq(*this, other); }
Tensor Tensor::eq(const Scalar& other) const { return minidl::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return minidl::ne(*this, other); }
Tensor Tensor::ne(const Scalar& other) const { return minidl::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return minidl::lt(*this, other); }
Tensor Tensor::lt(const Scalar& other) const { return minidl::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return minidl::le(*this, other); }
Tensor Tensor::le(const Scalar& other) const { return minidl::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return minidl::gt(*this, other); }
Tensor Tensor::gt(const Scalar& other) const { return minidl::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return minidl::ge(*this, other); }
Tensor Tensor::ge(const Scalar& other) const { return minidl::ge(*this, other); }
Tensor Tensor::logical_and(const Tensor& other) const { return minidl::logical_and(*this, other); }
Tensor Tensor::logical_or(const Tensor& other) const { return minidl::logical_or(*this, other); }
Tensor Tensor::logical_xor(const Tensor& other) const { return minidl::logical_xor(*this, other); }
Tensor Tensor::logical_not() const { return minidl::logical_not(*this); }

}  // namespace minidl
