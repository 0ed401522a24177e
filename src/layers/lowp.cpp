// The generic 16-bit path of the layer ops (layers/lowp.h).
#include "layers/lowp.h"

#include "kernels/backend.h"
#include "ops/op_utils.h"

namespace minidl {
namespace layers {

namespace {
bool is_16bit(DType d) { return d == kBFloat16 || d == kFloat16; }
}  // namespace

bool needs_float_path(const Tensor& x, bool gpu_kernel) {
  if (!is_16bit(x.dtype())) return false;
  return !(gpu_kernel && x.device().is_cuda() && MINIDL_CUDA_ENABLED);
}

Tensor widen(const Tensor& t) { return t.defined() && is_16bit(t.dtype()) ? t.to(kFloat32) : t; }

void check_param_dtype(const Tensor& input, const Tensor& param, const char* op, const char* name) {
  if (!param.defined()) return;
  MINIDL_CHECK(param.device() == input.device(), TypeError, op, ": ", name, " is on ", param.device(),
               ", input on ", input.device());
  const bool ok = param.dtype() == input.dtype() || (is_16bit(input.dtype()) && param.dtype() == kFloat32);
  MINIDL_CHECK(ok, TypeError, op, ": ", name, " must have the input's dtype (", dtype_name(input.dtype()),
               is_16bit(input.dtype()) ? ") or float32" : ")", ", found ", dtype_name(param.dtype()));
}

}  // namespace layers

namespace detail {
void throw_no_cpu_lowp_kernel(const char* kernel, DType dtype) {
  throw TypeError(str(kernel, ": internal error, a ", dtype_name(dtype),
                      " tensor reached a CPU layer kernel (the op must take layers::needs_float_path)"));
}
}  // namespace detail
}  // namespace minidl
