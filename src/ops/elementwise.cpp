// Elementwise ops and their backward rules. Binary ops broadcast like NumPy and reduce each gradient back
// to its input's exact shape with sum_to.
#include <cmath>

#include "autograd/inplace.h"
#include "ops/op_utils.h"

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

namespace {

/// Float-valued ops (div, pow, exp, log, ...) give float32 for integral inputs, as PyTorch's default dtype.
DType floating_result(DType t) { return is_floating_point(t) ? t : kFloat32; }

/// PyTorch's rule: bool tensors have no negation or subtraction; `instead` names the logical op to use.
void check_not_bool(DType t, const char* name, const char* what, const char* instead) {
  MINIDL_CHECK(t != kBool, TypeError, name, ": ", what, " on bool tensors is not supported (use ", instead,
               " instead)");
}

/// Converts a and b (in place: the callers record their backward on the converted operands, so gradients come
/// back in each input's own dtype) to the dtype the op computes in, runs it, and returns the output.
Tensor binary_forward(BinaryOp op, double alpha, Tensor& a, Tensor& b, const char* name) {
  ops::check_defined(a, name, "self");
  ops::check_defined(b, name, "other");
  MINIDL_CHECK(a.device() == b.device(), TypeError, name, ": expected both operands on the same device, found ",
               a.device(), " (shape ", shape_str(a.sizes()), ") and ", b.device(), " (shape ",
               shape_str(b.sizes()), ")");
  DType common = result_type(a, b);
  if (op == BinaryOp::Div || op == BinaryOp::Pow) common = floating_result(common);
  if (op == BinaryOp::Sub) check_not_bool(common, name, "subtraction", "logical_xor");
  if (a.dtype() != common) a = a.to(common);
  if (b.dtype() != common) b = b.to(common);
  if (op == BinaryOp::FloorDivide || op == BinaryOp::Remainder) ops::check_integral_divisor(b, name);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), name),
                     TensorOptions(kernels::returns_bool(op) ? kBool : common).device(a.device()));
  MINIDL_ON_BACKEND(a.device(), binary(op, alpha, a, b, out));
  return out;
}

/// `float_only`: integral inputs are converted to float32 first (exp of an int64 tensor is float32).
Tensor unary_forward(UnaryOp op, double alpha, Tensor& a, const char* name, bool float_only) {
  ops::check_defined(a, name, "self");
  if (float_only && !is_floating_point(a.dtype())) a = a.to(kFloat32);
  Tensor out = ops::empty_as(a.sizes(), a);
  MINIDL_ON_BACKEND(a.device(), unary(op, alpha, a, out));
  return out;
}

/// The operand of a scalar op: `a` in the dtype that a and s promote to.
Tensor scalar_operand(const Tensor& a, const Scalar& s, const char* name) {
  ops::check_defined(a, name, "self");
  const DType t = result_type(a, s);
  return a.dtype() == t ? a : a.to(t);
}

/// A 0-d tensor of s on a's device in the dtype a and s promote to: the other operand of a comparison.
Tensor scalar_tensor(const Tensor& a, const Scalar& s, const char* name) {
  ops::check_defined(a, name, "self");
  return full({}, s, TensorOptions(result_type(a, s)).device(a.device()));
}

/// Records a binary op whose backward computes (grad_a, grad_b) at the output's shape; each is summed back
/// to its input's shape, and skipped when that input needs no gradient.
template <class F>
Tensor record_binary(Tensor out, const char* name, const Tensor& a, const Tensor& b, F grads) {
  const Shape sa = a.sizes(), sb = b.sizes();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record(out, name, {a, b}, [=](const Tensor& g) {
    std::pair<Tensor, Tensor> r = grads(g, need_a, need_b);
    return std::vector<Tensor>{need_a ? sum_to(r.first, sa) : Tensor(), need_b ? sum_to(r.second, sb) : Tensor()};
  });
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

/// An op whose result carries no gradient (comparisons, logical ops, floor division, remainder's integer form).
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
  Tensor r = unary_forward(UnaryOp::LogicalNot, 0.0, a, "logical_not", false);
  return r.dtype() == kBool ? r : r.to(kBool);
}

Tensor add(const Tensor& a_in, const Scalar& s) {
  Tensor a = scalar_operand(a_in, s, "add");
  Tensor out = unary_forward(UnaryOp::AddScalar, s.to_double(), a, "add", false);
  return autograd::record(out, "AddScalarBackward", {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor sub(const Tensor& a, const Scalar& s) {
  check_not_bool(result_type(a, s), "sub", "subtraction", "logical_xor");
  return add(a, s.is_floating_point() ? Scalar(-s.to_double()) : Scalar(-s.to_long()));
}

Tensor mul(const Tensor& a_in, const Scalar& s_in) {
  Tensor a = scalar_operand(a_in, s_in, "mul");
  const double s = s_in.to_double();
  Tensor out = unary_forward(UnaryOp::MulScalar, s, a, "mul", false);
  return autograd::record(out, "MulScalarBackward", {a},
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
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::PowScalar, p, a, "pow", true);
  SavedTensor sa(a, "pow");
  return autograd::record(out, "PowScalarBackward", {a}, [sa, p](const Tensor& g) {
    return std::vector<Tensor>{mul(g, mul(pow(sa.get(), p - 1.0), p))};
  });
}

Tensor neg(const Tensor& a_in) {
  Tensor a = a_in;
  ops::check_defined(a, "neg", "self");
  check_not_bool(a.dtype(), "neg", "negation", "logical_not");
  Tensor out = unary_forward(UnaryOp::Neg, 0.0, a, "neg", false);
  return autograd::record(out, "NegBackward", {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor exp(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Exp, 0.0, a, "exp", true);
  SavedTensor so(out, "exp");
  return autograd::record(out, "ExpBackward", {a},
                          [so](const Tensor& g) { return std::vector<Tensor>{mul(g, so.get())}; });
}

Tensor log(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Log, 0.0, a, "log", true);
  SavedTensor sa(a, "log");
  return autograd::record(out, "LogBackward", {a},
                          [sa](const Tensor& g) { return std::vector<Tensor>{div(g, sa.get())}; });
}

Tensor sqrt(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Sqrt, 0.0, a, "sqrt", true);
  SavedTensor so(out, "sqrt");
  return autograd::record(out, "SqrtBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{div(mul(g, 0.5), so.get())};
  });
}

Tensor abs(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Abs, 0.0, a, "abs", false);
  SavedTensor sa(a, "abs");
  return autograd::record(out, "AbsBackward", {a}, [sa](const Tensor& g) {
    Tensor saved = sa.get();
    return std::vector<Tensor>{mul(g, unary_forward(UnaryOp::Sign, 0.0, saved, "sign", false))};
  });
}

Tensor relu(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Relu, 0.0, a, "relu", false);
  SavedTensor so(out, "relu");  // out > 0 exactly where a > 0, and keeping out lets a be freed
  return autograd::record(out, "ReluBackward", {a}, [so](const Tensor& g) {
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

Tensor leaky_relu(const Tensor& a_in, double slope) {
  Tensor a = a_in;
  ops::check_floating(a, "leaky_relu");
  Tensor out = unary_forward(UnaryOp::LeakyRelu, slope, a, "leaky_relu", true);
  SavedTensor sa(a, "leaky_relu");
  return autograd::record(out, "LeakyReluBackward", {a}, [sa, slope](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::LeakyReluGrad, slope, g, sa.get())};
  });
}

Tensor gelu(const Tensor& a_in) {
  Tensor a = a_in;
  ops::check_defined(a, "gelu", "self");
  ops::check_floating(a, "gelu");  // PyTorch has no integral gelu
  Tensor out = unary_forward(UnaryOp::Gelu, 0.0, a, "gelu", true);
  SavedTensor sa(a, "gelu");
  return autograd::record(out, "GeluBackward", {a}, [sa](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::GeluGrad, 0.0, g, sa.get())};
  });
}

Tensor sigmoid(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Sigmoid, 0.0, a, "sigmoid", true);
  SavedTensor so(out, "sigmoid");
  return autograd::record(out, "SigmoidBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::SigmoidGrad, 0.0, g, so.get())};
  });
}

Tensor tanh(const Tensor& a_in) {
  Tensor a = a_in;
  Tensor out = unary_forward(UnaryOp::Tanh, 0.0, a, "tanh", true);
  SavedTensor so(out, "tanh");
  return autograd::record(out, "TanhBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::TanhGrad, 0.0, g, so.get())};
  });
}

/// The operand of an in-place op on self: in self's dtype, after checking that the result the out-of-place op
/// would have (result_type) may be written into self.
Tensor inplace_operand(const Tensor& self, const Tensor& other, const char* op) {
  ops::check_defined(self, op, "self");
  ops::check_defined(other, op, "other");
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
  ops::check_defined(self, op, "self");
  const DType r = result_type(self, s);
  MINIDL_CHECK(can_cast(r, self.dtype()), TypeError, op, ": result type ", r, " can't be cast to the desired output "
               "type ", self.dtype());
}

Tensor& Tensor::add_(const Tensor& other_in, const Scalar& alpha_in) {
  const Tensor other = inplace_operand(*this, other_in, "add_");
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

Tensor& Tensor::add_(const Scalar& value) {
  check_inplace_scalar(*this, value, "add_");
  check_inplace_allowed(*this, "add_");
  const autograd::InplaceRecord rec(*this, "add_", "AddScalar_Backward");
  MINIDL_ON_BACKEND(device(), unary(kernels::UnaryOp::AddScalar, value.to_double(), *this, *this));
  bump_version(*this);
  rec.finish(*this, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return *this;
}

Tensor& Tensor::mul_(const Scalar& value_in) {
  check_inplace_scalar(*this, value_in, "mul_");
  check_inplace_allowed(*this, "mul_");
  const double value = value_in.to_double();
  const autograd::InplaceRecord rec(*this, "mul_", "MulScalar_Backward");
  MINIDL_ON_BACKEND(device(), unary(kernels::UnaryOp::MulScalar, value, *this, *this));
  bump_version(*this);
  rec.finish(*this, [value](const Tensor& g) { return std::vector<Tensor>{g * value}; });
  return *this;
}

Tensor Tensor::exp() const { return minidl::exp(*this); }
Tensor Tensor::log() const { return minidl::log(*this); }
Tensor Tensor::sqrt() const { return minidl::sqrt(*this); }
Tensor Tensor::pow(double e) const { return minidl::pow(*this, e); }
Tensor Tensor::relu() const { return minidl::relu(*this); }
Tensor& Tensor::relu_() { return minidl::relu_(*this); }
Tensor Tensor::sigmoid() const { return minidl::sigmoid(*this); }
Tensor Tensor::tanh() const { return minidl::tanh(*this); }

}  // namespace minidl
