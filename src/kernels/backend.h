#pragma once
// The primitive kernels every backend provides, declared once for both namespaces so the CPU (src/cpu) and
// CUDA (src/cuda) implementations cannot drift apart. All tensors are contiguous; outputs are allocated by
// the caller (the op layer in src/ops), which has already checked shapes, dtypes and devices.
#include <cstdint>

#include "kernels/elementwise.h"
#include "minidl/config.h"
#include "minidl/tensor.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/context.h"
#endif

#define MINIDL_BACKEND_KERNELS                                                                              \
  /* out (any strides, any dtype) = value converted to out's dtype. */                                      \
  void fill(Tensor& out, double value);                                                                     \
  /* Same-device copy of src into dst of the same shape: any strides on either side, any two dtypes. */      \
  void copy(const Tensor& src, Tensor& dst);                                                                \
  void arange(Tensor& out, double start, double step);                                                      \
  void uniform(Tensor& out, double low, double high);                                                       \
  void normal(Tensor& out, double mean, double stddev);                                                     \
  /* mask = the draws uniform(mask, 0, 1) would make, mapped by kernels::DropoutMask (0, or 1 / (1 - p)); */ \
  /* out = x * mask. */                                                                                     \
  void dropout(const Tensor& x, double p, Tensor& out, Tensor& mask);                                       \
  /* x and out: one shape and dtype, any strides (out may be x). */                                         \
  void unary(kernels::UnaryOp op, double alpha, const Tensor& x, Tensor& out);                              \
  /* a and b (one dtype, any strides) broadcast to out's shape; out has their dtype, or bool for the ops */  \
  /* that kernels::returns_bool, any strides, and may be a or b. */                                         \
  void binary(kernels::BinaryOp op, double alpha, const Tensor& a, const Tensor& b, Tensor& out);           \
  /* x viewed as (outer, n, inner) reduced over n into out (outer, inner); indices (int64) for Max. */      \
  void reduce(kernels::ReduceOp op, const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, \
              Tensor& out, Tensor* indices);                                                                \
  /* dx (outer, n, inner) = 0 except dx[o, indices[o, i], i] = grad[o, i]. */                              \
  void scatter_reduced(const Tensor& grad, const Tensor& indices, std::int64_t outer, std::int64_t n,       \
                       std::int64_t inner, Tensor& dx);                                                     \
  /* out[b] = op(a[b]) * op(b[b]) with a: (batch, m, k) or (batch, k, m) when trans_a, likewise b. */       \
  void matmul(const Tensor& a, const Tensor& b, Tensor& out, std::int64_t batch, std::int64_t m,            \
              std::int64_t n, std::int64_t k, bool trans_a, bool trans_b);                                  \
  /* Softmax (or log-softmax) over n of an (outer, n, inner) view, and its backward from the output y. */   \
  void softmax_forward(const Tensor& x, Tensor& y, std::int64_t outer, std::int64_t n, std::int64_t inner,  \
                       bool log);                                                                           \
  void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, std::int64_t outer, std::int64_t n,  \
                        std::int64_t inner, bool log);                                                    \
  /* losses[i] = -((1 - eps) * lp[i, t_i] + eps / C * sum_c lp[i, c]) for log-probabilities lp (N, C). */   \
  void cross_entropy_loss(const Tensor& log_probs, const Tensor& target, double smoothing, Tensor& losses);  \
  /* out (one element) = scale * sum_i losses[i]: the mean or sum reduction in the same pass. */              \
  void cross_entropy_loss_sum(const Tensor& log_probs, const Tensor& target, double smoothing, double scale, \
                              Tensor& out);                                                                 \
  /* dx = (from_logits ? exp(lp) : 0) - q, times scale * grad[i] (grad[0] for every i when grad has one     \
     element), where q = (1 - eps) onehot(t_i) + eps / C. */                                                 \
  void cross_entropy_backward(const Tensor& log_probs, const Tensor& target, const Tensor& grad,             \
                              double smoothing, bool from_logits, double scale, Tensor& dx);

namespace minidl {
namespace cpu {
MINIDL_BACKEND_KERNELS
}  // namespace cpu
#if MINIDL_CUDA_ENABLED
namespace gpu {
MINIDL_BACKEND_KERNELS
/// Copies bytes between any two devices (host<->device, device<->device); a copy to the host waits for it.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);
}  // namespace gpu
#endif
}  // namespace minidl

// Runs `body` on the backend of `device`: MINIDL_ON_BACKEND(t.device(), fill(out, 1.0)).
#if MINIDL_CUDA_ENABLED
#define MINIDL_ON_BACKEND(device, call) \
  do {                                  \
    if ((device).is_cuda()) {           \
      ::minidl::gpu::DeviceGuard guard_((device).index()); \
      ::minidl::gpu::call;              \
    } else {                            \
      ::minidl::cpu::call;              \
    }                                   \
  } while (0)
#else
#define MINIDL_ON_BACKEND(device, call)                                                             \
  do {                                                                                              \
    if ((device).is_cuda()) ::minidl::detail::throw_cuda_not_built();                               \
    ::minidl::cpu::call;                                                                            \
  } while (0)
#endif

namespace minidl {
namespace detail {
[[noreturn]] void throw_cuda_not_built();
}  // namespace detail
}  // namespace minidl
