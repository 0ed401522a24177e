#pragma once
// Tensor creation and random tensors, with LibTorch's names, overloads and argument order
// (full({2, 3}, 1.5, TensorOptions().dtype(kInt64).device(kCUDA))). Included by minidl/tensor.h.
//
// Random numbers come from the device's generator (core/generator.h): manual_seed(s) makes every call
// reproducible on each device. The CPU and a CUDA device draw different streams, so the same call gives other
// values there. On CUDA every random op runs on the library's stream without synchronising, so it can be
// captured in a CUDA graph (each replay draws fresh numbers); multinomial alone reads one status word back
// outside a capture, to report invalid weights.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "minidl/tensor.h"

namespace minidl {

// LibTorch's shorthands: zeros({2}, dtype(kInt64)), randn({3}, device(kCUDA).requires_grad()).
inline TensorOptions dtype(DType d) { return TensorOptions(d); }
inline TensorOptions device(Device d) { return TensorOptions(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

/// Uninitialised memory (never read it before writing).
Tensor empty(const Shape& size, TensorOptions options = {});
Tensor zeros(const Shape& size, TensorOptions options = {});
Tensor ones(const Shape& size, TensorOptions options = {});
/// Without a dtype in `options`, the value's kind picks it as LibTorch's: bool, int64, or float32.
Tensor full(const Shape& size, const Scalar& fill_value, TensorOptions options = {});

// *_like: a contiguous tensor of t's shape, with t's dtype and device unless `options` give others.
Tensor empty_like(const Tensor& t, TensorOptions options = {});
Tensor zeros_like(const Tensor& t, TensorOptions options = {});
Tensor ones_like(const Tensor& t, TensorOptions options = {});
Tensor full_like(const Tensor& t, const Scalar& fill_value, TensorOptions options = {});
Tensor rand_like(const Tensor& t, TensorOptions options = {});
Tensor randn_like(const Tensor& t, TensorOptions options = {});
Tensor randint_like(const Tensor& t, std::int64_t high, TensorOptions options = {});
Tensor randint_like(const Tensor& t, std::int64_t low, std::int64_t high, TensorOptions options = {});

/// start, start + step, ... below end (above it for a negative step); `end` alone starts at 0 by 1. Without a
/// dtype in `options`: int64 when start, end and step are all integers, else float32. An integral dtype
/// truncates start and step to integers first (PyTorch's rule).
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options = {});
/// `steps` values evenly spaced from start to end, both included (float32 unless `options` say otherwise; not
/// bool). Computed as PyTorch's: the first half from start, the second from end, so both ends are exact.
Tensor linspace(const Scalar& start, const Scalar& end, std::int64_t steps, TensorOptions options = {});
/// base ^ linspace(start, end, steps), computed in double.
Tensor logspace(const Scalar& start, const Scalar& end, std::int64_t steps, double base = 10.0,
                TensorOptions options = {});
/// The n x n (or n x m) identity matrix.
Tensor eye(std::int64_t n, TensorOptions options = {});
Tensor eye(std::int64_t n, std::int64_t m, TensorOptions options = {});

/// A tensor over memory the caller owns (not copied, not freed: LibTorch's from_blob). `data` must lie on
/// options' device and hold the elements the sizes and strides (in elements; contiguous when not given) reach;
/// it must outlive the tensor and every view of it. With a deleter, deleter(data) runs when the last of them
/// goes.
Tensor from_blob(void* data, const Shape& sizes, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& sizes, const std::function<void(void*)>& deleter, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, const std::function<void(void*)>& deleter,
                 TensorOptions options = {});

/// Copies host values into a new tensor of the given shape (dtype follows T unless options say otherwise).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                   TensorOptions options = TensorOptions(dtype_of<T>::value));
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});

/// Seeds the CPU generator and every CUDA generator; runs become reproducible on each device.
void manual_seed(std::uint64_t seed);
/// Uniform on [0, 1) and standard normal (floating dtypes; bfloat16 and float16 drawn in float32 and rounded).
Tensor rand(const Shape& size, TensorOptions options = {});
Tensor randn(const Shape& size, TensorOptions options = {});
/// Uniform on [low, high).
Tensor uniform(const Shape& size, double low, double high, TensorOptions options = {});
/// Normal with mean `mean` and standard deviation `std` (>= 0).
Tensor normal(double mean, double std, const Shape& size, TensorOptions options = {});
/// Integers uniform on [low, high) (high > low; both within the dtype's range), int64 unless `options` say
/// otherwise; every dtype.
Tensor randint(std::int64_t high, const Shape& size, TensorOptions options = {});
Tensor randint(std::int64_t low, std::int64_t high, const Shape& size, TensorOptions options = {});
/// A random permutation of 0, ..., n - 1 (int64 unless `options` say otherwise; n must fit the dtype exactly).
Tensor randperm(std::int64_t n, TensorOptions options = {});
/// num_samples category indices (int64) per row of `input` (1-d: categories; 2-d: one distribution per row),
/// drawn with probability proportional to the weights, which must be finite and >= 0 with a positive sum per
/// row. Without replacement a row's samples are distinct (num_samples <= categories); categories of weight 0
/// come only after all the others.
Tensor multinomial(const Tensor& input, std::int64_t num_samples, bool replacement = false);
/// 0 or 1 (input's dtype and shape) with the probability in each element of `input` (floating, in [0, 1]); with
/// p: input's dtype and shape, each 1 with probability p.
Tensor bernoulli(const Tensor& input);
Tensor bernoulli(const Tensor& input, double p);

}  // namespace minidl
