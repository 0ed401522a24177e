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
#include "minidl/shape.h"
#include "minidl/tensor_accessor.h"

namespace minidl {

class Storage;
class Tensor;
namespace detail {
/// Throws unless `t` is a CPU tensor of `dtype` with `dims` dims (Tensor::accessor's checks).
void check_accessor(const Tensor& t, DType dtype, std::size_t dims);
}  // namespace detail
class TensorImpl;
namespace autograd { class Node; }
namespace indexing { class TensorIndex; }

/// What a factory makes: dtype, device, requires_grad, set by chained setters as LibTorch's
/// (TensorOptions().dtype(kInt64).device(kCUDA)). has_dtype() / has_device(): whether they were given; where not,
/// a factory uses its default (float32 and the CPU for most; full, arange, randint and randperm infer the dtype as
/// LibTorch's, *_like take the tensor's).
struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_ = Device(kCPU);
  bool requires_grad_ = false;
  bool has_dtype_ = false;
  bool has_device_ = false;
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d), has_dtype_(true) {}
  TensorOptions(Device d) : device_(d), has_device_(true) {}
  TensorOptions(DeviceType d) : device_(d), has_device_(true) {}
  TensorOptions& dtype(DType d) { dtype_ = d; has_dtype_ = true; return *this; }
  TensorOptions& device(Device d) { device_ = d; has_device_ = true; return *this; }
  TensorOptions& requires_grad(bool r = true) { requires_grad_ = r; return *this; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool has_dtype() const { return has_dtype_; }
  bool has_device() const { return has_device_; }
};

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
  /// The elements in row-major order (any strides; T must be the tensor's element type).
  template <class T> std::vector<T> to_vector() const;
  /// The one element, converted to T (any dtype to any T, as to(dtype) converts).
  template <class T> T item() const;
  /// The one element as a Scalar (floating, integral or bool as the dtype is), LibTorch's item().
  Scalar item() const;
  /// LibTorch's TensorAccessor (tensor_accessor.h): a[i][j] reads and writes element (i, j) through the strides.
  /// TypeError unless T is the element type (const T for reading only) and the tensor is on the CPU, ValueError
  /// unless it has N dims.
  template <class T, std::size_t N> TensorAccessor<T, N> accessor() const& {
    static_assert(N > 0, "accessor<T, N>: N must be at least 1 (read a 0-d tensor with item<T>())");
    detail::check_accessor(*this, dtype_of<std::remove_const_t<T>>::value, N);
    return TensorAccessor<T, N>(static_cast<T*>(data_ptr()), sizes().data(), strides().data());
  }
  /// An accessor of a temporary would point into sizes and data that die with it.
  template <class T, std::size_t N> TensorAccessor<T, N> accessor() && = delete;

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
  Tensor movedim(const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination) const;
  Tensor movedim(std::int64_t source, std::int64_t destination) const;
  Tensor moveaxis(const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination) const;
  Tensor moveaxis(std::int64_t source, std::int64_t destination) const;
  Tensor swapaxes(std::int64_t axis0, std::int64_t axis1) const;
  Tensor swapdims(std::int64_t dim0, std::int64_t dim1) const;
  Tensor diagonal(std::int64_t offset = 0, std::int64_t dim1 = 0, std::int64_t dim2 = 1) const;
  Tensor diag(std::int64_t diagonal = 0) const;
  Tensor trace() const;
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


  // Linear algebra (minidl/linalg.h has the rules).
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& mat2) const;
  Tensor bmm(const Tensor& mat2) const;
  Tensor mv(const Tensor& vec) const;
  Tensor dot(const Tensor& other) const;
  Tensor outer(const Tensor& vec2) const;
  Tensor ger(const Tensor& vec2) const;
  Tensor addmm(const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1, const Scalar& alpha = 1) const;
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1, const Scalar& alpha = 1) const;
  Tensor addmv(const Tensor& mat, const Tensor& vec, const Scalar& beta = 1, const Scalar& alpha = 1) const;

  // Joining, splitting, where (the functions of joining.h; defined in src/ops/joining.cpp, rearrange.cpp,
  // triangle.cpp and where.cpp).
  std::vector<Tensor> split(std::int64_t split_size, std::int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<std::int64_t>& split_sizes, std::int64_t dim = 0) const;
  std::vector<Tensor> split_with_sizes(const std::vector<std::int64_t>& split_sizes, std::int64_t dim = 0) const;
  std::vector<Tensor> chunk(std::int64_t chunks, std::int64_t dim = 0) const;
  std::vector<Tensor> unbind(std::int64_t dim = 0) const;
  Tensor flip(const std::vector<std::int64_t>& dims) const;
  Tensor roll(const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims = {}) const;
  Tensor roll(std::int64_t shift) const;
  Tensor roll(std::int64_t shift, std::int64_t dim) const;
  /// The tensor tiled: repeats[i] copies along dim i (leading repeats add dims). ValueError when repeats has fewer
  /// entries than the tensor has dims.
  Tensor repeat(const std::vector<std::int64_t>& repeats) const;
  Tensor tile(const std::vector<std::int64_t>& dims) const;
  std::vector<Tensor> tensor_split(std::int64_t sections, std::int64_t dim = 0) const;
  std::vector<Tensor> tensor_split(const std::vector<std::int64_t>& indices, std::int64_t dim = 0) const;
  Tensor repeat_interleave(std::int64_t repeats, std::optional<std::int64_t> dim = std::nullopt,
                           std::optional<std::int64_t> output_size = std::nullopt) const;
  Tensor repeat_interleave(const Tensor& repeats, std::optional<std::int64_t> dim = std::nullopt,
                           std::optional<std::int64_t> output_size = std::nullopt) const;
  Tensor tril(std::int64_t diagonal = 0) const;
  Tensor triu(std::int64_t diagonal = 0) const;
  Tensor& tril_(std::int64_t diagonal = 0);
  Tensor& triu_(std::int64_t diagonal = 0);
  /// where(condition, *this, other).
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  /// In place: mask must broadcast to this tensor's shape.
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);
  Tensor& masked_fill_(const Tensor& mask, const Tensor& value);

  // In-place ops. They bump the version counter, so a saved tensor changed before backward is detected.
  // Results are computed in the promoted dtype and must be castable to self's (can_cast in ops.h).
  Tensor& zero_();
  Tensor& fill_(const Scalar& value);
  /// Writes src (broadcast to self's shape, converted to self's dtype and device) into self.
  Tensor& copy_(const Tensor& src);
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& mul_(const Scalar& value);
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1);

  // ---- Indexing (include/minidl/indexing.h says what each does; src/ops/indexing.cpp, gather_scatter.cpp,
  // index_select.cpp). Call them with minidl/indexing.h included (minidl.h does).
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& values);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Scalar& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& values);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Scalar& value);
  /// One index tensor (or an undefined one: the whole dim) per leading dim, as PyTorch's index_put_.
  Tensor& index_put_(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false) const;
  Tensor gather(std::int64_t dim, const Tensor& index, bool sparse_grad = false) const;
  Tensor scatter(std::int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(std::int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor& scatter_(std::int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_(std::int64_t dim, const Tensor& index, const Scalar& value);
  Tensor scatter_add(std::int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_add_(std::int64_t dim, const Tensor& index, const Tensor& src);
  Tensor index_add(std::int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1) const;
  Tensor& index_add_(std::int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
  Tensor index_select(std::int64_t dim, const Tensor& index) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor nonzero() const;
  Tensor argwhere() const;
  Tensor take_along_dim(const Tensor& indices, std::optional<std::int64_t> dim = std::nullopt) const;
  // ---- creation and random (src/core/factories.cpp, src/ops/random.cpp) ----
  /// New tensors of self's dtype and device unless `options` give others (self's values are not used).
  Tensor new_empty(const Shape& size, TensorOptions options = {}) const;
  Tensor new_zeros(const Shape& size, TensorOptions options = {}) const;
  Tensor new_ones(const Shape& size, TensorOptions options = {}) const;
  Tensor new_full(const Shape& size, const Scalar& fill_value, TensorOptions options = {}) const;
  /// fill_ with the value of a 0-d tensor (on any device).
  Tensor& fill_(const Tensor& value);
  /// Writes fill_value on the main diagonal (a 2-d tensor, or n-d with all sizes equal); with `wrap`, a matrix
  /// taller than wide restarts its diagonal after every width + 1 rows, as PyTorch's.
  Tensor& fill_diagonal_(const Scalar& fill_value, bool wrap = false);
  // In-place draws from the device's generator (floating dtypes for uniform_ and normal_, any dtype for the
  // others), recorded for autograd as fills (no gradient to the old value).
  Tensor& uniform_(double from = 0, double to = 1);
  Tensor& normal_(double mean = 0, double std = 1);
  /// Each element 1 with probability p (a tensor p broadcasts to self's shape), else 0.
  Tensor& bernoulli_(double p = 0.5);
  Tensor& bernoulli_(const Tensor& p);
  /// Integers uniform on [from, to) (to: the dtype's largest value + 1 when not given), on [0, to), or over
  /// the dtype's whole range (floating: the integers [0, 2^digits]).
  Tensor& random_(std::int64_t from, std::optional<std::int64_t> to);
  Tensor& random_(std::int64_t to);
  Tensor& random_();
  /// 0 or 1 with the probability in each element of self (floating); bernoulli(p): with probability p.
  Tensor bernoulli() const;
  Tensor bernoulli(double p) const;
  Tensor multinomial(std::int64_t num_samples, bool replacement = false) const;

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

/// PyTorch's layout of the values (nested brackets, one format for all elements, and for more than 1000 elements
/// only the first and last three along each dim around "..."), then LibTorch's type line, "[ CPUFloatType{2,3} ]".
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace minidl

// The factories (empty, zeros, rand, ...) need Tensor complete; users of tensor.h have always had them.
#include "minidl/factories.h"
