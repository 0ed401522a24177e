// CUDA cross-entropy on log-probabilities (see kernels/backend.h): per-sample losses by sub-warps, the reduced
// loss in one block, and the gradient; deterministic, on gpu::stream(). bfloat16 / float16 log-probabilities are
// read as they are and everything after the load is float32 (A, kernels::opmath_t), the result rounded once.
#include <cmath>

#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

// Per-sample losses by sub-warps of `lanes` lanes (a power of two: ce_lanes), 32 / lanes samples per warp, so the
// few classes of a small batch (10 for MNIST) keep every lane busy and all samples in flight at once: a warp per
// sample, 8 warps looping over the batch, leaves most lanes idle and most samples waiting.
constexpr unsigned kFullMask = 0xffffffffu;
int ce_lanes(i64 c) {
  int lanes = 1;
  while (lanes < kWarp && lanes * 4 < c) lanes *= 2;  // the smallest power of two >= c / 4, at most a warp
  return lanes;
}

/// Calls emit(i, loss of sample i) on the first lane of sample i's sub-warp, for the samples of warps warp,
/// warp + warps, ... Each lane sums every lanes-th class of the row and keeps the target's log-probability when it
/// meets it; the shuffles combine them in a fixed order, so the result is bitwise reproducible. The loop runs while
/// the warp's first sample is in range, so all 32 lanes reach the (full-mask) shuffles even where n ends inside it.
template <class T, class A, class Emit>
__device__ void for_each_sample_loss(const T* lp, const std::int64_t* target, i64 n, i64 c, A eps, int lanes, i64 warp,
                                     i64 warps, Emit emit) {
  const int lane = threadIdx.x % kWarp, sub = lane % lanes, per_warp = kWarp / lanes;
  for (i64 first = warp * per_warp; first < n; first += warps * per_warp) {
    const i64 i = first + lane / lanes;
    const bool valid = i < n;
    const i64 t = valid ? target[i] : -1;
    // An out-of-range class cannot throw from the device without a host sync: it yields NaN, which the
    // non-finite-loss check and anomaly detection report.
    const bool known = t >= 0 && t < c;
    A s = 0, picked = 0;
    if (valid) {
      const T* row = lp + i * c;
      for (i64 j = sub; j < c; j += lanes) {
        const A v = static_cast<A>(row[j]);
        s += v;
        if (j == t) picked = v;
      }
    }
    for (int off = lanes / 2; off > 0; off >>= 1) s += __shfl_down_sync(kFullMask, s, off, lanes);
    picked = __shfl_sync(kFullMask, picked, known ? static_cast<int>(t % lanes) : 0, lanes);
    if (valid && sub == 0) emit(i, known ? -((A(1) - eps) * picked + eps / A(c) * s) : A(NAN));
  }
}

template <class T, class A = kernels::opmath_t<T>>
__global__ void cross_entropy_loss_kernel(const T* lp, const std::int64_t* target, T* losses, i64 n, i64 c, A eps,
                                          int lanes) {
  for_each_sample_loss(lp, target, n, c, eps, lanes, (blockIdx.x * (i64)blockDim.x + threadIdx.x) / kWarp,
                       gridDim.x * (i64)(blockDim.x / kWarp), [&](i64 i, A loss) { losses[i] = static_cast<T>(loss); });
}

// The reduced loss in one block of 1024 threads: each sub-warp's first lane sums the losses of its samples, then
// the block adds those sums in a fixed order (warp butterflies, then the 32 warp sums by warp 0), so the result is
// deterministic. One launch instead of three (losses, sum, scale): the loss of a small batch is a handful of
// microseconds of launches, not of work. For batches up to kSumSamplesMax.
constexpr int kSumThreads = 1024;
static_assert(kSumThreads == kWarp * kWarp, "cross_entropy_sum_kernel: warp 0 adds one sum per warp");
constexpr std::int64_t kSumSamplesMax = 4096;
template <class T, class A = kernels::opmath_t<T>>
__global__ __launch_bounds__(kSumThreads) void cross_entropy_sum_kernel(const T* lp, const std::int64_t* target, T* out,
                                                                       i64 n, i64 c, A eps, A scale, int lanes) {
  __shared__ A part[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  A acc = 0;
  for_each_sample_loss(lp, target, n, c, eps, lanes, warp, kSumThreads / kWarp, [&](i64, A loss) { acc += loss; });
  acc = warp_sum(acc);  // lanes that emitted nothing add zeros
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    const A total = warp_sum(part[lane]);
    if (lane == 0) out[0] = static_cast<T>(scale * total);
  }
}

template <class T, class A = kernels::opmath_t<T>>
__global__ void scaled_sum_kernel(const T* x, T* out, std::int64_t n, A scale) {
  extern __shared__ unsigned char smem_raw[];
  A acc = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += static_cast<A>(x[i]);
  acc = block_sum(acc, reinterpret_cast<A*>(smem_raw));
  if (threadIdx.x == 0) out[0] = static_cast<T>(scale * acc);
}

template <class T, class A = kernels::opmath_t<T>>
__global__ void cross_entropy_backward_kernel(const T* lp, const std::int64_t* target, const T* grad,
                                              std::int64_t grad_stride, T* dx, std::int64_t n, std::int64_t c, A eps,
                                              bool from_logits, A scale) {
  GRID_STRIDE(k, n * c) {
    const std::int64_t i = k / c, j = k % c;
    const std::int64_t t = target[i];
    const A q = (j == t ? A(1) - eps : A(0)) + eps / A(c);
    const A g = static_cast<A>(grad[i * grad_stride]);
    dx[k] = static_cast<T>(((from_logits ? kernels::m_exp(static_cast<A>(lp[k])) : A(0)) - q) * (scale * g));
  }
}

}  // namespace

void cross_entropy_loss(const Tensor& log_probs, const Tensor& target, double smoothing, Tensor& losses) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  if (n == 0) return;
  kernels::dispatch_floating_lowp(log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::opmath_t<T>;
    const int lanes = ce_lanes(c);
    cross_entropy_loss_kernel<<<blocks_for(n * lanes, kThreads), kThreads, 0, stream()>>>(
        log_probs.data_ptr<T>(), target.data_ptr<std::int64_t>(), losses.data_ptr<T>(), n, c, static_cast<A>(smoothing),
        lanes);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void cross_entropy_loss_sum(const Tensor& log_probs, const Tensor& target, double smoothing, double scale,
                            Tensor& out) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  kernels::dispatch_floating_lowp(log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::opmath_t<T>;
    if (n > kSumSamplesMax) {  // many samples: the per-sample kernel spreads them over the GPU, then one block sums
      Tensor losses = empty({n}, TensorOptions(log_probs.dtype()).device(log_probs.device()));
      cross_entropy_loss(log_probs, target, smoothing, losses);
      scaled_sum_kernel<<<1, kThreads, kThreads * sizeof(A), stream()>>>(losses.data_ptr<T>(), out.data_ptr<T>(), n,
                                                                        static_cast<A>(scale));
      return;
    }
    cross_entropy_sum_kernel<<<1, kSumThreads, 0, stream()>>>(log_probs.data_ptr<T>(), target.data_ptr<std::int64_t>(),
                                                              out.data_ptr<T>(), n, c, static_cast<A>(smoothing),
                                                              static_cast<A>(scale), ce_lanes(c));
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

void cross_entropy_backward(const Tensor& log_probs, const Tensor& target, const Tensor& grad, double smoothing,
                            bool from_logits, double scale, Tensor& dx) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  if (n == 0) return;
  kernels::dispatch_floating_lowp(log_probs.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::opmath_t<T>;
    cross_entropy_backward_kernel<<<blocks_for(n * c), kThreads, 0, stream()>>>(
        log_probs.data_ptr<T>(), target.data_ptr<std::int64_t>(), grad.data_ptr<T>(), grad.numel() == 1 ? 0 : 1,
        dx.data_ptr<T>(), n, c, static_cast<A>(smoothing), from_logits, static_cast<A>(scale));
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
