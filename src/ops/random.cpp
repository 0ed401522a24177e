// The random ops: factories (rand, randn, uniform, normal, randint, randperm and their *_like forms), the
// samplers (multinomial, bernoulli) and the in-place draws (uniform_, normal_, bernoulli_, random_). Each checks
// its arguments and runs one backend kernel of the random family; a kernel writes contiguous memory of the dtypes
// it draws in, and a strided or other-typed destination gets the draws through one copy. Nothing is
// differentiable: the in-place draws record like fill_ (no gradient reaches the old value).
#include <cmath>
#include <limits>

#include "autograd/inplace.h"
#include "core/factory_options.h"
#include "kernels/random.h"
#include "ops/op_utils.h"

namespace minidl {

using detail::finish;
using detail::like;
using detail::plain;

namespace {

/// The significand bits of a floating dtype: the integers up to 2^digits are exact in it.
int digits(DType d) {
  switch (d) {
    case kFloat64:
      return 53;
    case kFloat16:
      return 11;
    case kBFloat16:
      return 8;
    default:
      return 24;
  }
}

/// The largest value of a dtype as a double (floating: the largest finite one).
double highest(DType d) {
  switch (d) {
    case kInt64:
      return static_cast<double>(std::numeric_limits<std::int64_t>::max());
    case kInt32:
      return std::numeric_limits<std::int32_t>::max();
    case kUInt8:
      return 255.0;
    case kBool:
      return 1.0;
    case kFloat16:
      return 65504.0;
    case kBFloat16:
      return 3.3895313892515355e38;
    case kFloat32:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
  }
}
/// The smallest value of a dtype as a double.
double lowest(DType d) {
  if (d == kUInt8 || d == kBool) return 0.0;
  return d == kInt64 || d == kInt32 ? -highest(d) - 1 : -highest(d);
}

/// The largest integer random_() draws into a dtype without bounds: the dtype's largest for integral dtypes,
/// 2^digits for floating ones (PyTorch's rule).
std::int64_t default_top(DType d) {
  if (d == kInt64) return std::numeric_limits<std::int64_t>::max();
  if (is_integral(d, true)) return static_cast<std::int64_t>(highest(d));
  return std::int64_t{1} << digits(d);
}

/// Throws ValueError unless v, op's argument `arg`, lies in what dtype d holds.
void check_holds(const char* op, const char* arg, std::int64_t v, DType d) {
  const double x = static_cast<double>(v);
  MINIDL_CHECK(x >= lowest(d) && x <= highest(d), ValueError, op, ": argument '", arg, "': expected a value within ",
               dtype_name(d), "'s range [", lowest(d), ", ", highest(d), "], found ", v);
}

/// The kernel's destination: t itself when contiguous and of dtype `kernel_dtype`, else a contiguous temporary
/// copied into t afterwards (converted; any strides).
template <class Draw>
void draw_into(Tensor& t, DType kernel_dtype, Draw draw) {
  if (t.numel() == 0) return;
  if (t.is_contiguous() && t.dtype() == kernel_dtype) return draw(t);
  Tensor tmp = empty(t.sizes(), TensorOptions(kernel_dtype).device(t.device()));
  draw(tmp);
  MINIDL_ON_BACKEND(t.device(), copy(tmp, t));
}

/// Integers uniform on [from, to_inclusive] into t (any dtype, any strides), both ends checked against its dtype.
void draw_integers(Tensor& t, const char* op, std::int64_t from, std::int64_t to_inclusive, const char* to_name) {
  check_holds(op, "from", from, t.dtype());
  check_holds(op, to_name, to_inclusive, t.dtype());
  // [from, to_inclusive] has to - from + 1 values; 2^64 of them wrap to 0, which the kernel reads as 2^64.
  const std::uint64_t range = static_cast<std::uint64_t>(to_inclusive) - static_cast<std::uint64_t>(from) + 1;
  draw_into(t, t.dtype(), [&](Tensor& out) { MINIDL_ON_BACKEND(out.device(), random_int(out, from, range)); });
}

/// An in-place draw, recorded for autograd as fill_ is.
template <class Fill>
Tensor& draw_in_place(Tensor& self, const char* op, const char* node, Fill fill) {
  ops::check_defined(self, op, "self");
  autograd::check_inplace_allowed(self, op);
  const autograd::InplaceRecord rec(self, op, node);
  fill();
  autograd::bump_version(self);
  rec.finish(self, [](const Tensor& g) { return std::vector<Tensor>{zeros_like(g)}; });
  return self;
}

void check_floating_dtype(const char* op, DType d) {
  MINIDL_CHECK(is_floating_point(d), TypeError, op, ": expected a floating dtype (float32, float64, bfloat16, ",
               "float16), found ", d);
}

/// Throws ValueError unless every element of the floating tensor p lies in [0, 1]. Only on the CPU: on a CUDA
/// device the check would wait for the stream, and the kernel saturates instead.
void check_probabilities(const Tensor& p, const char* op, const char* arg) {
  if (!p.is_cpu() || p.numel() == 0) return;
  const NoGradGuard no_grad;
  const Tensor inside = logical_and(ge(p, 0.0), le(p, 1.0));
  MINIDL_CHECK(!ops::any_true(logical_not(inside)), ValueError, op, ": argument '", arg,
               "': expected probabilities in [0, 1], found an element outside (or NaN)");
}

/// A random tensor drawn by `draw` (the backend's uniform or normal kernel, in float32 or float64); bfloat16 and
/// float16 ones are drawn in float32 and rounded, as PyTorch computes them in float.
template <class Draw>
Tensor random_floating(const char* op, const Shape& shape, TensorOptions o, Draw draw) {
  check_floating_dtype(op, o.dtype_);
  Tensor t = empty(shape, plain(o).dtype(is_reduced_floating_point(o.dtype_) ? kFloat32 : o.dtype_));
  if (t.numel() > 0) draw(t);
  if (t.dtype() != o.dtype_) t = t.to(o.dtype_);
  return finish(t, o);
}

/// The largest value of the 16-bit floating type D below x (a draw that rounds up to x is capped there).
template <class D>
double largest_below(double x) {
  D d(static_cast<float>(x));
  if (static_cast<double>(static_cast<float>(d)) < x) return static_cast<float>(d);
  // One step towards -infinity in the bit pattern (sign-magnitude).
  const std::uint16_t mag = d.bits & 0x7FFF;
  d = D::from_bits(static_cast<std::uint16_t>(mag == 0 ? 0x8001 : (d.bits & 0x8000 ? d.bits + 1 : d.bits - 1)));
  return static_cast<float>(d);
}

}  // namespace

// ---- floating factories ------------------------------------------------------------------------------------------

namespace {
/// uniform and rand (`op` names the one called).
Tensor uniform_tensor(const char* op, const Shape& shape, double low, double high, TensorOptions o) {
  MINIDL_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, ValueError, op,
               ": expected finite low <= high, found low=", low, " high=", high);
  Tensor t = random_floating(op, shape, o, [&](Tensor& u) { MINIDL_ON_BACKEND(u.device(), uniform(u, low, high)); });
  if (!is_reduced_floating_point(t.dtype()) || low == high || t.numel() == 0) return t;
  // Rounding to 16 bits can carry a draw just below high up to high: [low, high) stays half-open.
  const double top = t.dtype() == kBFloat16 ? largest_below<BFloat16>(high) : largest_below<Half>(high);
  const Tensor cap = full({}, top, TensorOptions(t.dtype()).device(t.device()));
  MINIDL_ON_BACKEND(t.device(), binary(kernels::BinaryOp::Minimum, 0.0, t, cap, t));
  return t;
}
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, TensorOptions o) {
  return uniform_tensor("uniform", shape, low, high, o);
}
Tensor rand(const Shape& shape, TensorOptions o) { return uniform_tensor("rand", shape, 0.0, 1.0, o); }

Tensor normal(double mean, double std, const Shape& shape, TensorOptions o) {
  MINIDL_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0, ValueError,
               "normal: expected a finite mean and a finite std >= 0, found mean=", mean, " std=", std);
  return random_floating("normal", shape, o, [&](Tensor& t) { MINIDL_ON_BACKEND(t.device(), normal(t, mean, std)); });
}

Tensor randn(const Shape& shape, TensorOptions o) {
  return random_floating("randn", shape, o, [&](Tensor& t) { MINIDL_ON_BACKEND(t.device(), normal(t, 0.0, 1.0)); });
}

Tensor rand_like(const Tensor& t, TensorOptions o) { return rand(t.sizes(), like(t, o)); }
Tensor randn_like(const Tensor& t, TensorOptions o) { return randn(t.sizes(), like(t, o)); }

// ---- integer factories -------------------------------------------------------------------------------------------

Tensor randint(std::int64_t high, const Shape& shape, TensorOptions o) { return randint(0, high, shape, o); }

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, TensorOptions o) {
  MINIDL_CHECK(low < high, ValueError, "randint: expected low < high, found low=", low, " high=", high);
  o = detail::with_default_dtype(o, kInt64);
  Tensor t = empty(shape, plain(o));
  draw_integers(t, "randint", low, high - 1, "high - 1");
  return finish(t, o);
}

Tensor randint_like(const Tensor& t, std::int64_t high, TensorOptions o) {
  return randint(high, t.sizes(), like(t, o));
}
Tensor randint_like(const Tensor& t, std::int64_t low, std::int64_t high, TensorOptions o) {
  return randint(low, high, t.sizes(), like(t, o));
}

Tensor randperm(std::int64_t n, TensorOptions o) {
  o = detail::with_default_dtype(o, kInt64);
  MINIDL_CHECK(n >= 0, ValueError, "randperm: argument 'n' must be >= 0, found ", n);
  MINIDL_CHECK(o.dtype_ != kBool, TypeError, "randperm: expected a numeric dtype, found bool");
  // Every value below n must be exact in the dtype.
  const double top = is_floating_point(o.dtype_) ? std::ldexp(1.0, digits(o.dtype_)) : highest(o.dtype_);
  MINIDL_CHECK(n == 0 || static_cast<double>(n - 1) <= top, ValueError, "randperm: argument 'n': expected at most ",
               top + 1, " for ", o.dtype_, " (every value below n exact), found ", n);
  Tensor perm = empty({n}, plain(o).dtype(kInt64));
  if (n > 0) MINIDL_ON_BACKEND(perm.device(), randperm(perm));
  return finish(perm.to(o.dtype_), o);
}

// ---- samplers ------------------------------------------------------------------------------------------------------

Tensor multinomial(const Tensor& input, std::int64_t num_samples, bool replacement) {
  ops::check_defined(input, "multinomial", "input");
  MINIDL_CHECK(input.dim() == 1 || input.dim() == 2, ValueError,
               "multinomial: argument 'input' must be 1-d or 2-d (one distribution per row), found ", input.dim(),
               "-d (shape ", shape_str(input.sizes()), ")");
  check_floating_dtype("multinomial", input.dtype());
  const std::int64_t n = input.size(-1);
  MINIDL_CHECK(num_samples > 0, ValueError, "multinomial: argument 'num_samples' must be > 0, found ", num_samples);
  MINIDL_CHECK(n > 0, ValueError, "multinomial: argument 'input' has no categories (its last dimension is 0)");
  MINIDL_CHECK(replacement || num_samples <= n, ValueError, "multinomial: argument 'num_samples' must be at most ",
               "the number of categories (", n, ") without replacement, found ", num_samples);
  MINIDL_CHECK(n <= (std::int64_t{1} << 24), ValueError, "multinomial: argument 'input' has ", n,
               " categories, more than 2^24");
  const Tensor w = ops::dense(input.detach()).view({input.dim() == 2 ? input.size(0) : 1, n});
  Tensor out = empty({w.size(0), num_samples}, TensorOptions(kInt64).device(input.device()));
  std::int64_t fault = -1;
  if (out.numel() > 0 && w.is_cuda()) {
#if MINIDL_CUDA_ENABLED
    gpu::DeviceGuard guard(w.device().index());
    fault = gpu::multinomial(w, replacement, out);
#endif
  } else if (out.numel() > 0) {
    fault = cpu::multinomial(w, replacement, out);
  }
  if (fault >= 0) {
    const std::string where = input.dim() == 2 ? detail::str(" in row ", fault / 2) : std::string();
    MINIDL_CHECK(fault % 2 != kernels::kBadWeight, ValueError, "multinomial: argument 'input': expected finite, ",
                 "non-negative weights, found a negative, infinite or NaN weight", where);
    throw ValueError(detail::str("multinomial: argument 'input': expected weights with a positive sum, found only ",
                                 "zeros", where));
  }
  return input.dim() == 2 ? out : out.view({num_samples});
}

Tensor bernoulli(const Tensor& input) {
  ops::check_defined(input, "bernoulli", "input");
  check_floating_dtype("bernoulli", input.dtype());
  check_probabilities(input, "bernoulli", "input");
  Tensor out = empty(input.sizes(), TensorOptions(input.dtype()).device(input.device()));
  const Tensor p = ops::dense(input.detach());
  if (out.numel() > 0) MINIDL_ON_BACKEND(out.device(), bernoulli(out, p, 0.0));
  return out;
}

Tensor bernoulli(const Tensor& input, double p) {
  ops::check_defined(input, "bernoulli", "input");
  MINIDL_CHECK(p >= 0 && p <= 1, ValueError, "bernoulli: argument 'p': expected 0 <= p <= 1, found ", p);
  Tensor out = empty(input.sizes(), TensorOptions(input.dtype()).device(input.device()));
  if (out.numel() > 0) MINIDL_ON_BACKEND(out.device(), bernoulli(out, Tensor(), p));
  return out;
}

// ---- methods -----------------------------------------------------------------------------------------------------

Tensor Tensor::bernoulli() const { return minidl::bernoulli(*this); }
Tensor Tensor::bernoulli(double p) const { return minidl::bernoulli(*this, p); }
Tensor Tensor::multinomial(std::int64_t num_samples, bool replacement) const {
  return minidl::multinomial(*this, num_samples, replacement);
}

Tensor& Tensor::uniform_(double from, double to) {
  ops::check_defined(*this, "uniform_", "self");
  check_floating_dtype("uniform_", dtype());
  MINIDL_CHECK(std::isfinite(from) && std::isfinite(to) && from <= to, ValueError,
               "uniform_: expected finite from <= to, found from=", from, " to=", to);
  return draw_in_place(*this, "uniform_", "Uniform_Backward", [&] {
    if (dtype() == kFloat32 || dtype() == kFloat64) {
      return draw_into(*this, dtype(), [&](Tensor& out) { MINIDL_ON_BACKEND(out.device(), uniform(out, from, to)); });
    }
    const Tensor u = minidl::uniform(sizes(), from, to, TensorOptions(dtype()).device(device()));
    MINIDL_ON_BACKEND(device(), copy(u, *this));
  });
}

Tensor& Tensor::normal_(double mean, double std) {
  ops::check_defined(*this, "normal_", "self");
  check_floating_dtype("normal_", dtype());
  MINIDL_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0, ValueError,
               "normal_: expected a finite mean and a finite std >= 0, found mean=", mean, " std=", std);
  return draw_in_place(*this, "normal_", "Normal_Backward", [&] {
    const DType drawn = is_reduced_floating_point(dtype()) ? kFloat32 : dtype();
    draw_into(*this, drawn, [&](Tensor& out) { MINIDL_ON_BACKEND(out.device(), normal(out, mean, std)); });
  });
}

Tensor& Tensor::bernoulli_(double p) {
  ops::check_defined(*this, "bernoulli_", "self");
  MINIDL_CHECK(p >= 0 && p <= 1, ValueError, "bernoulli_: argument 'p': expected 0 <= p <= 1, found ", p);
  return draw_in_place(*this, "bernoulli_", "Bernoulli_Backward", [&] {
    draw_into(*this, dtype(), [&](Tensor& out) { MINIDL_ON_BACKEND(out.device(), bernoulli(out, Tensor(), p)); });
  });
}

Tensor& Tensor::bernoulli_(const Tensor& p) {
  ops::check_defined(*this, "bernoulli_", "self");
  ops::check_defined(p, "bernoulli_", "p");
  MINIDL_CHECK(minidl::is_floating_point(p.dtype()), TypeError,
               "bernoulli_: argument 'p': expected a floating tensor, found ", p.dtype());
  Shape target;
  try {
    target = broadcast_shapes(p.sizes(), sizes(), "bernoulli_");
  } catch (const ValueError&) {
  }
  MINIDL_CHECK(target == sizes(), ValueError, "bernoulli_: argument 'p' of shape ", shape_str(p.sizes()),
               " does not broadcast to self's shape ", shape_str(sizes()));
  check_probabilities(p, "bernoulli_", "p");
  const Tensor probs = p.detach().to(device()).expand(sizes()).contiguous();
  return draw_in_place(*this, "bernoulli_", "Bernoulli_Backward", [&] {
    draw_into(*this, probs.dtype(), [&](Tensor& out) { MINIDL_ON_BACKEND(out.device(), bernoulli(out, probs, 0.0)); });
  });
}

Tensor& Tensor::random_(std::int64_t from, std::optional<std::int64_t> to) {
  ops::check_defined(*this, "random_", "self");
  MINIDL_CHECK(!to || from < *to, ValueError, "random_: expected 'from' < 'to', found from=", from, " to=", *to);
  const std::int64_t top = to ? *to - 1 : default_top(dtype());
  MINIDL_CHECK(from <= top, ValueError, "random_: expected 'from' <= ", top, " (the largest value ", dtype(),
               " draws without 'to'), found ", from);
  return draw_in_place(*this, "random_", "Random_Backward",
                       [&] { draw_integers(*this, "random_", from, top, to ? "to - 1" : "to"); });
}

Tensor& Tensor::random_(std::int64_t to) { return random_(0, to); }
Tensor& Tensor::random_() { return random_(0, std::nullopt); }

}  // namespace minidl
