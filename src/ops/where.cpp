// where and masked_fill: one kernel (kernels/where.h), cond ? a : b with broadcasting. masked_fill is where(mask,
// value, self) with the value as a 0-d tensor in self's dtype, which the kernel reads as one element. Gradients go
// through the mask: where(cond, g, 0) to the chosen side, where(cond, 0, g) to the other, summed back to each
// operand's shape.
#include <cmath>
#include <limits>

#include "autograd/inplace.h"
#include "minidl/joining.h"
#include "autograd/node.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

using autograd::SavedTensor;

Tensor choose(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor out = empty(shape, TensorOptions(a.dtype()).device(a.device()));
  MINIDL_ON_BACKEND(out.device(), where(cond, a, b, out));
  return out;
}

Tensor zero_of(const Tensor& g) { return zeros({}, TensorOptions(g.dtype()).device(g.device())); }

/// g where cond holds (keep) or where it does not (!keep), zero elsewhere.
Tensor masked_grad(const Tensor& cond, const Tensor& g, bool keep) {
  const Tensor zero = zero_of(g);
  return keep ? choose(cond, g, zero, g.sizes()) : choose(cond, zero, g, g.sizes());
}

/// The device the operands share: that of the first one that is not a 0-d CPU tensor (PyTorch lets such a tensor
/// join operands on a CUDA device, as a scalar).
Device common_device(const std::vector<const Tensor*>& operands) {
  for (const Tensor* t : operands) {
    if (!(t->dim() == 0 && t->is_cpu())) return t->device();
  }
  return Device(kCPU);
}

Tensor on_device(const Tensor& t, Device device, const char* op, const char* arg) {
  if (t.device() == device) return t;
  MINIDL_CHECK(t.dim() == 0 && t.is_cpu(), TypeError, op, ": expected '", arg, "' on the operands' device ", device,
               ", found ", t.device(), " (shape ", shape_str(t.sizes()), ")");
  return t.to(device);
}

Tensor check_condition(const Tensor& cond, Device device) {
  MINIDL_CHECK(cond.dtype() == kBool || cond.dtype() == kUInt8, TypeError,
               "where: expected 'condition' to be a bool tensor, found ", cond.dtype());
  const Tensor c = on_device(cond, device, "where", "condition");
  return c.dtype() == kBool ? c : c.to(kBool);
}

Tensor check_mask(const Tensor& self, const Tensor& mask, const char* op) {
  ops::check_defined(self, op, "self");
  ops::check_defined(mask, op, "mask");
  MINIDL_CHECK(mask.dtype() == kBool, TypeError, op, ": expected a bool 'mask', found ", mask.dtype());
  MINIDL_CHECK(mask.device() == self.device(), TypeError, op, ": expected 'mask' on the device of 'self' (",
               self.device(), "), found ", mask.device());
  return mask;
}

/// The 0-d value of masked_fill's Tensor form, in self's dtype and on its device (differentiable).
Tensor fill_value(const Tensor& self, const Tensor& value, const char* op) {
  ops::check_defined(value, op, "value");
  MINIDL_CHECK(value.dim() == 0, ValueError, op, ": expected a 0-dimensional value tensor, found shape ",
               shape_str(value.sizes()));
  const Tensor v = value.to(self.device());
  return v.dtype() == self.dtype() ? v : v.to(self.dtype());
}

/// PyTorch's checked conversion of masked_fill's value: ValueError when it lies outside the range of self's dtype
/// (infinities and NaN pass into floating dtypes, bool takes anything, uint8 takes down to -255 and wraps).
void check_fits(const Scalar& value, DType dtype, const char* op) {
  double lo = 0, hi = 0;
  switch (dtype) {
    case kBool: return;
    case kFloat32: lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max(); break;
    case kFloat64: return;
    case kBFloat16: lo = -3.3895313892515355e38, hi = 3.3895313892515355e38; break;
    case kFloat16: lo = -65504.0, hi = 65504.0; break;
    case kInt64: lo = -9.2233720368547758e18, hi = 9.2233720368547758e18; break;
    case kInt32: lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max(); break;
    case kUInt8: lo = -255, hi = 255; break;  // negative values wrap, as in c10::overflows
  }
  const double v = value.to_double();
  const bool fits = !std::isfinite(v) ? is_floating_point(dtype) && !value.is_integral(true)
                                      : (dtype == kInt64 && value.is_integral(true)) || (v >= lo && v <= hi);
  MINIDL_CHECK(fits, ValueError, op, ": value ", v, " cannot be converted to ", dtype, " without overflow");
}

/// The dtype of where's result for two Scalars: the higher of their kinds, as bool, int64 or float32.
DType scalar_pair_type(const Scalar& a, const Scalar& b) {
  if (a.is_floating_point() || b.is_floating_point()) return kFloat32;
  return a.is_boolean() && b.is_boolean() ? kBool : kInt64;
}

}  // namespace

Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  ops::check_defined(condition, "where", "condition");
  ops::check_defined(self, "where", "self");
  ops::check_defined(other, "where", "other");
  const Device device = common_device({&condition, &self, &other});
  const Tensor cond = check_condition(condition, device);
  const DType common = result_type(self, other);
  Tensor a = on_device(self, device, "where", "self"), b = on_device(other, device, "where", "other");
  if (a.dtype() != common) a = a.to(common);
  if (b.dtype() != common) b = b.to(common);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = choose(cond, a, b, shape);
  const SavedTensor saved(cond, "where");
  const Shape sa = a.sizes(), sb = b.sizes();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record_strided(out, "WhereBackward", {a, b}, [=](const Tensor& g) {
    const Tensor c = saved.get();
    return std::vector<Tensor>{need_a ? sum_to(masked_grad(c, g, true), sa) : Tensor(),
                               need_b ? sum_to(masked_grad(c, g, false), sb) : Tensor()};
  });
}

Tensor where(const Tensor& condition, const Scalar& self, const Tensor& other) {
  ops::check_defined(condition, "where", "condition");
  ops::check_defined(other, "where", "other");
  const Tensor a = full({}, self, TensorOptions(result_type(other, self)).device(common_device({&condition, &other})));
  return where(condition, a, other);
}

Tensor where(const Tensor& condition, const Tensor& self, const Scalar& other) {
  ops::check_defined(condition, "where", "condition");
  ops::check_defined(self, "where", "self");
  const Tensor b = full({}, other, TensorOptions(result_type(self, other)).device(common_device({&condition, &self})));
  return where(condition, self, b);
}

Tensor where(const Tensor& condition, const Scalar& self, const Scalar& other) {
  ops::check_defined(condition, "where", "condition");
  const TensorOptions options = TensorOptions(scalar_pair_type(self, other)).device(condition.device());
  return where(condition, full({}, self, options), full({}, other, options));
}

Tensor masked_fill(const Tensor& self, const Tensor& mask_in, const Scalar& value) {
  const Tensor mask = check_mask(self, mask_in, "masked_fill");
  check_fits(value, self.dtype(), "masked_fill");
  const Tensor v = full({}, value, TensorOptions(self.dtype()).device(self.device()));
  Tensor out = choose(mask, v, self, broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill"));
  const SavedTensor saved(mask, "masked_fill");
  const Shape shape = self.sizes();
  return autograd::record(out, "MaskedFillBackward", {self}, [saved, shape](const Tensor& g) {
    return std::vector<Tensor>{sum_to(masked_grad(saved.get(), g, false), shape)};
  });
}

Tensor masked_fill(const Tensor& self, const Tensor& mask_in, const Tensor& value) {
  const Tensor mask = check_mask(self, mask_in, "masked_fill");
  const Tensor v = fill_value(self, value, "masked_fill");
  Tensor out = choose(mask, v, self, broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill"));
  const SavedTensor saved(mask, "masked_fill");
  const Shape shape = self.sizes();
  const bool need_self = self.requires_grad(), need_value = v.requires_grad();
  return autograd::record(out, "MaskedFillBackward", {self, v}, [=](const Tensor& g) {
    const Tensor m = saved.get();
    return std::vector<Tensor>{need_self ? sum_to(masked_grad(m, g, false), shape) : Tensor(),
                               need_value ? masked_grad(m, g, true).sum() : Tensor()};
  });
}

Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return minidl::where(condition, *this, other);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return minidl::masked_fill(*this, mask, value);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  return minidl::masked_fill(*this, mask, value);
}

namespace {
/// masked_fill_ with the value as a 0-d tensor of self's dtype on its device; `value` (if defined) is the user's
/// value tensor, which receives a gradient.
Tensor& masked_fill_inplace(Tensor& self, const Tensor& mask_in, const Tensor& v, const Tensor& value) {
  const Tensor mask = check_mask(self, mask_in, "masked_fill_");
  MINIDL_CHECK(broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill_") == self.sizes(), ValueError,
               "masked_fill_: the mask of shape ", shape_str(mask.sizes()), " does not broadcast to self's shape ",
               shape_str(self.sizes()));
  autograd::check_inplace_allowed(self, "masked_fill_");
  const autograd::InplaceRecord rec(self, "masked_fill_", "MaskedFillBackward",
                                    value.defined() ? std::vector<Tensor>{value} : std::vector<Tensor>{});
  MINIDL_ON_BACKEND(self.device(), where(mask, v, self, self));
  autograd::bump_version(self);
  const SavedTensor saved(mask, "masked_fill_");
  const bool value_grad = value.defined() && value.requires_grad();
  const DType value_dtype = value.defined() ? value.dtype() : self.dtype();
  const Device value_device = value.defined() ? value.device() : self.device();
  rec.finish(self, [=](const Tensor& g) {
    const Tensor m = saved.get();
    std::vector<Tensor> grads{masked_grad(m, g, false)};
    if (value_grad) grads.push_back(masked_grad(m, g, true).sum().to(value_dtype).to(value_device));
    return grads;
  });
  return self;
}
}  // namespace

Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) {
  ops::check_defined(*this, "masked_fill_", "self");
  check_fits(value, dtype(), "masked_fill_");
  return masked_fill_inplace(*this, mask, full({}, value, TensorOptions(dtype()).device(device())), Tensor());
}

Tensor& Tensor::masked_fill_(const Tensor& mask, const Tensor& value) {
  ops::check_defined(*this, "masked_fill_", "self");
  Tensor v;
  {
    NoGradGuard no_grad;
    v = fill_value(*this, value, "masked_fill_");
  }
  return masked_fill_inplace(*this, mask, v, value);
}

}  // namespace minidl
