// Type promotion of tensor ops, as PyTorch's result_type: tensors with dims decide first; 0-d tensors and
// scalars raise only the category (bool < integral < floating), never the width within it.
#include "ops/op_utils.h"

namespace minidl {
namespace {

/// The result so far and the next candidate (PyTorch's combine_categories): the higher-priority one wins unless
/// the lower-priority one is of a higher category.
DType combine(const DType* higher, const DType* lower) {
  if (!higher) return lower ? *lower : kFloat32;
  if (!lower || is_floating_point(*higher)) return *higher;
  if (*higher == kBool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return *higher;
}

struct ResultTypeState {
  bool has_dim = false, has_zero = false, has_wrapped = false;
  DType dim = kBool, zero = kBool, wrapped = kBool;
  void add(DType t, bool& has, DType& slot) {
    slot = has ? promote_types(slot, t) : t;
    has = true;
  }
  void add(const Tensor& t) {
    if (t.dim() == 0) {
      add(t.dtype(), has_zero, zero);
    } else {
      add(t.dtype(), has_dim, dim);
    }
  }
  void add(const Scalar& s) { add(s.type(), has_wrapped, wrapped); }
  DType result() const {
    const DType lower = combine(has_zero ? &zero : nullptr, has_wrapped ? &wrapped : nullptr);
    const bool any_lower = has_zero || has_wrapped;
    return combine(has_dim ? &dim : nullptr, any_lower ? &lower : nullptr);
  }
};

}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  ops::check_defined(a, "result_type", "tensor1");
  ops::check_defined(b, "result_type", "tensor2");
  ResultTypeState s;
  s.add(a);
  s.add(b);
  return s.result();
}

DType result_type(const Tensor& a, const Scalar& b) {
  ops::check_defined(a, "result_type", "tensor");
  ResultTypeState s;
  s.add(a);
  s.add(b);
  return s.result();
}

namespace ops {
DType result_type_of(const std::vector<Tensor>& tensors, const std::vector<Scalar>& scalars, const char* op) {
  ResultTypeState s;
  for (const Tensor& t : tensors) {
    check_defined(t, op, "tensor");
    s.add(t);
  }
  for (const Scalar& v : scalars) s.add(v);
  return s.result();
}
}  // namespace ops

bool can_cast(DType from, DType to) {
  if (is_floating_point(from) && is_integral(to, false)) return false;
  return !(from != kBool && to == kBool);
}

}  // namespace minidl
