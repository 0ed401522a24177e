// Reductions composed from others: nansum (a where, then sum) and the var_mean / std_mean pairs (var or std, then
// mean), so each has their dtype rules, devices and gradients.
#include "minidl/joining.h"
#include "minidl/math.h"
#include "minidl/reduction.h"
#include "ops/op_utils.h"

namespace minidl {

std::tuple<Tensor, Tensor> var_mean(const Tensor& self, IntArrayRef dim, bool unbiased, bool keepdim) {
  return {var(self, dim, unbiased, keepdim), mean(self, dim, keepdim)};
}
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, IntArrayRef dim, const std::optional<Scalar>& correction,
                                    bool keepdim) {
  return {var(self, dim, correction, keepdim), mean(self, dim, keepdim)};
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, IntArrayRef dim, bool unbiased, bool keepdim) {
  return {std(self, dim, unbiased, keepdim), mean(self, dim, keepdim)};
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, IntArrayRef dim, const std::optional<Scalar>& correction,
                                    bool keepdim) {
  return {std(self, dim, correction, keepdim), mean(self, dim, keepdim)};
}

namespace {
Tensor without_nan(const Tensor& self) {
  ops::check_defined(self, "nansum", "self");
  return is_floating_point(self.dtype()) ? where(isnan(self), Scalar(0), self) : self;
}
}  // namespace

Tensor nansum(const Tensor& self, std::optional<DType> dtype) { return sum(without_nan(self), dtype); }
Tensor nansum(const Tensor& self, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  return sum(without_nan(self), dim, keepdim, dtype);
}

}  // namespace minidl
