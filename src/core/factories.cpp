// Tensor creation without randomness (the random factories are in src/ops/random.cpp): empty, full and the *_like
// and new_* forms, the ranges (arange, linspace, logspace), eye, from_blob, from_vector, and the in-place fills
// that compose views with fill_ and copy_ (fill_ from a tensor, fill_diagonal_). Dtype defaults follow LibTorch:
// options' dtype when given, else the value's kind for full and arange, float32 for the rest.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/factory_options.h"
#include "core/tensor_impl.h"
#include "kernels/backend.h"

namespace minidl {

using detail::finish;
using detail::like;
using detail::plain;

Tensor empty(const Shape& shape, TensorOptions o) {
  const std::int64_t n = shape_numel(shape);
  MINIDL_CHECK(static_cast<std::uint64_t>(n) <= std::numeric_limits<std::uint64_t>::max() / 8, ValueError,
               "empty: shape ", shape_str(shape), " is too large");
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(n) * element_size(o.dtype_), o.device_);
  return finish(Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape, o.dtype_)), o);
}

Tensor full(const Shape& shape, const Scalar& value, TensorOptions o) {
  o = detail::with_default_dtype(o, value.type());
  Tensor t = empty(shape, plain(o));
  MINIDL_ON_BACKEND(t.device(), fill(t, value.to_double()));
  return finish(t, o);
}

Tensor zeros(const Shape& shape, TensorOptions o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return full(shape, 1.0, o); }
Tensor empty_like(const Tensor& t, TensorOptions o) { return empty(t.sizes(), like(t, o)); }
Tensor zeros_like(const Tensor& t, TensorOptions o) { return zeros(t.sizes(), like(t, o)); }
Tensor ones_like(const Tensor& t, TensorOptions o) { return ones(t.sizes(), like(t, o)); }
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions o) { return full(t.sizes(), value, like(t, o)); }

Tensor Tensor::new_empty(const Shape& size, TensorOptions o) const { return empty(size, like(*this, o)); }
Tensor Tensor::new_zeros(const Shape& size, TensorOptions o) const { return zeros(size, like(*this, o)); }
Tensor Tensor::new_ones(const Shape& size, TensorOptions o) const { return ones(size, like(*this, o)); }
Tensor Tensor::new_full(const Shape& size, const Scalar& value, TensorOptions o) const {
  return full(size, value, like(*this, o));
}

// ---- ranges ------------------------------------------------------------------------------------------------------

Tensor arange(const Scalar& end, TensorOptions o) { return arange(0, end, 1, o); }
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions o) { return arange(start, end, 1, o); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions o) {
  const bool integers = !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  o = detail::with_default_dtype(o, integers ? kInt64 : kFloat32);
  MINIDL_CHECK(o.dtype_ != kBool, TypeError, "arange: expected a dtype other than bool (PyTorch has no arange for ",
               "bool), found bool");
  const double s = start.to_double(), e = end.to_double(), d = step.to_double();
  MINIDL_CHECK(std::isfinite(s) && std::isfinite(e) && std::isfinite(d), ValueError,
               "arange: start, end and step must be finite, found ", s, ", ", e, ", ", d);
  // PyTorch computes in the dtype's accumulation type: an integral dtype truncates start, end and step first.
  const bool integral = is_integral(o.dtype_, true);
  const auto acc = [&](const Scalar& v) { return integral ? static_cast<double>(v.to_long()) : v.to_double(); };
  const double xs = acc(start), xe = acc(end), xd = acc(step);
  MINIDL_CHECK(xd != 0.0, ValueError, "arange: step must be nonzero",
               integral && d != 0.0 ? " (an integral dtype truncates it to an integer)" : "", ", found ", d);
  MINIDL_CHECK((xd > 0 && xe >= xs) || (xd < 0 && xe <= xs), ValueError, "arange: the range from ", s, " to ", e,
               " is empty or runs against the step ", d);
  // Sizes as PyTorch's: int64 counts in integers, every other dtype from the values as given.
  double count;
  if (o.dtype_ == kInt64) {
    const std::int64_t a = start.to_long(), b = end.to_long(), c = step.to_long(), sign = c > 0 ? 1 : -1;
    count = std::ceil(static_cast<double>(b - a + c - sign) / static_cast<double>(c));
  } else {
    count = std::ceil((e - s) / d);
  }
  // Checked before the conversion: a double beyond int64's range does not convert (undefined behaviour).
  MINIDL_CHECK(count < static_cast<double>(std::numeric_limits<std::int64_t>::max()), ValueError, "arange: the range ",
               "from ", s, " to ", e, " by ", d, " has ", count, " elements, more than a tensor can hold");
  Tensor t = empty({static_cast<std::int64_t>(count)}, plain(o));
  if (t.numel() > 0) MINIDL_ON_BACKEND(t.device(), arange(t, xs, xd));
  return finish(t, o);
}

namespace {
/// linspace and logspace: `steps` values, the kernel for two or more, `one` (the value of a single step) else.
template <class Kernel>
Tensor spaced(const char* op, std::int64_t steps, double one, TensorOptions o, Kernel kernel) {
  MINIDL_CHECK(steps >= 0, ValueError, op, ": argument 'steps' must be >= 0, found ", steps);
  MINIDL_CHECK(o.dtype_ != kBool, TypeError, op, ": expected a dtype other than bool (PyTorch has no ", op,
               " for bool), found bool");
  Tensor t = empty({steps}, plain(o));
  if (steps == 1) MINIDL_ON_BACKEND(t.device(), fill(t, one));
  if (steps >= 2) kernel(t);
  return finish(t, o);
}
}  // namespace

Tensor linspace(const Scalar& start, const Scalar& end, std::int64_t steps, TensorOptions o) {
  const double s = start.to_double(), e = end.to_double();
  return spaced("linspace", steps, s, o, [&](Tensor& t) { MINIDL_ON_BACKEND(t.device(), linspace(t, s, e)); });
}

Tensor logspace(const Scalar& start, const Scalar& end, std::int64_t steps, double base, TensorOptions o) {
  const double s = start.to_double(), e = end.to_double();
  return spaced("logspace", steps, std::pow(base, s), o,
                [&](Tensor& t) { MINIDL_ON_BACKEND(t.device(), logspace(t, s, e, base)); });
}

Tensor eye(std::int64_t n, TensorOptions o) { return eye(n, n, o); }

Tensor eye(std::int64_t n, std::int64_t m, TensorOptions o) {
  MINIDL_CHECK(n >= 0, ValueError, "eye: argument 'n' must be >= 0, found ", n);
  MINIDL_CHECK(m >= 0, ValueError, "eye: argument 'm' must be >= 0, found ", m);
  Tensor t = zeros({n, m}, plain(o));
  Tensor diagonal = t.as_strided({std::min(n, m)}, {m + 1}, 0);
  MINIDL_ON_BACKEND(t.device(), fill(diagonal, 1.0));
  return finish(t, o);
}

// ---- from_blob -----------------------------------------------------------------------------------------------------

Tensor from_blob(void* data, const Shape& sizes, TensorOptions o) {
  return from_blob(data, sizes, contiguous_strides(sizes), std::function<void(void*)>(), o);
}
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, TensorOptions o) {
  return from_blob(data, sizes, strides, std::function<void(void*)>(), o);
}
Tensor from_blob(void* data, const Shape& sizes, const std::function<void(void*)>& deleter, TensorOptions o) {
  return from_blob(data, sizes, contiguous_strides(sizes), deleter, o);
}

Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, const std::function<void(void*)>& deleter,
                 TensorOptions o) {
  const std::int64_t n = shape_numel(sizes);
  MINIDL_CHECK(strides.size() == sizes.size(), ValueError, "from_blob: expected one stride per dimension (",
               sizes.size(), "), found ", strides.size(), " strides");
  std::int64_t last = 0;  // the farthest element from data, in elements
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    MINIDL_CHECK(strides[i] >= 0, ValueError, "from_blob: expected non-negative strides, found ", strides[i],
                 " for dimension ", i);
    if (n > 0) last += (sizes[i] - 1) * strides[i];
  }
  MINIDL_CHECK(data != nullptr || n == 0, ValueError, "from_blob: argument 'data' is null for a tensor of ", n,
               " elements");
#if !MINIDL_CUDA_ENABLED
  if (o.device_.is_cuda()) detail::throw_cuda_not_built();
#endif
  const std::size_t nbytes = n == 0 ? 0 : static_cast<std::size_t>(last + 1) * element_size(o.dtype_);
  auto storage = std::make_shared<Storage>(data, nbytes, o.device_, deleter);
  return finish(Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, sizes, strides, o.dtype_)), o);
}

// ---- host values ---------------------------------------------------------------------------------------------------

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions o) {
  MINIDL_CHECK(shape_numel(shape) == static_cast<std::int64_t>(values.size()), ValueError,
               "from_vector: ", values.size(), " values do not fill shape ", shape_str(shape), " (", shape_numel(shape),
               " elements)");
  o = detail::with_default_dtype(o, dtype_of<T>::value);
  Tensor host = empty(shape, TensorOptions(dtype_of<T>::value));
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits
    bool* p = host.data_ptr<bool>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else if (!values.empty()) {
    std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(T));
  }
  return finish(host.to(o.device_).to(o.dtype_), o);
}
#define MINIDL_INSTANTIATE_FROM_VECTOR(T, name, str, cat, rank, file) \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, TensorOptions);
MINIDL_FORALL_DTYPES(MINIDL_INSTANTIATE_FROM_VECTOR)
#undef MINIDL_INSTANTIATE_FROM_VECTOR

Tensor tensor(std::initializer_list<double> values, TensorOptions o) {
  return from_vector(std::vector<double>(values), {static_cast<std::int64_t>(values.size())},
                     detail::with_default_dtype(o, kFloat32));
}

// ---- in-place fills composed of views, fill_ and copy_ (each records itself for autograd) -------------------------

Tensor& Tensor::fill_(const Tensor& value) {
  MINIDL_CHECK(defined(), ValueError, "fill_: argument 'self' is an undefined tensor");
  MINIDL_CHECK(value.defined(), ValueError, "fill_: argument 'value' is an undefined tensor");
  MINIDL_CHECK(value.dim() == 0, ValueError, "fill_: argument 'value' must be a 0-dimensional tensor, found ",
               value.dim(), " dimensions (shape ", shape_str(value.sizes()), ")");
  return copy_(value);  // a broadcast copy: no read back to the host, and the gradient reaches `value`
}

Tensor& Tensor::fill_diagonal_(const Scalar& fill_value, bool wrap) {
  MINIDL_CHECK(defined(), ValueError, "fill_diagonal_: argument 'self' is an undefined tensor");
  MINIDL_CHECK(dim() >= 2, ValueError, "fill_diagonal_: expected a tensor of at least 2 dimensions, found ", dim());
  if (dim() > 2) {
    for (std::int64_t d = 1; d < dim(); ++d) {
      MINIDL_CHECK(size(d) == size(0), ValueError, "fill_diagonal_: expected all dimensions of equal size for a ",
                   dim(), "-d tensor, found shape ", shape_str(sizes()));
    }
  }
  std::int64_t stride = 0;
  for (std::int64_t d = 0; d < dim(); ++d) stride += this->stride(d);
  const std::int64_t height = size(0), width = size(1), length = std::min(height, width);
  as_strided({length}, {stride}, storage_offset()).fill_(fill_value);
  if (wrap && dim() == 2 && height > width + 1) {
    // The diagonal starts again width + 1 rows down, as in NumPy's fill_diagonal(wrap=True).
    const std::int64_t step = width + 1, more = (numel() + step - 1) / step - length;
    as_strided({more}, {stride}, storage_offset() + this->stride(0) * step).fill_(fill_value);
  }
  return *this;
}

}  // namespace minidl
