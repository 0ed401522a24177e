// Elementwise ops and their backward rules. Binary ops broadcast like NumPy and reduce each gradient back
// to its input's exact shape with sum_to.
#include <cmath>

#include "autograd/inplace.h"
#include "ops/op_utils.h"

namespace minidl {

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

Tensor binary_forward(BinaryOp op, double alpha, const Tensor& a, const Tensor& b, const char* name) {
  ops::check_same(a, b, name);
  ops::check_floating(a, name);
  Tensor out = ops::empty_as(broadcast_shapes(a.sizes(), b.sizes(), name), a);
  MINIDL_ON_BACKEND(a.device(), binary(op, alpha, a, b, out));
  return out;
}

Tensor unary_forward(UnaryOp op, double alpha, const Tensor& a, const char* name) {
  ops::check_defined(a, name, "self");
  ops::check_floating(a, name);
  Tensor out = ops::empty_as(a.sizes(), a);
  MINIDL_ON_BACKEND(a.device(), unary(op, alpha, a, out));
  return out;
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

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = binary_forward(BinaryOp::Add, alpha, a, b, "add");
  return record_binary(out, "AddBackward", a, b, [alpha](const Tensor& g, bool, bool need_b) {
    return std::make_pair(g, need_b && alpha != 1.0 ? mul(g, alpha) : g);
  });
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = binary_forward(BinaryOp::Sub, alpha, a, b, "sub");
  return record_binary(out, "SubBackward", a, b, [alpha](const Tensor& g, bool, bool need_b) {
    return std::make_pair(g, need_b ? mul(g, -alpha) : Tensor());
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Mul, 1.0, a, b, "mul");
  SavedTensor sa(a, "mul"), sb(b, "mul");
  return record_binary(out, "MulBackward", a, b, [sa, sb](const Tensor& g, bool need_a, bool need_b) {
    return std::make_pair(need_a ? mul(g, sb.get()) : Tensor(), need_b ? mul(g, sa.get()) : Tensor());
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Div, 1.0, a, b, "div");
  SavedTensor sa(a, "div"), sb(b, "div");
  return record_binary(out, "DivBackward", a, b, [sa, sb](const Tensor& g, bool need_a, bool need_b) {
    const Tensor bv = sb.get();
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2
    return std::make_pair(need_a ? div(g, bv) : Tensor(), need_b ? neg(div(mul(g, sa.get()), mul(bv, bv))) : Tensor());
  });
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Pow, 1.0, a, b, "pow");
  SavedTensor sa(a, "pow"), sb(b, "pow"), so(out, "pow");
  return record_binary(out, "PowBackward", a, b, [sa, sb, so](const Tensor& g, bool need_a, bool need_b) {
    const Tensor av = sa.get(), bv = sb.get();
    // d(a^b)/da = b * a^(b-1); d(a^b)/db = a^b * log(a)
    return std::make_pair(need_a ? mul(g, mul(bv, pow(av, sub(bv, ones_like(bv))))) : Tensor(),
                          need_b ? mul(g, mul(so.get(), log(av))) : Tensor());
  });
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Maximum, 1.0, a, b, "maximum");
  SavedTensor sa(a, "maximum"), so(out, "maximum");
  return record_binary(out, "MaximumBackward", a, b, [sa, so](const Tensor& g, bool need_a, bool need_b) {
    const Tensor a_wins = eq(so.get(), sa.get());  // 1 where a is the maximum (ties go to a)
    return std::make_pair(need_a ? mul(g, a_wins) : Tensor(), need_b ? mul(g, add(neg(a_wins), 1.0)) : Tensor());
  });
}

Tensor eq(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::Eq, 1.0, a, b, "eq"); }

Tensor add(const Tensor& a, double s) {
  Tensor out = unary_forward(UnaryOp::AddScalar, s, a, "add");
  return autograd::record(out, "AddScalarBackward", {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor mul(const Tensor& a, double s) {
  Tensor out = unary_forward(UnaryOp::MulScalar, s, a, "mul");
  return autograd::record(out, "MulScalarBackward", {a}, [s](const Tensor& g) { return std::vector<Tensor>{mul(g, s)}; });
}

Tensor pow(const Tensor& a, double p) {
  Tensor out = unary_forward(UnaryOp::PowScalar, p, a, "pow");
  SavedTensor sa(a, "pow");
  return autograd::record(out, "PowScalarBackward", {a}, [sa, p](const Tensor& g) {
    return std::vector<Tensor>{mul(g, mul(pow(sa.get(), p - 1.0), p))};
  });
}

Tensor neg(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Neg, 0.0, a, "neg");
  return autograd::record(out, "NegBackward", {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor exp(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Exp, 0.0, a, "exp");
  SavedTensor so(out, "exp");
  return autograd::record(out, "ExpBackward", {a}, [so](const Tensor& g) { return std::vector<Tensor>{mul(g, so.get())}; });
}

Tensor log(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Log, 0.0, a, "log");
  SavedTensor sa(a, "log");
  return autograd::record(out, "LogBackward", {a}, [sa](const Tensor& g) { return std::vector<Tensor>{div(g, sa.get())}; });
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Sqrt, 0.0, a, "sqrt");
  SavedTensor so(out, "sqrt");
  return autograd::record(out, "SqrtBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{div(mul(g, 0.5), so.get())};
  });
}

Tensor abs(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Abs, 0.0, a, "abs");
  SavedTensor sa(a, "abs");
  return autograd::record(out, "AbsBackward", {a}, [sa](const Tensor& g) {
    return std::vector<Tensor>{mul(g, unary_forward(UnaryOp::Sign, 0.0, sa.get(), "sign"))};
  });
}

Tensor relu(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Relu, 0.0, a, "relu");
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
  rec.finish(a, [so](const Tensor& g) { return std::vector<Tensor>{ops::binary_grad(BinaryOp::ReluGrad, 0.0, g, so.get())}; });
  return a;
}

Tensor leaky_relu(const Tensor& a, double slope) {
  Tensor out = unary_forward(UnaryOp::LeakyRelu, slope, a, "leaky_relu");
  SavedTensor sa(a, "leaky_relu");
  return autograd::record(out, "LeakyReluBackward", {a}, [sa, slope](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::LeakyReluGrad, slope, g, sa.get())};
  });
}

Tensor gelu(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Gelu, 0.0, a, "gelu");
  SavedTensor sa(a, "gelu");
  return autograd::record(out, "GeluBackward", {a}, [sa](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::GeluGrad, 0.0, g, sa.get())};
  });
}

Tensor sigmoid(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Sigmoid, 0.0, a, "sigmoid");
  SavedTensor so(out, "sigmoid");
  return autograd::record(out, "SigmoidBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::SigmoidGrad, 0.0, g, so.get())};
  });
}

Tensor tanh(const Tensor& a) {
  Tensor out = unary_forward(UnaryOp::Tanh, 0.0, a, "tanh");
  SavedTensor so(out, "tanh");
  return autograd::record(out, "TanhBackward", {a}, [so](const Tensor& g) {
    return std::vector<Tensor>{ops::binary_grad(BinaryOp::TanhGrad, 0.0, g, so.get())};
  });
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
