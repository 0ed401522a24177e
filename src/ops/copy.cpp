// Conversions (to a device, to a dtype), copies (clone, contiguous, copy_) and fill_: the ops that move
// elements between tensors. One backend kernel, copy, serves them all: any strides on either side and any two
// dtypes (kernels/convert.h).
#include "autograd/inplace.h"
#include "autograd/node.h"
#include "ops/op_utils.h"

namespace minidl {

using autograd::bump_version;
using autograd::check_inplace_allowed;

namespace {
/// Whether a tensor of shape `from` broadcasts to exactly `to` (NumPy's rule, shapes aligned at the right).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}
}  // namespace

Tensor Tensor::to(Device target) const {
  ops::check_defined(*this, "to", "self");
  if (device() == target) return *this;
  // Between devices bytes move as they lie, so the source is made contiguous first.
  const Tensor src = contiguous();
  Tensor out = empty(src.sizes(), TensorOptions(src.dtype()).device(target));
#if MINIDL_CUDA_ENABLED
  gpu::copy_bytes(out.data_ptr(), target, src.data_ptr(), src.device(), src.nbytes());
#else
  detail::throw_cuda_not_built();
#endif
  const Device from = src.device();
  return autograd::record(out, "ToDeviceBackward", {src}, [from](const Tensor& g) {
    return std::vector<Tensor>{g.to(from)};
  });
}

Tensor Tensor::to(DType target) const {
  ops::check_defined(*this, "to", "self");
  if (dtype() == target) return *this;
  Tensor out = empty(sizes(), TensorOptions(target).device(device()));
  MINIDL_ON_BACKEND(device(), copy(*this, out));
  if (!minidl::is_floating_point(target) || !minidl::is_floating_point(dtype()))
    return out;  // integral results carry no gradient
  const DType from = dtype();
  return autograd::record(out, "ToDTypeBackward", {*this}, [from](const Tensor& g) {
    return std::vector<Tensor>{g.to(from)};
  });
}

Tensor Tensor::clone() const {
  ops::check_defined(*this, "clone", "self");
  Tensor out = empty(sizes(), TensorOptions(dtype()).device(device()));
  MINIDL_ON_BACKEND(device(), copy(*this, out));
  return autograd::record_strided(out, "CloneBackward", {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::contiguous() const {
  ops::check_defined(*this, "contiguous", "self");
  return is_contiguous() ? *this : clone();
}

Tensor& Tensor::zero_() { return fill_(0); }

// Each in-place op records itself for autograd (autograd/inplace.h): its backward rule maps the gradient of
// the new value to the previous value and to the other operands.
Tensor& Tensor::fill_(const Scalar& value) {
  ops::check_defined(*this, "fill_", "self");
  check_inplace_allowed(*this, "fill_");
  const autograd::InplaceRecord rec(*this, "fill_", "Fill_Backward");
  MINIDL_ON_BACKEND(device(), fill(*this, value.to_double()));
  bump_version(*this);
  rec.finish(*this, [](const Tensor& g) { return std::vector<Tensor>{zeros_like(g)}; });  // the old value is gone
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  ops::check_defined(*this, "copy_", "self");
  ops::check_defined(src, "copy_", "src");
  check_inplace_allowed(*this, "copy_");
  // src broadcasts to self's shape as in PyTorch; a source of another shape with as many elements is copied in
  // row-major order (minidl's older rule, kept for code that relies on it).
  const bool broadcast = broadcasts_to(src.sizes(), sizes());
  MINIDL_CHECK(broadcast || src.numel() == numel(), ValueError, "copy_: source of shape ", shape_str(src.sizes()),
               " (", src.numel(), " elements) does not broadcast to the destination's shape ", shape_str(sizes()),
               " (", numel(), " elements)");
  const autograd::InplaceRecord rec(*this, "copy_", "Copy_Backward", {src});
  Tensor s = src.detach().to(device());
  s = broadcast ? s.expand(sizes()) : s.reshape(sizes());
  if (s.unsafe_impl()->data() != data_ptr() || s.strides() != strides()) MINIDL_ON_BACKEND(device(), copy(s, *this));
  bump_version(*this);
  const bool src_grad = src.requires_grad();
  const Shape src_shape = src.sizes();
  const DType src_dtype = src.dtype();
  const Device src_device = src.device();
  rec.finish(*this, [=](const Tensor& g) {
    const Tensor gs = broadcast ? sum_to(g, src_shape) : g.reshape(src_shape);
    return std::vector<Tensor>{zeros_like(g), src_grad ? gs.to(src_dtype).to(src_device) : Tensor()};
  });
  return *this;
}

}  // namespace minidl
