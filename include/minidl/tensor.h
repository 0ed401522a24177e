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
#include <tuple>
#include <type_traits>
#include <vector>

#include "minidl/device.h"
#include "minidl/dtype.h"
#include "minidl/errors.h"
#include "minidl/int_array_ref.h"
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

  // ---- Reductions, scans, sorting: the methods of include/minidl/reduction.h (see there for each op's rules) ----
  // An empty dim list reduces over every dim. Each dim form takes one dim or a list: x.sum(1), x.sum({0, 2}, true).
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(std::int64_t dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  // var / std: `correction` is subtracted from the count in the divisor (default 1: Bessel's correction);
  // unbiased = true means correction 1, false 0. x.var(1) is over dim 1 (LibTorch's C++-only int overload), and
  // x.var({1}) too: the unbiased-only form takes a bool alone.
  template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
  Tensor var(B unbiased) const {
    return var(IntArrayRef(), std::optional<Scalar>(unbiased ? 1 : 0), false);
  }
  Tensor var(IntArrayRef dim, bool unbiased, bool keepdim = false) const;
  Tensor var(IntArrayRef dim = {}, const std::optional<Scalar>& correction = std::nullopt, bool keepdim = false) const;
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Tensor var(I dim) const {
    const std::int64_t d = dim;
    return var(IntArrayRef(d), std::optional<Scalar>(), false);
  }
  template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
  Tensor std(B unbiased) const {
    return std(IntArrayRef(), std::optional<Scalar>(unbiased ? 1 : 0), false);
  }
  Tensor std(IntArrayRef dim, bool unbiased, bool keepdim = false) const;
  Tensor std(IntArrayRef dim = {}, const std::optional<Scalar>& correction = std::nullopt, bool keepdim = false) const;
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Tensor std(I dim) const {
    const std::int64_t d = dim;
    return std(IntArrayRef(d), std::optional<Scalar>(), false);
  }
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(std::int64_t dim, bool keepdim = false) const;
  Tensor max(const Tensor& other) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(std::int64_t dim, bool keepdim = false) const;
  Tensor min(const Tensor& other) const;
  Tensor argmax(std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor amax(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor logsumexp(IntArrayRef dim, bool keepdim = false) const;
  Tensor norm(const Scalar& p = 2) const;
  Tensor norm(const std::optional<Scalar>& p, IntArrayRef dim, bool keepdim = false) const;
  Tensor cumsum(std::int64_t dim, std::optional<DType> dtype = std::nullopt) const;
  Tensor cumprod(std::int64_t dim, std::optional<DType> dtype = std::nullopt) const;
  std::tuple<Tensor, Tensor> topk(std::int64_t k, std::int64_t dim = -1, bool largest = true, bool sorted = true) const;
  // Sorting is always stable: `stable` is accepted for LibTorch's signatures (a bool literal selects them).
  std::tuple<Tensor, Tensor> sort(std::int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> sort(std::optional<bool> stable, std::int64_t dim = -1, bool descending = false) const;
  template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
  std::tuple<Tensor, Tensor> sort(B stable, std::int64_t dim = -1, bool descending = false) const {
    return sort(std::optional<bool>(stable), dim, descending);
  }
  Tensor argsort(std::int64_t dim = -1, bool descending = false) const;
  template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
  Tensor argsort(B /*stable*/, std::int64_t dim = -1, bool descending = false) const {
    return argsort(dim, descending);
  }
  Tensor any() const;
  Tensor any(std::int64_t dim, bool keepdim = false) const;
  Tensor any(IntArrayRef dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(std::int64_t dim, bool keepdim = false) const;
  Tensor all(IntArrayRef dim, bool keepdim = false) const;
  bool allclose(const Tensor& other, double rtol = 1e-05, double atol = 1e-08, bool equal_nan = false) const;
  bool equal(const Tensor& other) const;
  // ---- end of reductions ----

  // Elementwise math as methods (the free functions in ops.h are the same ops).
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor pow(double exponent) const;
  Tensor relu() const;
  Tensor& relu_();
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor matmul(const Tensor& other) const;

  // In-place ops. They bump the version counter, so a saved tensor changed before backward is detected.
  // Results are computed in the promoted dtype and must be castable to self's (can_cast in ops.h).
  Tensor& zero_();
  Tensor& fill_(const Scalar& value);
  /// Writes src (broadcast to self's shape, converted to self's dtype and device) into self.
  Tensor& copy_(const Tensor& src);
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& mul_(const Scalar& value);
  Tensor& add_(const Scalar& value);

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
