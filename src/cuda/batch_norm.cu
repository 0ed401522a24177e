// Batch normalisation on the GPU through cuDNN's spatial batch norm (declared with the CPU version in
// kernels/backend.h). Null save_mean / save_invstd: the backward recomputes the statistics from x; eval
// without running statistics (both null: the layer tracks none) normalises with the batch statistics, as
// PyTorch does in that case. bfloat16 / float16 data comes with float32 per-channel vectors (P, kernels::opmath_t:
// cuDNN's derived statistics type for them, and PyTorch's mixed-precision batch norm).
#include "kernels/backend.h"
#include "kernels/convert.h"

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuda/context.h"
#include "cuda/cudnn_tensor.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::BatchNormParams;

// Per-channel statistics over N and HW (BatchNorm1d/2d); the persistent variant is faster but may overflow.
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;
constexpr int kThreads = 256;

void check_sizes(const BatchNormParams& p, const char* op) {
  MINIDL_CHECK(p.N > 0 && p.C > 0 && p.HW > 0, ValueError, op, ": N, C and HW must be positive, found N=", p.N,
               " C=", p.C, " HW=", p.HW);
  MINIDL_CHECK(p.eps >= CUDNN_BN_MIN_EPSILON, ValueError, op, ": eps must be >= ", CUDNN_BN_MIN_EPSILON,
               ", found ", p.eps);
}

/// The unbiased variance of the running statistics divides by N * HW - 1.
void check_batch_statistics(const BatchNormParams& p, const char* op) {
  MINIDL_CHECK(p.N * p.HW > 1, ValueError, op, ": training needs more than one value per channel, found N=", p.N,
               " and HW=", p.HW);
}

void check_pointers(bool all_set, const char* op) {
  MINIDL_CHECK(all_set, ValueError, op, ": a required device pointer is null");
}

/// cuDNN takes these vectors in pairs: both given or both absent.
void check_pair(const void* a, const void* b, const char* op, const char* a_name, const char* b_name) {
  MINIDL_CHECK((a == nullptr) == (b == nullptr), ValueError, op, ": ", a_name, " and ", b_name,
               " must both be given or both be null, found ", a_name, (a ? " given" : " null"), " and ", b_name,
               (b ? " given" : " null"));
}

/// x viewed as N x C x HW x 1, and the 1 x C x 1 x 1 per-channel vectors (gamma, statistics) derived from it.
struct Descriptors {
  TensorDescriptor data, channel;
  Descriptors(const BatchNormParams& p, cudnnDataType_t type, const char* op) {
    check_sizes(p, op);
    data.set_nchw(type, cudnn_dim(p.N, op, "batch size"), cudnn_dim(p.C, op, "channels"),
                  cudnn_dim(p.HW, op, "spatial size"), 1, op);
    MINIDL_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(channel.get(), data.get(), kMode));
  }
};

template <class T>
__global__ void fill_kernel(T* __restrict__ out, T value, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x) {
    out[i] = value;
  }
}

/// Stand-ins for per-channel vectors the caller did not pass (affine off, unwanted parameter gradients), which
/// cuDNN requires. They live in a gpu::Workspace of the call and are refilled on every call: stream-ordered, so this
/// also works inside CUDA-graph capture, and no memory stays held for a layer without parameters.
template <class T>
class ChannelScratch {
 public:
  explicit ChannelScratch(std::int64_t channels) : channels_(channels) {}

  /// `given`, or a vector of C copies of `value`.
  const T* or_filled(const T* given, T value) {
    if (given) return given;
    T* v = take();
    fill_kernel<T><<<blocks_for(channels_, kThreads), kThreads, 0, stream()>>>(v, value, channels_);
    MINIDL_CUDA_KERNEL_CHECK();
    return v;
  }
  /// `given`, or a vector whose content is discarded.
  T* or_discarded(T* given) { return given ? given : take(); }

 private:
  static constexpr std::int64_t kSlots = 3;  // the most any function below needs: gamma, dgamma, dbeta

  T* take() {
    MINIDL_CHECK(used_ < kSlots, ValueError, "batch_norm: internal error, more than ", kSlots,
                 " scratch vectors requested");
    if (!scratch_) {
      scratch_ = std::make_unique<Workspace>(static_cast<std::size_t>(kSlots * channels_) * sizeof(T),
                                             "batch_norm's stand-in vectors");
    }
    return scratch_->as<T>() + (used_++) * channels_;
  }

  std::int64_t channels_;
  std::int64_t used_ = 0;
  std::unique_ptr<Workspace> scratch_;
};

/// Normalises with the batch statistics; the statistic outputs are optional in pairs (checked by callers).
template <class T, class P = kernels::opmath_t<T>>
void forward_batch_statistics(const BatchNormParams& p, const T* x, const P* gamma, const P* beta, T* y,
                              P* save_mean, P* save_invstd, P* running_mean, P* running_var, const char* op) {
  const Descriptors d(p, cudnn_type<T>::value, op);
  check_batch_statistics(p, op);
  ChannelScratch<P> scratch(p.C);
  const P* scale = scratch.or_filled(gamma, P(1));
  const P* shift = scratch.or_filled(beta, P(0));
  const cudnn_scale_t<T> one = 1, zero = 0;
  MINIDL_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cudnn(), kMode, &one, &zero, d.data.get(), x, d.data.get(), y, d.channel.get(), scale, shift, p.momentum,
      running_mean, running_var, p.eps, save_mean, save_invstd));
}

}  // namespace

template <class T>
void batch_norm_forward_train(const BatchNormParams& p, const T* x, const kernels::opmath_t<T>* gamma,
                              const kernels::opmath_t<T>* beta, T* y, kernels::opmath_t<T>* save_mean,
                              kernels::opmath_t<T>* save_invstd, kernels::opmath_t<T>* running_mean,
                              kernels::opmath_t<T>* running_var) {
  const char* op = "batch_norm forward (training)";
  check_pointers(x && y, op);
  check_pair(save_mean, save_invstd, op, "save_mean", "save_invstd");
  check_pair(running_mean, running_var, op, "running_mean", "running_var");
  forward_batch_statistics(p, x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var, op);
}

template <class T>
void batch_norm_forward_eval(const BatchNormParams& p, const T* x, const kernels::opmath_t<T>* gamma,
                             const kernels::opmath_t<T>* beta, const kernels::opmath_t<T>* running_mean,
                             const kernels::opmath_t<T>* running_var, T* y) {
  using P = kernels::opmath_t<T>;
  const char* op = "batch_norm forward (evaluation)";
  check_pointers(x && y, op);
  check_pair(running_mean, running_var, op, "running_mean", "running_var");
  if (!running_mean) {
    forward_batch_statistics<T, P>(p, x, gamma, beta, y, nullptr, nullptr, nullptr, nullptr, op);
    return;
  }
  const Descriptors d(p, cudnn_type<T>::value, op);
  ChannelScratch<P> scratch(p.C);
  const P* scale = scratch.or_filled(gamma, P(1));
  const P* shift = scratch.or_filled(beta, P(0));
  const cudnn_scale_t<T> one = 1, zero = 0;
  MINIDL_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(cudnn(), kMode, &one, &zero, d.data.get(), x,
                                                             d.data.get(), y, d.channel.get(), scale, shift,
                                                             running_mean, running_var, p.eps));
}

template <class T>
void batch_norm_backward(const BatchNormParams& p, const T* x, const T* dy, const kernels::opmath_t<T>* gamma,
                         const kernels::opmath_t<T>* save_mean, const kernels::opmath_t<T>* save_invstd, T* dx,
                         kernels::opmath_t<T>* dgamma, kernels::opmath_t<T>* dbeta) {
  using P = kernels::opmath_t<T>;
  const char* op = "batch_norm backward";
  check_pointers(x && dy && dx, op);
  check_pair(save_mean, save_invstd, op, "save_mean", "save_invstd");
  const Descriptors d(p, cudnn_type<T>::value, op);
  check_batch_statistics(p, op);
  ChannelScratch<P> scratch(p.C);
  const P* scale = scratch.or_filled(gamma, P(1));
  P* scale_grad = scratch.or_discarded(dgamma);
  P* shift_grad = scratch.or_discarded(dbeta);
  const cudnn_scale_t<T> one = 1, zero = 0;
  MINIDL_CUDNN_CHECK(cudnnBatchNormalizationBackward(cudnn(), kMode, &one, &zero, &one, &zero, d.data.get(), x,
                                                     d.data.get(), dy, d.data.get(), dx, d.channel.get(), scale,
                                                     scale_grad, shift_grad, p.eps, save_mean, save_invstd));
}

#define MINIDL_INSTANTIATE_BATCH_NORM(T, P)                                                                 \
  template void batch_norm_forward_train<T>(const BatchNormParams&, const T*, const P*, const P*, T*, P*, P*, \
                                            P*, P*);                                                          \
  template void batch_norm_forward_eval<T>(const BatchNormParams&, const T*, const P*, const P*, const P*,    \
                                           const P*, T*);                                                     \
  template void batch_norm_backward<T>(const BatchNormParams&, const T*, const T*, const P*, const P*,        \
                                       const P*, T*, P*, P*);
MINIDL_INSTANTIATE_BATCH_NORM(float, float)
MINIDL_INSTANTIATE_BATCH_NORM(double, double)
MINIDL_INSTANTIATE_BATCH_NORM(BFloat16, float)
MINIDL_INSTANTIATE_BATCH_NORM(Half, float)
#undef MINIDL_INSTANTIATE_BATCH_NORM

}  // namespace gpu
}  // namespace minidl
