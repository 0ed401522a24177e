#pragma once
// The catalogue of backend kernels: every kernel the CPU (src/cpu, namespace minidl::cpu) and CUDA (src/cuda,
// namespace minidl::gpu) backends provide, declared once for both namespaces so the two cannot drift apart. The
// sections follow the op families; a family's kernels live in files of the same name on both backends
// (src/cpu/<family>.cpp, src/cuda/<family>.cu), except where a section says otherwise. At the end, the one routing
// point: MINIDL_ON_BACKEND and MINIDL_LAYER_KERNEL send a call to the backend of a tensor's device.
//
// Tensor kernels: all tensors are contiguous; outputs are allocated by the caller (the op layer in src/ops),
// which has already checked shapes, dtypes and devices. Layer kernels (conv2d, pool2d, batch_norm) take raw,
// contiguous buffers instead (device pointers on the GPU); T is float or double (for the GPU kernels that
// MINIDL_LAYER_KERNEL_LOWP routes also bfloat16 / float16), and the parameter structs (kernels/params.h) must
// have been finalize()d. On the GPU all work is queued on gpu::stream().
// This header includes no CUDA header: the routing needs only gpu::DeviceGuard (cuda/device_guard.h).
#include <cstdint>
#include <vector>

#include "kernels/clip_grad.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"
#include "kernels/elementwise.h"
#include "kernels/index_geometry.h"
#include "kernels/matmul_layout.h"
#include "kernels/normalization.h"
#include "kernels/optim_update.h"
#include "kernels/params.h"
#include "kernels/reduce.h"
#include "kernels/rnn_cell.h"
#include "kernels/scan.h"
#include "kernels/upsample.h"
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
  void copy(const Tensor& src, Tensor& dst);

// ---- range: src/cpu/range.cpp, src/cuda/range.cu (the values: kernels/range.h) ---------------------------------
#define MINIDL_RANGE_KERNELS                                                                                         \
  /* out (contiguous, any dtype)[i] = start + step * i, computed in double. */                                       \
  void arange(Tensor& out, double start, double step);                                                               \
  /* out (contiguous, not bool): out.numel() >= 2 values from start to end (kernels::Linspace). */                   \
  void linspace(Tensor& out, double start, double end);                                                              \
  /* out (contiguous, not bool)[i] = base ^ (the i-th of out.numel() >= 2 exponents from start to end). */           \
  void logspace(Tensor& out, double start, double end, double base);

// ---- random: src/cpu/random.cpp, src/cuda/random.cu (kernels/random.h); dropout in dropout.cpp, dropout.cu ----
#define MINIDL_RANDOM_KERNELS                                                                                        \
  /* out (contiguous float32 / float64): uniform on [low, high), or normal(mean, stddev). */                         \
  void uniform(Tensor& out, double low, double high);                                                                \
  void normal(Tensor& out, double mean, double stddev);                                                              \
  /* out (contiguous, any dtype)[i] = low + an integer uniform on [0, range) (range 0: 2^64), converted. */          \
  void random_int(Tensor& out, std::int64_t low, std::uint64_t range);                                               \
  /* out (contiguous, any dtype)[i] = 1 with probability p[i], else 0; p of out's dtype (floating) and numel, */     \
  /* contiguous, or undefined for the probability p_scalar. p outside [0, 1] saturates; NaN gives 0. */              \
  void bernoulli(Tensor& out, const Tensor& p, double p_scalar);                                                     \
  /* out (contiguous int64 of n elements) = a uniformly random permutation of 0, ..., n - 1. */                      \
  void randperm(Tensor& out);                                                                                        \
  /* out (rows, k) int64 = k category indices per row of weights (rows, n) (contiguous, floating; n >= 1, */         \
  /* k >= 1, k <= n without replacement). Returns -1, or for the first row */                                        \
  /* with a negative, infinite or NaN weight or none positive kernels::multinomial_fault (its samples are then */    \
  /* unspecified, in [0, n)). CUDA reads that word back, waiting for the stream, except during a capture, */         \
  /* where it returns -1 unchecked. */                                                                               \
  std::int64_t multinomial(const Tensor& weights, bool replacement, Tensor& out);                                    \
  /* mask = the draws uniform(mask, 0, 1) would make, mapped by kernels::DropoutMask (0, or 1 / (1 - p)); */         \
  /* out = x * mask. */                                                                                              \
  void dropout(const Tensor& x, double p, Tensor& out, Tensor& mask);

// ---- elementwise: src/cpu/elementwise.cpp, src/cuda/elementwise.cu (functors in kernels/elementwise.h) ------
// The inputs share one dtype and any strides, and broadcast to out's shape; out has their dtype, or bool for
// the ops that kernels::returns_bool, any strides, and may be one of the inputs. A dtype the op does not run on
// is a TypeError (kernels::visit_*).
#define MINIDL_ELEMENTWISE_KERNELS                                                                                   \
  /* x has out's shape. */                                                                                           \
  void unary(kernels::UnaryOp op, const kernels::OpScalars& s, const Tensor& x, Tensor& out);                        \
  void binary(kernels::BinaryOp op, const kernels::OpScalars& s, const Tensor& a, const Tensor& b, Tensor& out);     \
  void ternary(kernels::TernaryOp op, const kernels::OpScalars& s, const Tensor& a, const Tensor& b,                 \
               const Tensor& c, Tensor& out);

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

// ---- matmul: src/cpu/matmul.cpp, src/cuda/matmul.cu (operand geometry: kernels/matmul_layout.h) ---------
#define MINIDL_MATMUL_KERNELS                                                                                        \
  /* out (batch, m, n), dense, = op(a[i]) * op(b[i]) for the operands `layout` places from a's and b's first */     \
  /* elements (strided or broadcast batches, row strides, transposes); one dtype throughout. The CPU takes */        \
  /* float32, float64, bfloat16, float16 (both accumulated in float32, the result rounded once), int64, */        \
  /* int32 and uint8 (integer products wrap); CUDA float32, float64, bfloat16 and float16 (cuBLASLt, float32 */    \
  /* accumulation). */                                                                                               \
  void matmul(const Tensor& a, const Tensor& b, Tensor& out, const kernels::MatmulLayout& layout);                   \
  /* matmul with the epilogue fused into the GEMM; false, with nothing written, where the backend has no such */    \
  /* fusion for these operands (the CPU never has; CUDA where cuBLASLt offers no algorithm for it), and the */      \
  /* caller then composes it. */                                                                                     \
  bool matmul_fused(const Tensor& a, const Tensor& b, Tensor& out, const kernels::MatmulLayout& layout,              \
                    const kernels::MatmulEpilogue& epilogue);                                                        \
  /* The dense blocks of MatmulLayout::dense: a (batch, m, k), or (batch, k, m) when trans_a, likewise b. */         \
  inline void matmul(const Tensor& a, const Tensor& b, Tensor& out, std::int64_t batch, std::int64_t m,              \
                     std::int64_t n, std::int64_t k, bool trans_a, bool trans_b) {                                   \
    matmul(a, b, out, kernels::MatmulLayout::dense(batch, m, n, k, trans_a, trans_b));                               \
  }

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
// The indexed accesses of kernels/index_geometry.h, behind gather, scatter, index_select, index_add, x.index(...),
// index_put_ and their backward rules, and nonzero. The geometry carries every operand's strides, so data, out
// and values may be any views; its index pointers are int64 on the tensors' device.
#define MINIDL_GATHER_KERNELS                                                                                        \
  /* out[other(i)] = data[data(i)] for every element i of g; data and out of one dtype (any). An element whose */    \
  /* index is out of range is skipped and the first found returned. On CUDA that answer is read back after the */    \
  /* kernel, which waits for the stream, except while a CUDA graph is being captured (then nothing is reported). */  \
  kernels::IndexFault index_gather(const kernels::IndexGeometry& g, const Tensor& data, Tensor& out);               \
  /* data[data(i)] = values[other(i)] (accumulate: +=, bool: or) for every element i; faults as index_gather. */     \
  /* CPU: the elements that reach one element of data are applied in the row-major order of i (deterministic; */     \
  /* without accumulate the last one wins). CUDA: accumulating floating values uses atomics, so their sums depend */ \
  /* on the order the threads run, unless deterministic(): then a stable sort by destination makes each */           \
  /* sum in the CPU's order (several passes); integral sums are exact either way. Without accumulate one of */       \
  /* several values written to one element wins, which one is unspecified. */                                        \
  kernels::IndexFault index_scatter(const kernels::IndexGeometry& g, const Tensor& values, Tensor& data,            \
                                    bool accumulate);                                                                \
  /* out (outer, k, inner)[o, j, i] = src (outer, n, inner)[o, index[j], i] for contiguous src and out and an */     \
  /* int64 index of k elements, every one in [0, n) (unchecked: the data loader's gathers). */                       \
  void index_select(const Tensor& src, const Tensor& index, Tensor& out, std::int64_t outer, std::int64_t n,         \
                    std::int64_t inner);                                                                             \
  /* The smallest position j with index[j] outside [0, n), or -1 when all are in range. On CUDA this reads */        \
  /* the answer back, so it waits for the stream. */                                                                 \
  std::int64_t first_out_of_range(const Tensor& index, std::int64_t n);                                              \
  /* The number of nonzero elements of a contiguous x (NaN counts); on CUDA read back (waits for the stream). */     \
  std::int64_t count_nonzero(const Tensor& x);                                                                       \
  /* out (count_nonzero(x), x.dim()) int64 = the coordinates of x's nonzero elements in row-major order. */          \
  void nonzero(const Tensor& x, Tensor& out);

// ---- joining: src/cpu/joining.cpp, src/cuda/joining.cu ----------------------------------------------------
#define MINIDL_JOINING_KERNELS                                                                                       \
  /* cat's copies in one pass: inputs[k] (of out's dtype and sizes except along dim, laid out as the rows of */      \
  /* kernels/joining.h) goes to out (contiguous) from index starts[k] of dim on. Seen as bytes, out is rows (the */   \
  /* product of the sizes before dim) and each input a block of columns of every row; CUDA moves all blocks of */     \
  /* one access width (the widest, up to 16 bytes, that their rows, columns and addresses allow) in one launch. */    \
  void cat(const std::vector<Tensor>& inputs, const std::vector<std::int64_t>& starts, std::int64_t dim,            \
           Tensor& out);

// ---- triangle: src/cpu/triangle.cpp, src/cuda/triangle.cu -------------------------------------------------
#define MINIDL_TRIANGLE_KERNELS                                                                                      \
  /* tril / triu: x and out (one dtype, contiguous) viewed as (batch, n, m) matrices; out keeps x's elements */      \
  /* (i, j) with j - i <= diagonal (upper: >= diagonal), kernels::in_triangle, and is 0 elsewhere. */                \
  void triangle(const Tensor& x, std::int64_t diagonal, bool upper, Tensor& out);

// ---- where: src/cpu/where.cpp, src/cuda/where.cu (the selection in kernels/where.h) ---------------------------
#define MINIDL_WHERE_KERNELS                                                                                         \
  /* out = cond ? a : b elementwise: cond bool, a and b of out's dtype, all three broadcast to out's shape, */       \
  /* any strides; out may be a or b (masked_fill_). */                                                               \
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out);

// ---- optimizer: src/cpu/optim_kernels.cpp, src/cuda/optim_kernels.cu ------------------------------------
// The update rules of kernels/optim_update.h applied to every slot of one parameter group's step. The CPU
// updates each parameter in one pass split over the thread pool. CUDA launches, per list of up to a few dozen
// parameters of one dtype, a one-block kernel that increments the list's step counters and one update kernel
// for the whole list; pointers and sizes travel by value in the kernel arguments, the group's options are read
// from device memory. Nothing is allocated, copied from the host or synchronised there, so a step can be
// captured in a CUDA graph, and replaying it advances the device-side step counters.
#define MINIDL_OPTIM_KERNELS                                                                                         \
  /* One optimizer step for every slot: increments the slot's step counter steps[index], then updates its */         \
  /* parameter and state in place with the options values[group * kOptimValues ...] (both float64). On CUDA */     \
  /* every tensor is on the current device. */                                                                       \
  void optim_step(const kernels::OptimHyper& hyper, const std::vector<kernels::OptimSlot>& slots, Tensor& steps,     \
                  const Tensor& values, std::int64_t group);                                                         \
  /* dst (float64)[offset + k] = src[k] for k < count. On CUDA: an asynchronous copy, which may read src when */     \
  /* it runs, so src must outlive it (the optimizer passes its own members). */                                      \
  void optim_upload(Tensor& dst, std::int64_t offset, const double* src, std::int64_t count);

// ---- clip_grad: src/cpu/clip_grad.cpp, src/cuda/clip_grad.cu (the formulas: kernels/clip_grad.h) ----------
// Gradient-norm clipping over a list of contiguous float32 / float64 gradients of one device, in any mix.
// CUDA: one multi-tensor kernel per dtype writes per-block partial results, one single-block kernel combines
// them into the total; the scaling reads the total on the device. No host copy or synchronisation (capturable).
#define MINIDL_CLIP_GRAD_KERNELS                                                                                     \
  /* total (0-d, float32 or float64, on the gradients' device) = the `norm` norm of all gradients' elements. */      \
  void grad_norm(const std::vector<Tensor>& grads, const kernels::GradNorm& norm, Tensor& total);                    \
  /* Every gradient *= kernels::clip_coef(max_norm, total) computed in total's dtype, cast to the gradient's. */     \
  void clip_grads_by_norm(const std::vector<Tensor>& grads, const Tensor& total, double max_norm);

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
// Over (N, C, HW), statistics per channel; per-channel arrays hold C values of P = kernels::opmath_t<T> (T itself
// for float / double; float32 beside the GPU's bfloat16 / float16 data, as cuDNN takes them); a null gamma means 1
// and a null beta 0 (affine off), a null dgamma / dbeta that those gradients are not wanted. PyTorch's semantics:
// y = (x - mean) * invstd * gamma + beta, invstd = 1 / sqrt(var + eps) with the biased batch variance.
//   batch_norm_forward_train: writes y and save_mean, save_invstd (for the backward) and, when not null,
//                             moves running_mean / running_var by `momentum` towards the batch mean and the
//                             unbiased batch variance. Needs N * HW > 1 (ValueError otherwise).
//   batch_norm_forward_eval:  normalises with the running statistics.
//   batch_norm_backward:      training-mode gradient from the saved statistics; overwrites dx, dgamma, dbeta.
#define MINIDL_BATCH_NORM_KERNELS                                                                                    \
  template <class T>                                                                                                 \
  void batch_norm_forward_train(const kernels::BatchNormParams& p, const T* x, const kernels::opmath_t<T>* gamma,    \
                                const kernels::opmath_t<T>* beta, T* y, kernels::opmath_t<T>* save_mean,             \
                                kernels::opmath_t<T>* save_invstd, kernels::opmath_t<T>* running_mean,               \
                                kernels::opmath_t<T>* running_var);                                                  \
  template <class T>                                                                                                 \
  void batch_norm_forward_eval(const kernels::BatchNormParams& p, const T* x, const kernels::opmath_t<T>* gamma,     \
                               const kernels::opmath_t<T>* beta, const kernels::opmath_t<T>* running_mean,           \
                               const kernels::opmath_t<T>* running_var, T* y);                                       \
  template <class T>                                                                                                 \
  void batch_norm_backward(const kernels::BatchNormParams& p, const T* x, const T* dy,                               \
                           const kernels::opmath_t<T>* gamma, const kernels::opmath_t<T>* save_mean,                 \
                           const kernels::opmath_t<T>* save_invstd, T* dx, kernels::opmath_t<T>* dgamma,             \
                           kernels::opmath_t<T>* dbeta);

// ---- rnn: src/cpu/rnn.cpp, src/cuda/rnn.cu (the formulas: kernels/rnn_cell.h) ---------------------------------
// One time step's pointwise gate math of nn::RNN / LSTM / GRU and their cells: f(e) for every element e < f.numel()
// of the (batch, hidden) state, T float or double, pointers on the kernel's device.
#define MINIDL_RNN_KERNELS                                                                                           \
  template <class T>                                                                                                 \
  void rnn_cell_forward(const kernels::RnnCellForward<T>& f);                                                        \
  template <class T>                                                                                                 \
  void rnn_cell_backward(const kernels::RnnCellBackward<T>& f);

// ---- upsample: src/cpu/upsample.cpp, src/cuda/upsample.cu (the formulas: kernels/upsample.h) --------------
// x planes x h.in x w.in, y planes x h.out x w.out, contiguous.
//   upsample_forward:   y = interpolate(x) by nearest or (bi)linear taps.
//   upsample_backward:  dx = its input gradient given dy, gathered per input element; overwrites dx.
#define MINIDL_UPSAMPLE_KERNELS                                                                                      \
  template <class T>                                                                                                 \
  void upsample_forward(const kernels::UpsampleParams& p, const T* x, T* y);                                         \
  template <class T>                                                                                                 \
  void upsample_backward(const kernels::UpsampleParams& p, const T* dy, T* dx);

// ---- normalization: src/cpu/normalization.cpp, src/cuda/normalization.cu (formulas: kernels/normalization.h) ---
// Rows of a contiguous (rows, n) x normalised one by one (layer_norm, rms_norm; group_norm and instance_norm on
// their (N * groups, C / groups * spatial) view). gamma, beta, dgamma, dbeta hold n values or are null (absent, or
// that gradient not wanted); mean and rstd hold one value per row (mean 0 when not centered).
//   row_norm_forward:  y = xhat * gamma + beta, and the row statistics for the backward.
//   row_norm_backward: dx (overwritten; may be null when not wanted), dgamma and dbeta (overwritten, summed over
//                      the rows in an order fixed by the shape: no atomics) from x, dy and the saved statistics.
#define MINIDL_NORMALIZATION_KERNELS                                                                                 \
  template <class T>                                                                                                 \
  void row_norm_forward(const kernels::RowNormParams& p, const T* x, const T* gamma, const T* beta, T* y, T* mean,   \
                        T* rstd);                                                                                    \
  template <class T>                                                                                                 \
  void row_norm_backward(const kernels::RowNormParams& p, const T* x, const T* dy, const T* gamma, const T* mean,    \
                         const T* rstd, T* dx, T* dgamma, T* dbeta);

// Every family, declared once for each backend.
#define MINIDL_BACKEND_KERNELS                                                                                       \
  MINIDL_COPY_KERNELS MINIDL_RANGE_KERNELS MINIDL_RANDOM_KERNELS MINIDL_ELEMENTWISE_KERNELS MINIDL_REDUCE_KERNELS    \
  MINIDL_SCAN_KERNELS MINIDL_SORT_KERNELS MINIDL_MATMUL_KERNELS MINIDL_SOFTMAX_KERNELS MINIDL_CROSS_ENTROPY_KERNELS  \
  MINIDL_GATHER_KERNELS MINIDL_OPTIM_KERNELS MINIDL_CONV2D_KERNELS MINIDL_POOL2D_KERNELS MINIDL_BATCH_NORM_KERNELS   \
  MINIDL_JOINING_KERNELS MINIDL_TRIANGLE_KERNELS MINIDL_WHERE_KERNELS MINIDL_RNN_KERNELS MINIDL_UPSAMPLE_KERNELS     \
  MINIDL_CLIP_GRAD_KERNELS MINIDL_NORMALIZATION_KERNELS

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
#undef MINIDL_RANGE_KERNELS
#undef MINIDL_RANDOM_KERNELS
#undef MINIDL_ELEMENTWISE_KERNELS
#undef MINIDL_REDUCE_KERNELS
#undef MINIDL_SCAN_KERNELS
#undef MINIDL_SORT_KERNELS
#undef MINIDL_MATMUL_KERNELS
#undef MINIDL_SOFTMAX_KERNELS
#undef MINIDL_CROSS_ENTROPY_KERNELS
#undef MINIDL_GATHER_KERNELS
#undef MINIDL_JOINING_KERNELS
#undef MINIDL_TRIANGLE_KERNELS
#undef MINIDL_WHERE_KERNELS
#undef MINIDL_OPTIM_KERNELS
#undef MINIDL_CLIP_GRAD_KERNELS
#undef MINIDL_CONV2D_KERNELS
#undef MINIDL_POOL2D_KERNELS
#undef MINIDL_BATCH_NORM_KERNELS
#undef MINIDL_RNN_KERNELS
#undef MINIDL_UPSAMPLE_KERNELS
#undef MINIDL_NORMALIZATION_KERNELS
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

// MINIDL_LAYER_KERNEL for a kernel whose GPU form also takes bfloat16 and float16 (instantiated in its .cu file
// for those two as well). The CPU's layer kernels have no 16-bit form: a layer op sends 16-bit CPU tensors
// through layers::needs_float_path (layers/lowp.h) before it gets here, so reaching the CPU with one is an internal error.
#if MINIDL_CUDA_ENABLED
#define MINIDL_LAYER_KERNEL_LOWP(tensor, name, ...)                                                          \
  ::minidl::kernels::dispatch_floating_lowp((tensor).dtype(), #name, [&](auto tag_) {                     \
    using T = typename decltype(tag_)::type;                                                              \
    if constexpr (::minidl::kernels::is_reduced_float_v<T>) {                                             \
      if (!(tensor).device().is_cuda()) ::minidl::detail::throw_no_cpu_lowp_kernel(#name, (tensor).dtype()); \
      ::minidl::gpu::DeviceGuard guard_((tensor).device().index());                                       \
      ::minidl::gpu::name<T>(__VA_ARGS__);                                                                \
    } else {                                                                                              \
      MINIDL_ON_BACKEND((tensor).device(), name<T>(__VA_ARGS__));                                         \
    }                                                                                                     \
  })
#else
#define MINIDL_LAYER_KERNEL_LOWP(tensor, name, ...) MINIDL_LAYER_KERNEL(tensor, name, __VA_ARGS__)
#endif

namespace minidl {
namespace detail {
[[noreturn]] void throw_cuda_not_built();
/// The internal error of MINIDL_LAYER_KERNEL_LOWP: a 16-bit tensor reached a CPU layer kernel.
[[noreturn]] void throw_no_cpu_lowp_kernel(const char* kernel, DType dtype);
}  // namespace detail
}  // namespace minidl
