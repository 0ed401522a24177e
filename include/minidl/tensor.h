#pragma once
// Tensor: a reference-counted handle to a strided view of a block of memory (its storage) on one device, with the
// autograd metadata that lets it take part in a backward pass. Copies of a Tensor share the same data; views
// (transpose, narrow, select, expand, ...) share the storage with other geometry, as in PyTorch.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "minidl/device.h"
#include "minidl/dtype.h"
#include "minidl/errors.h"
#include "minidl/scalar.h"

namespace minidl {

using Shape = std::vector<std::int64_t>;
std::string shape_str(const Shape& s);
/// Product of the sizes; throws ValueError on negative sizes or 64-bit overflow.
std::int64_t shape_numel(const Shape& s);

class Storage;
class TensorImpl;
namespace autograd { class Node; }

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const;
  const Shape& shape() const { return sizes(); }
  std::int64_t size(std::int64_t dim) const;
  std::int64_t dim() const;
  std::int64_t numel() const;
  DType dtype() const;
  DType scalar_type() const { return dtype(); }
  Device device() const;
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_floating_point() const { return minidl::is_floating_point(dtype()); }
  std::size_t element_size() const { return minidl::element_size(dtype()); }
  /// numel() * element_size(): the bytes of the elements (a view's storage may hold more).
  std::size_t nbytes() const;

  // Geometry: strides in elements; the offset of element [0, ..., 0] into the storage, in elements.
  const Shape& strides() const;
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t storage_offset() const;
  /// Row-major without gaps (PyTorch's rule: dims of size 1 and tensors without elements don't count).
  bool is_contiguous() const;
  /// This tensor when contiguous, else a contiguous copy (differentiable).
  Tensor contiguous() const;
  /// True for a tensor made by a view op (shares another tensor's storage).
  bool is_view() const;

  // Raw data of this tensor: the address of element [0, ..., 0] (already offset for views). The pointer is a
  // device pointer for CUDA tensors.
  void* data_ptr() const;
  template <class T> T* data_ptr() const;

  // Conversions and host access. to_vector/item synchronise with the device.
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const { return to(device).to(dtype); }
  Tensor cpu() const { return to(Device(kCPU)); }
  Tensor cuda(int index = 0) const { return to(Device(kCUDA, index)); }
  Tensor clone() const;
  template <class T> std::vector<T> to_vector() const;
  template <class T> T item() const;

  // Views (share storage, never copy; differentiable). See ops.h for the rules of each.
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor t() const;
  Tensor permute(const std::vector<std::int64_t>& dims) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor slice(std::int64_t dim = 0, std::int64_t start = 0, std::int64_t end = INT64_MAX, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor expand(const Shape& sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor as_strided(const Shape& sizes, const Shape& strides, std::int64_t storage_offset) const;

  // Reductions (differentiable except argmax).
  Tensor sum() const;
  Tensor sum(const std::vector<std::int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<std::int64_t>& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor max(std::int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::int64_t dim, bool keepdim = false) const;

  // ---- elementwise math: the free functions of ops.h and math.h as methods (src/ops/elementwise.cpp,
  // src/ops/math.cpp); the in-place forms (name_) follow the in-place rules below.
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor floor_divide(const Tensor& other) const;
  Tensor floor_divide(const Scalar& other) const;
  Tensor remainder(const Tensor& other) const;
  Tensor remainder(const Scalar& other) const;
  Tensor fmod(const Tensor& other) const;
  Tensor fmod(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(double exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor atan2(const Tensor& other) const;
  Tensor hypot(const Tensor& other) const;
  Tensor lerp(const Tensor& end, const Scalar& weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor square() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor exp() const;
  Tensor exp2() const;
  Tensor expm1() const;
  Tensor log() const;
  Tensor log2() const;
  Tensor log10() const;
  Tensor log1p() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tan() const;
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor sinh() const;
  Tensor cosh() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor erf() const;
  Tensor erfc() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor round(std::int64_t decimals) const;
  Tensor trunc() const;
  Tensor clamp(const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt) const;
  Tensor clamp(const std::optional<Tensor>& min = std::nullopt, const std::optional<Tensor>& max = std::nullopt) const;
  Tensor clamp_min(const Scalar& min) const;
  Tensor clamp_min(const Tensor& min) const;
  Tensor clamp_max(const Scalar& max) const;
  Tensor clamp_max(const Tensor& max) const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor logical_not() const;
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor& pow_(double exponent);
  Tensor& lerp_(const Tensor& end, const Scalar& weight);
  Tensor& lerp_(const Tensor& end, const Tensor& weight);
  Tensor& neg_();
  Tensor& abs_();
  Tensor& square_();
  Tensor& sqrt_();
  Tensor& rsqrt_();
  Tensor& reciprocal_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& sin_();
  Tensor& cos_();
  Tensor& tanh_();
  Tensor& sigmoid_();
  Tensor& relu_();
  Tensor& floor_();
  Tensor& ceil_();
  Tensor& round_();
  Tensor& trunc_();
  Tensor& clamp_(const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
  Tensor& clamp_(const std::optional<Tensor>& min = std::nullopt, const std::optional<Tensor>& max = std::nullopt);
  Tensor& clamp_min_(const Scalar& min);
  Tensor& clamp_max_(const Scalar& max);
  Tensor& operator+=(const Tensor& other) { return add_(other); }
  Tensor& operator+=(const Scalar& other) { return add_(other); }
  Tensor& operator-=(const Tensor& other) { return sub_(other); }
  Tensor& operator-=(const Scalar& other) { return sub_(other); }
  Tensor& operator*=(const Tensor& other) { return mul_(other); }
  Tensor& operator*=(const Scalar& other) { return mul_(other); }
  Tensor& operator/=(const Tensor& other) { return div_(other); }
  Tensor& operator/=(const Scalar& other) { return div_(other); }
  // ---- end of elementwise math

  Tensor matmul(const Tensor& other) const;

  // In-place ops. They bump the version counter, so a saved tensor changed before backward is detected.
  // Results are computed in the promoted dtype and must be castable to self's (can_cast in ops.h).
  Tensor& zero_();
  Tensor& fill_(const Scalar& value);
  /// Writes src (broadcast to self's shape, converted to self's dtype and device) into self.
  Tensor& copy_(const Tensor& src);
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& mul_(const Scalar& value);
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1);

  // Autograd.
  bool requires_grad() const;
  /// Marks a leaf tensor as needing a gradient. Only floating tensors can require grad.
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor& set_requires_grad(bool r) { return requires_grad_(r); }
  /// The accumulated gradient (undefined until a backward pass reaches this tensor).
  Tensor grad() const;
  /// Direct access to the gradient slot (to replace or reset it).
  Tensor& mutable_grad() const;
  /// Runs reverse-mode differentiation from this tensor. Without `gradient` the tensor must hold one element.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;
  bool is_leaf() const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  /// Counter bumped by every in-place modification of the underlying storage.
  std::uint64_t version() const;
  /// Calls hook(leaf) each time a backward pass has accumulated a gradient into this leaf tensor's grad()
  /// (LibTorch's register_post_accumulate_grad_hook; e.g. DistributedDataParallel starts reducing a gradient
  /// as soon as it is complete). The hook may read and replace leaf.mutable_grad(). Returns a handle for
  /// remove_post_accumulate_grad_hook. Throws AutogradError for a non-leaf or a tensor not requiring grad.
  std::uint64_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  /// Removes a hook registered on this tensor (unknown handles are ignored: removal is idempotent).
  void remove_post_accumulate_grad_hook(std::uint64_t handle) const;

  TensorImpl* unsafe_impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// True when both handles refer to the same tensor object.
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- factories ---------------------------------------------------------------
struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_ = Device(kCPU);
  bool requires_grad_ = false;
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions(DeviceType d) : device_(d) {}
  TensorOptions& dtype(DType d) { dtype_ = d; return *this; }
  TensorOptions& device(Device d) { device_ = d; return *this; }
  TensorOptions& requires_grad(bool r = true) { requires_grad_ = r; return *this; }
};

/// Uninitialised memory (never read it before writing).
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, const Scalar& value, TensorOptions options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
/// 0, 1, ..., end-1 (or start..end by step).
Tensor arange(double end, TensorOptions options = {});
Tensor arange(double start, double end, double step, TensorOptions options = {});
/// Uniform [0, 1) and standard normal, from the device's generator (cuRAND Philox on CUDA).
Tensor rand(const Shape& shape, TensorOptions options = {});
Tensor randn(const Shape& shape, TensorOptions options = {});
/// Uniform [low, high).
Tensor uniform(const Shape& shape, double low, double high, TensorOptions options = {});
/// Copies host values into a new tensor of the given shape (dtype follows T unless options say otherwise).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                   TensorOptions options = TensorOptions(dtype_of<T>::value));
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
/// Seeds the CPU generator and every CUDA generator; runs become reproducible on each device.
void manual_seed(std::uint64_t seed);

}  // namespace minidl
