// CUDA kernels of amp::GradScaler (see kernels/backend.h). Block (x, y) of the check kernel walks a grid-stride
// share of tensor y of a tensor list (cuda/tensor_list.cuh) in 16-byte packs (where it starts aligned), checking
// each element and, when unscaling, writing it back in the same pass; a block that met an inf or NaN sets the flag
// (every writer stores the same 1, so no atomics). The scale update is one thread. Scale and flag stay on the
// device: a captured step needs no host round trip.
#include <cstdint>

#include "cuda/context.h"
#include "cuda/tensor_list.cuh"
#include "cuda/wide_access.cuh"
#include "kernels/backend.h"
#include "kernels/grad_scaler.h"

namespace minidl {
namespace gpu {
namespace {

using i64 = std::int64_t;
constexpr int kThreads = kListThreads;
/// Blocks per tensor: enough to fill the device for one large gradient.
constexpr unsigned int kMaxBlocksPerTensor = 512;

template <class T>
__global__ void check_and_unscale_kernel(TensorList<T> list, float* found_inf, const float* scale, bool unscale) {
  const int t = blockIdx.y;
  T* const x = list.data[t];
  const i64 n = list.numel[t];
  const float inv = kernels::inv_scale_of(*scale);
  const i64 first = blockIdx.x * (i64)kThreads + threadIdx.x, stride = (i64)kThreads * gridDim.x;
  const i64 packed = packed_prefix(x, n);
  bool bad = false;
  for (i64 k = first; k < packed / kPack<T>; k += stride) {
    Wide<T, kPack<T>> w = load_wide<kPack<T>>(x + k * kPack<T>);
#pragma unroll
    for (int j = 0; j < kPack<T>; ++j) bad |= kernels::check_and_unscale(w.v[j], inv, unscale);
    if (unscale) store_wide(x + k * kPack<T>, w);
  }
  for (i64 i = packed + first; i < n; i += stride) bad |= kernels::check_and_unscale(x[i], inv, unscale);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1.0f;
}

__global__ void update_scale_kernel(float* scale, std::int32_t* growth_tracker, const float* found_inf,
                                    double growth_factor, double backoff_factor, i64 growth_interval) {
  kernels::update_scale(*scale, *growth_tracker, *found_inf, growth_factor, backoff_factor, growth_interval);
}

/// Launches the check over every gradient of dtype T, a tensor list at a time.
template <class T>
void check_dtype(const std::vector<Tensor>& grads, float* found_inf, const float* scale, bool unscale) {
  for (const TensorList<T>& l : lists_of<T>(grads)) {
    check_and_unscale_kernel<T><<<grid_of(l, kMaxBlocksPerTensor), kThreads, 0, stream()>>>(l, found_inf, scale,
                                                                                              unscale);
    MINIDL_CUDA_KERNEL_CHECK();
  }
}

}  // namespace

void non_finite_check_and_unscale(const std::vector<Tensor>& grads, Tensor& found_inf, const Tensor& scale,
                                  bool unscale) {
  // A gradient of another dtype is the CPU's TypeError here too (the launches below pick theirs by dtype).
  for (const Tensor& g : grads) kernels::dispatch(kernels::GradScalerTypes{}, g.dtype(), "GradScaler", [](auto) {});
  float* flag = found_inf.data_ptr<float>();
  const float* s = scale.data_ptr<float>();
  check_dtype<float>(grads, flag, s, unscale);
  check_dtype<double>(grads, flag, s, unscale);
  check_dtype<BFloat16>(grads, flag, s, unscale);
  check_dtype<Half>(grads, flag, s, unscale);
}

void update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                  double backoff_factor, std::int64_t growth_interval) {
  update_scale_kernel<<<1, 1, 0, stream()>>>(scale.data_ptr<float>(), growth_tracker.data_ptr<std::int32_t>(),
                                             found_inf.data_ptr<float>(), growth_factor, backoff_factor,
                                             growth_interval);
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
