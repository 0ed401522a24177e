// Tensor's metadata accessors, conversions, host access, printing and in-place ops.
#include <algorithm>
#include <cstring>
#include <iomanip>
#include <limits>

#include "autograd/inplace.h"
#include "core/tensor_impl.h"
#include "kernels/backend.h"
#include "minidl/ops.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/context.h"
#endif

namespace minidl {

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::int64_t shape_numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) {
    MINIDL_CHECK(d >= 0, ValueError, "shape ", shape_str(s), ": sizes must be non-negative, found ", d);
    MINIDL_CHECK(d == 0 || n <= std::numeric_limits<std::int64_t>::max() / d, ValueError, "shape ", shape_str(s),
                 ": number of elements overflows 64 bits");
    n *= d;
  }
  return n;
}

namespace {
TensorImpl& impl_of(const Tensor& t, const char* what) {
  MINIDL_CHECK(t.defined(), ValueError, what, ": called on an undefined tensor");
  return *t.unsafe_impl();
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op) {
  const std::int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  MINIDL_CHECK(dim >= lo && dim <= hi, IndexError, op, ": dimension out of range (expected to be in [", lo, ", ", hi,
               "], but got ", dim, ")");
  return dim < 0 ? dim + std::max<std::int64_t>(ndim, 1) : dim;
}

}  // namespace

using autograd::bump_version;
using autograd::check_inplace_allowed;

const Shape& Tensor::sizes() const { return impl_of(*this, "sizes").shape; }
std::int64_t Tensor::dim() const { return static_cast<std::int64_t>(sizes().size()); }
std::int64_t Tensor::size(std::int64_t d) const {
  MINIDL_CHECK(dim() > 0, IndexError, "size: dimension ", d, " requested of a 0-d tensor, which has no dimensions");
  return sizes()[wrap_dim(d, dim(), "size")];
}
std::int64_t Tensor::numel() const { return impl_of(*this, "numel").numel; }
DType Tensor::dtype() const { return impl_of(*this, "dtype").dtype; }
Device Tensor::device() const { return impl_of(*this, "device").storage->device(); }
std::size_t Tensor::nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype()); }
void* Tensor::data_ptr() const { return impl_of(*this, "data_ptr").data(); }
std::uint64_t Tensor::version() const { return impl_of(*this, "version").storage->version.load(); }

template <class T>
T* Tensor::data_ptr() const {
  MINIDL_CHECK(dtype() == dtype_of<T>::value, TypeError, "data_ptr<", dtype_name(dtype_of<T>::value),
               ">: tensor has dtype ", dtype_name(dtype()));
  return static_cast<T*>(data_ptr());
}
template float* Tensor::data_ptr<float>() const;
template double* Tensor::data_ptr<double>() const;
template std::int64_t* Tensor::data_ptr<std::int64_t>() const;

Tensor Tensor::to(Device target) const {
  const Tensor& src = *this;
  if (src.device() == target) return src;
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
  if (dtype() == target) return *this;
  Tensor out = empty(sizes(), TensorOptions(target).device(device()));
  MINIDL_ON_BACKEND(device(), copy(*this, out));
  if (!is_floating(target) || !is_floating(dtype())) return out;
  const DType from = dtype();
  return autograd::record(out, "ToDTypeBackward", {*this}, [from](const Tensor& g) {
    return std::vector<Tensor>{g.to(from)};
  });
}

Tensor Tensor::clone() const {
  Tensor out = empty(sizes(), TensorOptions(dtype()).device(device()));
  MINIDL_ON_BACKEND(device(), copy(*this, out));
  return autograd::record(out, "CloneBackward", {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  MINIDL_CHECK(dtype() == dtype_of<T>::value, TypeError, "to_vector<", dtype_name(dtype_of<T>::value),
               ">: tensor has dtype ", dtype_name(dtype()), " (convert with .to(dtype) first)");
  std::vector<T> out(static_cast<std::size_t>(numel()));
  if (out.empty()) return out;
  if (device().is_cpu()) {
    std::memcpy(out.data(), data_ptr(), nbytes());
  } else {
#if MINIDL_CUDA_ENABLED
    gpu::copy_bytes(out.data(), Device(kCPU), data_ptr(), device(), nbytes());
#endif
  }
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;

template <class T>
T Tensor::item() const {
  MINIDL_CHECK(numel() == 1, ValueError, "item: a tensor with ", numel(), " elements (shape ", shape_str(sizes()),
               ") cannot be converted to a scalar");
  return to(dtype_of<T>::value).template to_vector<T>()[0];
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int64_t Tensor::item<std::int64_t>() const;

Tensor& Tensor::zero_() { return fill_(0.0); }

// Each in-place op records itself for autograd (autograd/inplace.h): its backward rule maps the gradient of
// the new value to the previous value and to the other operands.
Tensor& Tensor::fill_(double value) {
  check_inplace_allowed(*this, "fill_");
  const autograd::InplaceRecord rec(*this, "fill_", "Fill_Backward");
  MINIDL_ON_BACKEND(device(), fill(*this, value));
  bump_version(*this);
  rec.finish(*this, [](const Tensor& g) { return std::vector<Tensor>{zeros_like(g)}; });  // the old value is gone
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace_allowed(*this, "copy_");
  MINIDL_CHECK(src.numel() == numel(), ValueError, "copy_: source has ", src.numel(), " elements (shape ",
               shape_str(src.sizes()), "), destination ", numel(), " (shape ", shape_str(sizes()), ")");
  const autograd::InplaceRecord rec(*this, "copy_", "Copy_Backward", {src});
  Tensor s = src.detach().to(device());
  if (s.unsafe_impl()->data() != data_ptr()) MINIDL_ON_BACKEND(device(), copy(s, *this));
  bump_version(*this);
  const bool src_grad = src.requires_grad();
  const Shape src_shape = src.sizes();
  const DType src_dtype = src.dtype();
  const Device src_device = src.device();
  rec.finish(*this, [=](const Tensor& g) {
    return std::vector<Tensor>{zeros_like(g), src_grad ? g.reshape(src_shape).to(src_dtype).to(src_device) : Tensor()};
  });
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace_allowed(*this, "add_");
  MINIDL_CHECK(other.device() == device() && other.dtype() == dtype(), TypeError, "add_: self is ", dtype(), " on ",
               device(), ", other is ", other.dtype(), " on ", other.device());
  MINIDL_CHECK(broadcast_shapes(sizes(), other.sizes(), "add_") == sizes(), ValueError, "add_: other of shape ",
               shape_str(other.sizes()), " does not broadcast to self's shape ", shape_str(sizes()));
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

Tensor& Tensor::add_(double value) {
  check_inplace_allowed(*this, "add_");
  const autograd::InplaceRecord rec(*this, "add_", "AddScalar_Backward");
  MINIDL_ON_BACKEND(device(), unary(kernels::UnaryOp::AddScalar, value, *this, *this));
  bump_version(*this);
  rec.finish(*this, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return *this;
}

Tensor& Tensor::mul_(double value) {
  check_inplace_allowed(*this, "mul_");
  const autograd::InplaceRecord rec(*this, "mul_", "MulScalar_Backward");
  MINIDL_ON_BACKEND(device(), unary(kernels::UnaryOp::MulScalar, value, *this, *this));
  bump_version(*this);
  rec.finish(*this, [value](const Tensor& g) { return std::vector<Tensor>{g * value}; });
  return *this;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const Tensor c = t.detach().cpu();
  const Shape& s = c.sizes();
  std::vector<double> v;
  if (c.dtype() == kInt64) {
    for (auto x : c.to_vector<std::int64_t>()) v.push_back(static_cast<double>(x));
  } else {
    v = c.to(kFloat64).to_vector<double>();
  }
  const std::int64_t edge = 3;  // elements shown at each end of a long dimension
  std::ostringstream body;
  body << std::setprecision(c.dtype() == kFloat64 ? 8 : 4);
  std::function<void(std::size_t, std::int64_t)> rec = [&](std::size_t d, std::int64_t base) {
    if (d == s.size()) {
      body << v[static_cast<std::size_t>(base)];
      return;
    }
    std::int64_t inner = 1;
    for (std::size_t k = d + 1; k < s.size(); ++k) inner *= s[k];
    body << "[";
    for (std::int64_t i = 0; i < s[d]; ++i) {
      if (s[d] > 2 * edge && i == edge) {
        body << "..., ";
        i = s[d] - edge;
      }
      rec(d + 1, base + i * inner);
      if (i + 1 < s[d]) body << (d + 1 == s.size() ? ", " : ",\n" + std::string(d + 8, ' '));
    }
    body << "]";
  };
  rec(0, 0);
  os << "tensor(" << body.str() << ", shape=" << shape_str(s) << ", dtype=" << t.dtype();
  if (t.is_cuda()) os << ", device=" << t.device();
  if (t.requires_grad()) os << ", requires_grad=true";
  return os << ")";
}

}  // namespace minidl
