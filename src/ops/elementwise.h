#pragma once
// What the elementwise entry points share (src/ops/elementwise.cpp: arithmetic, comparisons, activations;
// src/ops/math.cpp: the math functions): converting operands to the dtype an op computes in, allocating the
// output and running the kernel; recording a broadcast op's backward; and the in-place forms.
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "minidl/autograd.h"
#include "autograd/node.h"
#include "ops/op_utils.h"

namespace minidl {
namespace ops {

/// Float-valued ops (div, exp, sin, ...) give float32 for integral inputs, as PyTorch's default dtype.
inline DType floating_result(DType t) { return is_floating_point(t) ? t : kFloat32; }

/// PyTorch's rule for ops that have no bool form (negation, subtraction, ...): TypeError unless t is not bool;
/// `instead` names what to use.
void check_not_bool(DType t, const char* name, const char* what, const char* instead);

/// Runs unary op on a (converted to float32 first when the op is floating_only and a is integral: `a` is
/// replaced by the converted tensor, on which the caller records) into a new tensor of a's shape: bool for the
/// ops that return_bool, else a's dtype.
Tensor unary_forward(kernels::UnaryOp op, const kernels::OpScalars& s, Tensor& a, const char* name);

/// Converts a and b (in place: the callers record their backward on the converted operands, so gradients come
/// back in each input's own dtype) to the dtype the op computes in (result_type, then float32 for a
/// floating_only op), runs it, and returns the broadcast output.
Tensor binary_forward(kernels::BinaryOp op, const kernels::OpScalars& s, Tensor& a, Tensor& b, const char* name);

/// The operand of a scalar op: `a` in the dtype that a and s promote to.
Tensor scalar_operand(const Tensor& a, const Scalar& s, const char* name);
/// A 0-d tensor of s on a's device in the dtype a and s promote to: the other operand of a comparison.
Tensor scalar_tensor(const Tensor& a, const Scalar& s, const char* name);

/// Records a binary op whose backward computes (grad_a, grad_b) at the output's shape; each is summed back
/// to its input's shape, and skipped when that input needs no gradient.
template <class F>
Tensor record_binary(Tensor out, const char* name, const Tensor& a, const Tensor& b, F grads) {
  const Shape sa = a.sizes(), sb = b.sizes();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record_strided(out, name, {a, b}, [=](const Tensor& g) {
    std::pair<Tensor, Tensor> r = grads(g, need_a, need_b);
    return std::vector<Tensor>{need_a ? sum_to(r.first, sa) : Tensor(), need_b ? sum_to(r.second, sb) : Tensor()};
  });
}

/// The operand of an in-place op on self: `other` in self's dtype, after checking that the result the
/// out-of-place op would have (result_type) may be written into self and that other broadcasts to self.
Tensor inplace_operand(const Tensor& self, const Tensor& other, const char* op);
/// Throws TypeError unless the result of self op s may be written into self.
void check_inplace_scalar(const Tensor& self, const Scalar& s, const char* op);

/// An in-place op self = op(self, others...) whose result has dtype `result` (TypeError unless it can be written
/// into self). When autograd has nothing to record, `write` runs the kernel over self (one pass); otherwise
/// self.copy_(compute(self.clone())), so the op's backward sees self's previous value and a write through a view
/// records on its base, as PyTorch keeps the original of an in-place op whose derivative needs it.
Tensor& apply_inplace(Tensor& self, const char* name, DType result, std::initializer_list<Tensor> others,
                      const std::function<void()>& write, const std::function<Tensor(const Tensor&)>& compute);
/// apply_inplace of a unary kernel op whose out-of-place form is `compute`.
Tensor& unary_inplace(Tensor& self, kernels::UnaryOp op, const kernels::OpScalars& s, const char* name,
                      const std::function<Tensor(const Tensor&)>& compute);

}  // namespace ops
}  // namespace minidl
