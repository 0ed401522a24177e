#include "minidl/nn/init.h"

#include <cmath>

#include "minidl/autograd.h"
#include "minidl/ops.h"

namespace minidl {
namespace nn {
namespace init {
namespace {
void check_target(const Tensor& t, const char* fn) {
  MINIDL_CHECK(t.defined(), ValueError, "init::", fn, ": tensor is undefined");
  MINIDL_CHECK(is_floating_point(t.dtype()), TypeError, "init::", fn, ": expected a floating tensor, found ", t.dtype(),
               " (shape ", shape_str(t.sizes()), ")");
}
Tensor fill_from(Tensor t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values);
  return t;
}
TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }
}  // namespace

std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  MINIDL_CHECK(t.dim() >= 2, ValueError, "init: fan in and fan out cannot be computed for a tensor with fewer than 2 "
               "dimensions (shape ", shape_str(t.sizes()), ")");
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity n, double param) {
  switch (n) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid: return 1.0;
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1.0 + param * param));
  }
  return 1.0;
}

Tensor uniform_(Tensor t, double low, double high) {
  check_target(t, "uniform_");
  return fill_from(t, uniform(t.sizes(), low, high, like(t)));
}
Tensor normal_(Tensor t, double mean, double std) {
  check_target(t, "normal_");
  MINIDL_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0.0, ValueError,
               "init::normal_: expected a finite mean and a finite std >= 0, found mean=", mean, " std=", std);
  return fill_from(t, add(mul(randn(t.sizes(), like(t)), std), mean));
}
Tensor constant_(Tensor t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor zeros_(Tensor t) { return constant_(t, 0.0); }
Tensor ones_(Tensor t) { return constant_(t, 1.0); }

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity n) {
  const auto fans = calculate_fan_in_and_fan_out(t);
  const double fan = static_cast<double>(mode == FanMode::FanIn ? fans.first : fans.second);
  MINIDL_CHECK(fan > 0, ValueError, "init: zero fan for a tensor of shape ", shape_str(t.sizes()));
  return calculate_gain(n, a) / std::sqrt(fan);
}
double xavier_std(const Tensor& t, double gain) {
  const auto fans = calculate_fan_in_and_fan_out(t);
  return gain * std::sqrt(2.0 / static_cast<double>(fans.first + fans.second));
}
}  // namespace

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity n) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, n);
  return uniform_(t, -bound, bound);
}
Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity n) {
  return normal_(t, 0.0, kaiming_std(t, a, mode, n));
}
Tensor xavier_uniform_(Tensor t, double gain) {
  const double bound = std::sqrt(3.0) * xavier_std(t, gain);
  return uniform_(t, -bound, bound);
}
Tensor xavier_normal_(Tensor t, double gain) { return normal_(t, 0.0, xavier_std(t, gain)); }

}  // namespace init
}  // namespace nn
}  // namespace minidl
