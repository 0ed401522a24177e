#pragma once
// The catalogue of backend kernels: every kernel the CPU (src/cpu, namespace minidl::cpu) and CUDA (src/cuda,
// namespace minidl::gpu) backends provide, declared once for both namespaces so the two cannot drift apart. The
// sections follow the op families; a family's kernels live in files of the same name on both backends
// (src/cpu/<family>.cpp, src/cuda/<family>.cu), except where a section says otherwise. At the end, the one routing
// point: MINIDL_ON_BACKEND and MINIDL_LAYER_KERNEL send a call to the backend of a tensor's device.
//
// Tensor kernels: all tensors are contiguous; outputs are allocated by the caller (the op layer in src/ops),
// which has already checked shapes, dtypes and devices. Layer kernels (conv2d, pool2d, batch_norm) take raw,
// contiguous buffers instead (device pointers on the GPU); T is float or double, and the parameter structs
// (kernels/params.h) must have been finalize()d. On the GPU all work is queued on gpu::stream().
//
// This header includes no CUDA header: the routing needs only gpu::DeviceGuard (cuda/device_guard.h).
#include <cstdint>
#include <vector>

#include "kernels/dispatch_types.h"
#include "kernels/elementwise.h"
#include "kernels/optim_update.h"
#include "kernels/params.h"
#include "kernels/reduce.h"
#include "kernels/scan.h"
#include "minidl/config.h"
#include "minidl/tensor.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/device_guard.h"
#endif

// ---- copy: src/cpu/copy.cpp, src/cuda/copy.cu -------------------------------------------------------------
#define MINIDL_COPY_KERNELS                                                                                          \
  /* out (any strides, any dtype) = value converted to out's dtype. */                                               \
  void fill(Tensor& out, double value);                                                                              \
  /* Same-device copy of src into dst of the same shape: any strides on either side, any two dtypes. */              \
  void copy(const Tensor& src, Tensor& dst);                                                                         \
  void arange(Tensor& out, double start, double step);

// ---- random: src/cpu/random.cpp, src/cuda/random.cu; dropout in dropout.cpp, dropout.cu -------------------
#define MINIDL_RANDOM_KERNELS                                                                                        \
  void uniform(Tensor& out, double low, double high);                                                                \
  void normal(Tensor& out, double mean, double stddev);                                                              \
  /* mask = the draws uniform(mask, 0, 1) would make, mapped by kernels::DropoutMask (0, or 1 / (1 - p)); */         \
  /* out = x * mask. */                                                                                              \
  void dropout(const Tensor& x, double p, Tensor& out, Tensor& mask);

// ---- elementwise: src/cpu/elementwise.cpp, src/cuda/elementwise.cu (functors in kernels/elementwise.h) ------
#define MINIDL_ELEMENTWISE_KERNELS                                                                                   \
  /* x and out: one shape and dtype, any strides (out may be x). */                                                  \
  void unary(kernels::UnaryOp op, double alpha, const Tensor& x, Tensor& out);                                       \
  /* a and b (one dtype, any strides) broadcast to out's shape; out has their dtype, or bool for the ops that */     \
  /* kernels::returns_bool, any strides, and may be a or b. */                                                       \
  void binary(kernels::BinaryOp op, double alpha, const Tensor& a, const Tensor& b, Tensor& out);

// ---- reduce: src/cpu/reduce.cpp, src/cuda/reduce.cu (the formulas: kernels/reduce.h) ----------------------
#define MINIDL_REDUCE_KERNELS                                                                                        \
  /* x (outer, n, inner), any dtype, reduced over n by `op` (with its params) into out (outer, inner) of a */        \
  /* dtype that op's reducer writes (kernels/reduce.h: the result's, or a pass's intermediate); `indices` */        \
  /* (int64, may be null) receive the positions of the maxima / minima of Max and Min. n == 0 gives the op's */    \
  /* value of no elements. */                                                                                       \
  void reduce(kernels::ReduceOp op, const kernels::ReduceParams& params, const Tensor& x, std::int64_t outer,       \
              std::int64_t n, std::int64_t inner, Tensor& out, Tensor* indices);                                     \
  /* dx (outer, n, inner) = 0 except dx[o, indices[o, j, i], i] = grad[o, j, i], for grad and indices */             \
  /* (outer, k, inner) whose positions differ along j (the backward of max, min, sort and topk). */                  \
  void scatter_reduced(const Tensor& grad, const Tensor& indices, std::int64_t outer, std::int64_t n,                \
                       std::int64_t inner, Tensor& dx);

// ---- scan: src/cpu/scan.cpp, src/cuda/scan.cu (kernels/scan.h) ------------------------------------------
#define MINIDL_SCAN_KERNELS                                                                                          \
  /* out (outer, n, inner) = the inclusive running sum or product of x along n (from the last element when */       \
  /* reverse), accumulated as kernels/reduce.h's sums; out has x's dtype (floating) or int64. */                     \
  void scan(kernels::ScanOp op, bool reverse, const Tensor& x, std::int64_t outer, std::int64_t n,                   \
            std::int64_t inner, Tensor& out);                                                                        \
  /* dx = the gradient of cumprod(x) along n given its output's gradient grad (floating; exact with zeros). */      \
  void cumprod_backward(const Tensor& x, const Tensor& grad, std::int64_t outer, std::int64_t n,                     \
                        std::int64_t inner, Tensor& dx);

// ---- sort: src/cpu/sort.cpp, src/cuda/sort.cu (the order: kernels/sort_keys.h) -------------------------------
// Rows of length n of a contiguous (rows, n) x of any dtype, ordered as PyTorch: NaN above every number, -0 equal
// to +0. values (x's dtype) and indices (int64) are (rows, n) for sort, (rows, k) for topk.
#define MINIDL_SORT_KERNELS                                                                                          \
  /* Each row stably sorted, ascending or descending (equal elements keep their order). */                          \
  void sort(const Tensor& x, std::int64_t rows, std::int64_t n, bool descending, Tensor& values, Tensor& indices);  \
  /* The k (<= n) largest (or smallest) of each row, ties to the lower index; in order when sorted, else in */      \
  /* an order of the backend's. */                                                                                  \
  void topk(const Tensor& x, std::int64_t rows, std::int64_t n, std::int64_t k, bool largest, bool sorted,           \
            Tensor& values, Tensor& indices);

// ---- matmul: src/cpu/matmul.cpp, src/cuda/matmul.cu -----------------------------------------------------
#define MINIDL_MATMUL_KERNELS                                                                                        \
  /* out[b] = op(a[b]) * op(b[b]) with a: (batch, m, k) or (batch, k, m) when trans_a, likewise b. */                \
  void matmul(const Tensor& a, const Tensor& b, Tensor& out, std::int64_t batch, std::int64_t m,                     \
              std::int64_t n, std::int64_t k, bool trans_a, bool trans_b);

// ---- softmax: src/cpu/softmax.cpp, src/cuda/softmax.cu --------------------------------------------------
#define MINIDL_SOFTMAX_KERNELS                                                                                       \
  /* Softmax (or log-softmax) over n of an (outer, n, inner) view, and its backward from the output y. */            \
  void softmax_forward(const Tensor& x, Tensor& y, std::int64_t outer, std::int64_t n, std::int64_t inner,           \
                       bool log);                                                                                    \
  void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, std::int64_t outer, std::int64_t n,           \
                        std::int64_t inner, bool log);

// ---- cross_entropy: src/cpu/cross_entropy.cpp, src/cuda/cross_entropy.cu --------------------------------
#define MINIDL_CROSS_ENTROPY_KERNELS                                                                                 \
  /* losses[i] = -((1 - eps) * lp[i, t_i] + eps / C * sum_c lp[i, c]) for log-probabilities lp (N, C). */            \
  void cross_entropy_loss(const Tensor& log_probs, const Tensor& target, double smoothing, Tensor& losses);          \
  /* out (one element) = scale * sum_i losses[i]: the mean or sum reduction in the same pass. */                     \
  void cross_entropy_loss_sum(const Tensor& log_probs, const Tensor& target, double smoothing, double scale,         \
                              Tensor& out);                                                                          \
  /* dx = (from_logits ? exp(lp) : 0) - q, times scale * grad[i] (grad[0] for every i when grad has one */           \
  /* element), where q = (1 - eps) onehot(t_i) + eps / C. */                                                         \
  void cross_entropy_backward(const Tensor& log_probs, const Tensor& target, const Tensor& grad,                     \
                              double smoothing, bool from_logits, double scale, Tensor& dx);

// ---- gather: src/cpu/gather.cpp, src/cuda/gather.cu ------------------------------------------------------
// Row gather and scatter-add along the middle dimension of an (outer, n, inner) view: the kernels behind
// index_select and its backward. `index` is int64 with k elements.
#define MINIDL_GATHER_KERNELS                                                                                        \
  /* out (outer, k, inner)[o, j, i] = src (outer, n, inner)[o, index[j], i]; every index must lie in [0, n). */      \
  void index_select(const Tensor& src, const Tensor& index, Tensor& out, std::int64_t outer, std::int64_t n,         \
                    std::int64_t inner);                                                                             \
  /* dst (outer, n, inner)[o, index[j], i] += src (outer, k, inner)[o, j, i], repeated rows summed in the order */   \
  /* of j (deterministic: no atomics); every index must lie in [0, n). Floating dtypes only. */                      \
  void index_add(const Tensor& src, const Tensor& index, Tensor& dst, std::int64_t outer, std::int64_t n,            \
                 std::int64_t inner);                                                                                \
  /* The smallest position j with index[j] outside [0, n), or -1 when all are in range. On CUDA this reads */        \
  /* the answer back, so it waits for the stream. */                                                                 \
  std::int64_t first_out_of_range(const Tensor& index, std::int64_t n);

// ---- optimizer: src/cpu/optim_kernels.cpp, src/cuda/optim_kernels.cu ------------------------------------
// The update rules of kernels/optim_update.h applied to every slot of a step. The CPU updates each parameter in
// one pass split over the thread pool. CUDA launches, per group of up to a few dozen parameters of one dtype, a
// one-block kernel that increments the group's step counters and one update kernel for the whole group; pointers
// and sizes travel by value in the kernel arguments. Nothing is allocated, copied from the host or synchronised
// there, so a step can be captured in a CUDA graph, and replaying it advances the device-side step counters.
#define MINIDL_OPTIM_KERNELS                                                                                         \
  /* One optimizer step for every slot: increments the slot's step counter scalars[1 + index], then updates */       \
  /* its parameter and state in place. `scalars` (float64) holds the learning rate at [0] and the step */            \
  /* counters. On CUDA every tensor (and `scalars`) is on the current device. */                                     \
  void optim_step(const kernels::OptimHyper& hyper, const std::vector<kernels::OptimSlot>& slots,                    \
                  Tensor& scalars);                                                                                  \
  /* Writes *lr into scalars[0]. On CUDA: queues an asynchronous copy, which reads *lr when it runs, so *lr */       \
  /* must outlive it (the optimizer passes its own member). */                                                       \
  void optim_set_lr(Tensor& scalars, const double* lr);

// ---- conv2d: src/cpu/conv2d.cpp (+ conv2d_winograd.cpp), src/cuda/conv2d.cpp (+ the conv2d_*.cu kernels) ---
// x N x C x H x W, w K x C/groups x R x S, y N x K x P x Q, bias and dbias K values.
//   conv2d_forward:          y = act(conv(x, w) + bias); `bias` may be null; `act` None or Relu (the fused
//                            nn::ConvReLU2d), applied by the kernel that writes y.
//   conv2d_backward_input:   dx = gradient w.r.t. x given dy; overwrites dx.
//   conv2d_backward_weight:  dw (and dbias when not null) = gradients w.r.t. the weight and bias; overwrites them.
//                            The CPU sums over the batch in an order fixed by the thread count: repeated calls
//                            agree bitwise.
#define MINIDL_CONV2D_KERNELS                                                                                        \
  template <class T>                                                                                                 \
  void conv2d_forward(const kernels::Conv2dParams& p, const T* x, const T* w, const T* bias, T* y,                   \
                      kernels::Activation act);                                                                      \
  template <class T>                                                                                                 \
  void conv2d_backward_input(const kernels::Conv2dParams& p, const T* dy, const T* w, T* dx);                        \
  template <class T>                                                                                                 \
  void conv2d_backward_weight(const kernels::Conv2dParams& p, const T* x, const T* dy, T* dw, T* dbias);

// ---- pool2d: src/cpu/pool2d.cpp, src/cuda/pool2d.cu ------------------------------------------------------
// x N x C x H x W, y N x C x P x Q.
//   max_pool2d_forward:   max over each window, padding counting as -inf. `indices` (may be null on the GPU)
//                         receive per output the flat index h * W + w of the chosen element in its input plane:
//                         the first maximum in row-major window order, or the last NaN if the window holds any
//                         (PyTorch's CPU rule).
//   max_pool2d_backward:  dx = dy scattered onto those indices, summed where windows overlap; overwrites dx.
//                         The CPU throws IndexError for an index outside its plane.
//   avg_pool2d_forward:   mean over each window, dividing by kh * kw including padded cells (count_include_pad).
//   avg_pool2d_backward:  its gradient; overwrites dx.
#define MINIDL_POOL2D_KERNELS                                                                                        \
  template <class T>                                                                                                 \
  void max_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y, std::int64_t* indices);                  \
  template <class T>                                                                                                 \
  void max_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx);         \
  template <class T>                                                                                                 \
  void avg_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y);                                         \
  template <class T>                                                                                                 \
  void avg_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, T* dx);

// ---- batch_norm: src/cpu/batch_norm.cpp, src/cuda/batch_norm.cu ------------------------------------------
// Over (N, C, HW), statistics per channel; per-channel arrays hold C values; a null gamma means 1 and a null beta
// 0 (affine off), a null dgamma / dbeta that those gradients are not wanted. PyTorch's semantics:
// y = (x - mean) * invstd * gamma + beta, invstd = 1 / sqrt(var + eps) with the biased batch variance.
//   batch_norm_forward_train: writes y and save_mean, save_invstd (for the backward) and, when not null,
//                             moves running_mean / running_var by `momentum` towards the batch mean and the
//                             unbiased batch variance. Needs N * HW > 1 (ValueError otherwise).
//   batch_norm_forward_eval:  normalises with the running statistics.
//   batch_norm_backward:      training-mode gradient from the saved statistics; overwrites dx, dgamma, dbeta.
#define MINIDL_BATCH_NORM_KERNELS                                                                                    \
  template <class T>                                                                                                 \
  void batch_norm_forward_train(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta,        \
                                T* y, T* save_mean, T* save_invstd, T* running_mean, T* running_var);                \
  template <class T>                                                                                                 \
  void batch_norm_forward_eval(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta,         \
                               const T* running_mean, const T* running_var, T* y);                                   \
  template <class T>                                                                                                 \
  void batch_norm_backward(const kernels::BatchNormParams& p, const T* x, const T* dy, const T* gamma,               \
                           const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta);

// Every family, declared once for each backend.
#define MINIDL_BACKEND_KERNELS                                                                \
  MINIDL_COPY_KERNELS MINIDL_RANDOM_KERNELS MINIDL_ELEMENTWISE_KERNELS MINIDL_REDUCE_KERNELS  \
  MINIDL_SCAN_KERNELS MINIDL_SORT_KERNELS                                                     \
  MINIDL_MATMUL_KERNELS MINIDL_SOFTMAX_KERNELS MINIDL_CROSS_ENTROPY_KERNELS                   \
  MINIDL_GATHER_KERNELS MINIDL_OPTIM_KERNELS MINIDL_CONV2D_KERNELS MINIDL_POOL2D_KERNELS      \
  MINIDL_BATCH_NORM_KERNELS

namespace minidl {
namespace cpu {
MINIDL_BACKEND_KERNELS
}  // namespace cpu
#if MINIDL_CUDA_ENABLED
namespace gpu {
MINIDL_BACKEND_KERNELS
/// Copies bytes between any two devices (host<->device, device<->device); a copy to the host waits for it.
/// (src/cuda/copy.cu; the GPU backend only.)
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);
}  // namespace gpu
#endif
}  // namespace minidl

#undef MINIDL_COPY_KERNELS
#undef MINIDL_RANDOM_KERNELS
#undef MINIDL_ELEMENTWISE_KERNELS
#undef MINIDL_REDUCE_KERNELS
#undef MINIDL_SCAN_KERNELS
#undef MINIDL_SORT_KERNELS
#undef MINIDL_MATMUL_KERNELS
#undef MINIDL_SOFTMAX_KERNELS
#undef MINIDL_CROSS_ENTROPY_KERNELS
#undef MINIDL_GATHER_KERNELS
#undef MINIDL_OPTIM_KERNELS
#undef MINIDL_CONV2D_KERNELS
#undef MINIDL_POOL2D_KERNELS
#undef MINIDL_BATCH_NORM_KERNELS
#undef MINIDL_BACKEND_KERNELS

// ---- routing --------------------------------------------------------------------------------------------
// Runs `call` on the backend of `device`: MINIDL_ON_BACKEND(t.device(), fill(out, 1.0)).
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

// Routes a layer kernel (templated on the element type) to the tensor's device and dtype:
// MINIDL_LAYER_KERNEL(x, conv2d_forward, p, layers::ptr<T>(x), ...). Inside the call `T` is the element type.
#define MINIDL_LAYER_KERNEL(tensor, name, ...)                                       \
  ::minidl::kernels::dispatch_floating((tensor).dtype(), #name, [&](auto tag_) {    \
    using T = typename decltype(tag_)::type;                                        \
    MINIDL_ON_BACKEND((tensor).device(), name<T>(__VA_ARGS__));                     \
  })

namespace minidl {
namespace detail {
[[noreturn]] void throw_cuda_not_built();
}  // namespace detail
}  // namespace minidl
