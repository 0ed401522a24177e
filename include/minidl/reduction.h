#pragma once
// Reductions, scans, sorting and the whole-tensor comparisons, with LibTorch's names, overloads and argument order
// (the Tensor methods of the same names are the same ops). PyTorch's semantics:
// - A dim list may be one dim or several (negative dims count from the end; a repeated dim is a ValueError); an
//   empty list reduces over every dim. keepdim keeps each reduced dim with size 1.
// - Result dtypes: sum, prod, cumsum and cumprod of integral or bool tensors are int64 (or `dtype`: the input is
//   converted to it first); mean, var, std, logsumexp and norm take floating tensors only (TypeError otherwise);
//   min, max, amax, amin, argmax, argmin, sort, argsort and topk take every dtype; any and all give bool (uint8 for
//   uint8 inputs, as PyTorch). bfloat16 and float16 accumulate in float32.
// - NaN: a NaN in a slice makes its max/min/amax/amin NaN (argmax/argmin point at the first NaN); sort and topk
//   order NaN above every number.
// - Gradients (PyTorch's derivatives.yaml): the gradient of max/min over a dim, sort and topk goes to the selected
//   elements; that of the all-element max()/min() and of amax/amin is split evenly among tied elements; cumprod
//   and prod are exact with zeros in the input. argmax, argmin, argsort, any, all, allclose and equal are not
//   differentiable.
// - On the GPU nothing here waits for the device except allclose and equal, which return a host bool.
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>

#include "minidl/int_array_ref.h"
#include "minidl/scalar.h"
#include "minidl/tensor.h"

namespace minidl {

Tensor sum(const Tensor& self, std::optional<DType> dtype = std::nullopt);
Tensor sum(const Tensor& self, IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
/// prod over one dim (as PyTorch: no dim lists).
Tensor prod(const Tensor& self, std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& self, std::int64_t dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
/// The mean of an empty slice is NaN.
Tensor mean(const Tensor& self, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& self, IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);

/// Variance with divisor max(N - correction, 0) (one pass, Welford's update); correction defaults to 1.
/// unbiased = true is correction 1, false 0. The unbiased-only form takes a bool alone, so var(x, {1}) is over
/// dim 1.
template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
Tensor var(const Tensor& self, B unbiased) {
  return self.var(unbiased);
}
Tensor var(const Tensor& self, IntArrayRef dim, bool unbiased, bool keepdim = false);
Tensor var(const Tensor& self, IntArrayRef dim = {}, const std::optional<Scalar>& correction = std::nullopt,
           bool keepdim = false);
/// var(x, 1) is over dim 1 (without this overload 1 would convert to `unbiased`, LibTorch's gh-40287).
template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
Tensor var(const Tensor& self, I dim) {
  return self.var(dim);
}
/// sqrt(var): the same overloads.
template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
Tensor std(const Tensor& self, B unbiased) {
  return self.std(unbiased);
}
Tensor std(const Tensor& self, IntArrayRef dim, bool unbiased, bool keepdim = false);
Tensor std(const Tensor& self, IntArrayRef dim = {}, const std::optional<Scalar>& correction = std::nullopt,
           bool keepdim = false);
template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
Tensor std(const Tensor& self, I dim) {
  return self.std(dim);
}
/// (var, mean) and (std, mean) over the same dims, with var's and std's overloads (torch.var_mean, std_mean):
/// var_mean(x, true) is unbiased over all dims, var_mean(x, 1) over dim 1.
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, IntArrayRef dim, bool unbiased, bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, IntArrayRef dim = {},
                                    const std::optional<Scalar>& correction = std::nullopt, bool keepdim = false);
template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, B unbiased) {
  return var_mean(self, IntArrayRef(), std::optional<Scalar>(unbiased ? 1 : 0), false);
}
template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, I dim) {
  const std::int64_t d = dim;
  return var_mean(self, IntArrayRef(d), std::optional<Scalar>(), false);
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, IntArrayRef dim, bool unbiased, bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, IntArrayRef dim = {},
                                    const std::optional<Scalar>& correction = std::nullopt, bool keepdim = false);
template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, B unbiased) {
  return std_mean(self, IntArrayRef(), std::optional<Scalar>(unbiased ? 1 : 0), false);
}
template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, I dim) {
  const std::int64_t d = dim;
  return std_mean(self, IntArrayRef(d), std::optional<Scalar>(), false);
}
/// sum with NaN counted as 0 (torch.nansum); the same dtype rules as sum.
Tensor nansum(const Tensor& self, std::optional<DType> dtype = std::nullopt);
Tensor nansum(const Tensor& self, IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);

/// The largest / smallest element (0-d); ValueError for an empty tensor.
Tensor max(const Tensor& self);
Tensor min(const Tensor& self);
/// (values, indices) over one dim: `auto [values, indices] = max(x, 1);` indices (int64) of the first maximum.
std::tuple<Tensor, Tensor> max(const Tensor& self, std::int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& self, std::int64_t dim, bool keepdim = false);
/// Elementwise: maximum(self, other) / minimum(self, other), as LibTorch's max(a, b).
Tensor max(const Tensor& self, const Tensor& other);
Tensor min(const Tensor& self, const Tensor& other);
/// Index (int64) of the first maximum / minimum along dim, or in the flattened tensor when dim is nullopt.
Tensor argmax(const Tensor& self, std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& self, std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false);
/// Maximum / minimum over a dim list (no indices).
Tensor amax(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false);
Tensor amin(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false);

/// log(sum(exp(x))) over dim in one pass (a running maximum keeps it finite for large inputs).
Tensor logsumexp(const Tensor& self, IntArrayRef dim, bool keepdim = false);
/// The vector p-norm over all elements or dim: p = 2, 1, inf, -inf, 0 (the count of nonzeros) or any other p.
Tensor norm(const Tensor& self, const Scalar& p = 2);
Tensor norm(const Tensor& self, const std::optional<Scalar>& p, IntArrayRef dim, bool keepdim = false);

/// Inclusive running sum / product along dim.
Tensor cumsum(const Tensor& self, std::int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& self, std::int64_t dim, std::optional<DType> dtype = std::nullopt);

/// The k largest (or smallest) elements along dim and their indices (int64), in order when sorted; among equal
/// elements the lower index is taken first. IndexError when k exceeds the dim's size.
std::tuple<Tensor, Tensor> topk(const Tensor& self, std::int64_t k, std::int64_t dim = -1, bool largest = true,
                                bool sorted = true);
/// (values, indices) sorted along dim, ascending unless descending; always stable (equal elements keep their
/// order), so `stable` is accepted for LibTorch's signatures and changes nothing.
std::tuple<Tensor, Tensor> sort(const Tensor& self, std::int64_t dim = -1, bool descending = false);
std::tuple<Tensor, Tensor> sort(const Tensor& self, std::optional<bool> stable, std::int64_t dim = -1,
                                bool descending = false);
template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
std::tuple<Tensor, Tensor> sort(const Tensor& self, B stable, std::int64_t dim = -1, bool descending = false) {
  return self.sort(stable, dim, descending);
}
Tensor argsort(const Tensor& self, std::int64_t dim = -1, bool descending = false);
/// LibTorch's argsort(self, stable, dim, descending); a bool literal selects it.
template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
Tensor argsort(const Tensor& self, B stable, std::int64_t dim = -1, bool descending = false) {
  return self.argsort(stable, dim, descending);
}

/// Whether any / every element is nonzero: over all elements (0-d result), one dim, or a dim list.
Tensor any(const Tensor& self);
Tensor any(const Tensor& self, std::int64_t dim, bool keepdim = false);
Tensor any(const Tensor& self, IntArrayRef dim, bool keepdim = false);
Tensor all(const Tensor& self);
Tensor all(const Tensor& self, std::int64_t dim, bool keepdim = false);
Tensor all(const Tensor& self, IntArrayRef dim, bool keepdim = false);
/// |self - other| <= atol + rtol * |other| for every element (broadcast; equal infinities match, NaNs only with
/// equal_nan). self and other must have one dtype. Reads the answer back to the host.
bool allclose(const Tensor& self, const Tensor& other, double rtol = 1e-05, double atol = 1e-08,
              bool equal_nan = false);
/// Same shape and equal elements (a NaN equals nothing). Reads the answer back to the host.
bool equal(const Tensor& self, const Tensor& other);

/// Sums `a` down to `shape` (the reverse of broadcasting).
Tensor sum_to(const Tensor& a, const Shape& shape);

}  // namespace minidl
