// Tensor's metadata accessors and host access; printing is in print.cpp. (Conversions and in-place ops are
// differentiable ops: they live in src/ops.)
#include <algorithm>
#include <cstring>
#include <limits>

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

const Shape& Tensor::sizes() const { return impl_of(*this, "sizes").shape; }
std::int64_t Tensor::dim() const { return static_cast<std::int64_t>(sizes().size()); }
std::int64_t Tensor::size(std::int64_t d) const {
  MINIDL_CHECK(dim() > 0, IndexError, "size: dimension ", d, " requested of a 0-d tensor, which has no dimensions");
  return sizes()[wrap_dim(d, dim(), "size")];
}
std::int64_t Tensor::numel() const { return impl_of(*this, "numel").numel; }
const Shape& Tensor::strides() const { return impl_of(*this, "strides").strides; }
std::int64_t Tensor::stride(std::int64_t d) const {
  MINIDL_CHECK(dim() > 0, IndexError, "stride: dimension ", d, " requested of a 0-d tensor, which has no dimensions");
  return strides()[wrap_dim(d, dim(), "stride")];
}
std::int64_t Tensor::storage_offset() const {
  const TensorImpl& i = impl_of(*this, "storage_offset");
  return static_cast<std::int64_t>(i.byte_offset / minidl::element_size(i.dtype));
}
bool Tensor::is_contiguous() const { return impl_of(*this, "is_contiguous").contiguous; }
bool Tensor::is_view() const { return impl_of(*this, "is_view").view_base != nullptr; }
DType Tensor::dtype() const { return impl_of(*this, "dtype").dtype; }
Device Tensor::device() const { return impl_of(*this, "device").storage->device(); }
std::size_t Tensor::nbytes() const { return static_cast<std::size_t>(numel()) * minidl::element_size(dtype()); }
void* Tensor::data_ptr() const { return impl_of(*this, "data_ptr").data(); }
std::uint64_t Tensor::version() const { return impl_of(*this, "version").storage->version.load(); }

template <class T>
T* Tensor::data_ptr() const {
  MINIDL_CHECK(dtype() == dtype_of<T>::value, TypeError, "data_ptr<", dtype_name(dtype_of<T>::value),
               ">: tensor has dtype ", dtype_name(dtype()));
  return static_cast<T*>(data_ptr());
}
#define MINIDL_INSTANTIATE_DATA_PTR(T, name, str, cat, rank, file) template T* Tensor::data_ptr<T>() const;
MINIDL_FORALL_DTYPES(MINIDL_INSTANTIATE_DATA_PTR)
#undef MINIDL_INSTANTIATE_DATA_PTR

template <class T>
std::vector<T> Tensor::to_vector() const {
  MINIDL_CHECK(dtype() == dtype_of<T>::value, TypeError, "to_vector<", dtype_name(dtype_of<T>::value),
               ">: tensor has dtype ", dtype_name(dtype()), " (convert with .to(dtype) first)");
  // std::vector<bool> packs bits: elements go through a byte buffer.
  using Elem = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;
  std::vector<Elem> raw(static_cast<std::size_t>(numel()));
  if (raw.empty()) return {};
  const Tensor dense = detach().contiguous();
  if (device().is_cpu()) {
    std::memcpy(raw.data(), dense.data_ptr(), nbytes());
  } else {
#if MINIDL_CUDA_ENABLED
    gpu::copy_bytes(raw.data(), Device(kCPU), dense.data_ptr(), device(), nbytes());
#endif
  }
  if constexpr (std::is_same_v<T, bool>) {
    return std::vector<bool>(raw.begin(), raw.end());
  } else {
    return raw;
  }
}
#define MINIDL_INSTANTIATE_TO_VECTOR(T, name, str, cat, rank, file) template std::vector<T> Tensor::to_vector<T>() const;
MINIDL_FORALL_DTYPES(MINIDL_INSTANTIATE_TO_VECTOR)
#undef MINIDL_INSTANTIATE_TO_VECTOR

template <class T>
T Tensor::item() const {
  MINIDL_CHECK(numel() == 1, ValueError, "item: a tensor with ", numel(), " elements (shape ", shape_str(sizes()),
               ") cannot be converted to a scalar");
  return to(dtype_of<T>::value).template to_vector<T>()[0];
}
#define MINIDL_INSTANTIATE_ITEM(T, name, str, cat, rank, file) template T Tensor::item<T>() const;
MINIDL_FORALL_DTYPES(MINIDL_INSTANTIATE_ITEM)
#undef MINIDL_INSTANTIATE_ITEM

Scalar Tensor::item() const {
  switch (category(dtype())) {
    case DTypeCategory::Floating: return item<double>();
    case DTypeCategory::Integral: return item<std::int64_t>();
    case DTypeCategory::Boolean: break;
  }
  return item<bool>();
}

namespace detail {
void check_accessor(const Tensor& t, DType dtype, std::size_t dims) {
  MINIDL_CHECK(t.defined(), ValueError, "accessor: called on an undefined tensor");
  MINIDL_CHECK(t.dtype() == dtype, TypeError, "accessor<", dtype_name(dtype), ", ", dims, ">: the tensor has dtype ",
               t.dtype(), " (the element type must be the tensor's; convert with .to(dtype) first)");
  MINIDL_CHECK(t.dim() == static_cast<std::int64_t>(dims), ValueError, "accessor<", dtype_name(dtype), ", ", dims,
               ">: expected a tensor of ", dims, " dims, found ", t.dim(), " (shape ", shape_str(t.sizes()), ")");
  MINIDL_CHECK(t.is_cpu(), TypeError, "accessor<", dtype_name(dtype), ", ", dims, ">: the tensor is on ", t.device(),
               "; an accessor reads host memory (copy it with .cpu() first)");
}
}  // namespace detail

}  // namespace minidl
