// Tensor factories.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/tensor_impl.h"
#include "kernels/backend.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/context.h"
#endif

namespace minidl {
namespace {
Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}
}  // namespace

Tensor empty(const Shape& shape, TensorOptions o) {
  const std::int64_t n = shape_numel(shape);
  MINIDL_CHECK(static_cast<std::uint64_t>(n) <= std::numeric_limits<std::uint64_t>::max() / 8, ValueError,
               "empty: shape ", shape_str(shape), " is too large");
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(n) * element_size(o.dtype_), o.device_);
  return finish(Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape, o.dtype_)), o);
}

Tensor full(const Shape& shape, const Scalar& value, TensorOptions o) {
  const bool rg = o.requires_grad_;
  Tensor t = empty(shape, o.requires_grad(false));
  MINIDL_ON_BACKEND(t.device(), fill(t, value.to_double()));
  return finish(t, o.requires_grad(rg));
}

Tensor zeros(const Shape& shape, TensorOptions o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return full(shape, 1.0, o); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }

Tensor arange(double end, TensorOptions o) { return arange(0.0, end, 1.0, o); }

Tensor arange(double start, double end, double step, TensorOptions o) {
  MINIDL_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), ValueError,
               "arange: start, end and step must be finite, found ", start, ", ", end, ", ", step);
  MINIDL_CHECK(step != 0.0, ValueError, "arange: step must be nonzero");
  MINIDL_CHECK((end - start) / step >= 0, ValueError, "arange: the range from ", start, " to ", end,
               " is empty or runs against the step ", step);
  const double count = std::ceil((end - start) / step);
  // Checked before the conversion: a double beyond int64's range does not convert (undefined behaviour).
  MINIDL_CHECK(count < static_cast<double>(std::numeric_limits<std::int64_t>::max()), ValueError, "arange: the range ",
               "from ", start, " to ", end, " by ", step, " has ", count, " elements, more than a tensor can hold");
  const auto n = static_cast<std::int64_t>(count);
  const bool rg = o.requires_grad_;
  Tensor t = empty({n}, o.requires_grad(false));
  MINIDL_ON_BACKEND(t.device(), arange(t, start, step));
  return finish(t, o.requires_grad(rg));
}

namespace {
/// A random tensor drawn by `draw` (the backend's uniform or normal kernel, in float32 or float64); bfloat16 and
/// float16 ones are drawn in float32 and rounded, as PyTorch computes them in float.
template <class Draw>
Tensor random_tensor(const Shape& shape, TensorOptions o, Draw draw) {
  const bool rg = o.requires_grad_;
  const DType dtype = o.dtype_;
  Tensor t = empty(shape, o.requires_grad(false).dtype(is_reduced_floating_point(dtype) ? kFloat32 : dtype));
  draw(t);
  if (t.dtype() != dtype) t = t.to(dtype);
  return finish(t, o.requires_grad(rg));
}
}  // namespace

/// The largest value of the 16-bit floating type D below x (a draw that rounds up to x is capped there).
template <class D> double largest_below(double x) {
  D d(static_cast<float>(x));
  if (static_cast<double>(static_cast<float>(d)) < x) return static_cast<float>(d);
  // One step towards -infinity in the bit pattern (sign-magnitude).
  const std::uint16_t mag = d.bits & 0x7FFF;
  d = D::from_bits(static_cast<std::uint16_t>(mag == 0 ? 0x8001 : (d.bits & 0x8000 ? d.bits + 1 : d.bits - 1)));
  return static_cast<float>(d);
}

Tensor uniform(const Shape& shape, double low, double high, TensorOptions o) {
  MINIDL_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, ValueError,
               "uniform: expected finite low <= high, found low=", low, " high=", high);
  Tensor t = random_tensor(shape, o, [&](Tensor& u) { MINIDL_ON_BACKEND(u.device(), uniform(u, low, high)); });
  if (!is_reduced_floating_point(t.dtype()) || low == high) return t;
  // Rounding to 16 bits can carry a draw just below high up to high: [low, high) stays half-open.
  const double top = t.dtype() == kBFloat16 ? largest_below<BFloat16>(high) : largest_below<Half>(high);
  const Tensor cap = full({}, top, TensorOptions(t.dtype()).device(t.device()));
  MINIDL_ON_BACKEND(t.device(), binary(kernels::BinaryOp::Minimum, 0.0, t, cap, t));
  return t;
}

Tensor rand(const Shape& shape, TensorOptions o) { return uniform(shape, 0.0, 1.0, o); }

Tensor randn(const Shape& shape, TensorOptions o) {
  return random_tensor(shape, o, [&](Tensor& t) { MINIDL_ON_BACKEND(t.device(), normal(t, 0.0, 1.0)); });
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions o) {
  MINIDL_CHECK(shape_numel(shape) == static_cast<std::int64_t>(values.size()), ValueError, "from_vector: ",
               values.size(), " values do not fill shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
  const bool rg = o.requires_grad_;
  Tensor host = empty(shape, TensorOptions(dtype_of<T>::value));
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits
    bool* p = host.data_ptr<bool>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else if (!values.empty()) {
    std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(T));
  }
  Tensor t = host.to(o.device_).to(o.dtype_);
  return finish(t, o.requires_grad(rg));
}
#define MINIDL_INSTANTIATE_FROM_VECTOR(T, name, str, cat, rank, file) \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, TensorOptions);
MINIDL_FORALL_DTYPES(MINIDL_INSTANTIATE_FROM_VECTOR)
#undef MINIDL_INSTANTIATE_FROM_VECTOR

Tensor tensor(std::initializer_list<double> values, TensorOptions o) {
  return from_vector(std::vector<double>(values), {static_cast<std::int64_t>(values.size())}, o);
}

}  // namespace minidl
