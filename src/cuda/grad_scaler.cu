// CUDA kernels of amp::GradScaler (see kernels/backend.h). Block (x, y) of the check kernel walks a grid-stride
// share of tensor y of a list of one dtype in 16-byte packs (where the tensor starts aligned), checking each
// element and, when unscaling, writing it back in the same pass; a block that met an inf or NaN sets the flag
// (every writer stores the same 1, so no atomics). The scale update is one thread. Scale and flag stay on the
// device: a captured step needs no host round trip.
#include <algorithm>
#include <cstdint>

#include "cuda/context.h"
#include "cuda/wide_access.cuh"
#include "kernels/backend.h"
#include "kernels/grad_scaler.h"

namespace minidl {
namespace gpu {
namespace {

using i64 = std::int64_t;
constexpr int kThreads = 256;
/// Tensors per launch; keeps the kernel arguments well under 4 KiB.
constexpr int kMaxTensors = 64;
/// Blocks per tensor: enough to fill the device for one large gradient.
constexpr unsigned int kMaxBlocksPerTensor = 512;

template <class T>
struct GradList {
  int count = 0;
  i64 numel[kMaxTensors] = {};
  T* data[kMaxTensors] = {};
};
static_assert(sizeof(GradList<double>) <= 4096, "GradScaler kernel arguments exceed 4 KiB");

/// Elements per 16-byte pack.
template <class T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <class T>
__global__ void check_and_unscale_kernel(GradList<T> list, float* found_inf, const float* scale, bool unscale) {
  const int t = blockIdx.y;
  T* const x = list.data[t];
  const i64 n = list.numel[t];
  const float inv = kernels::inv_scale_of(*scale);
  const i64 first = blockIdx.x * (i64)kThreads + threadIdx.x, stride = (i64)kThreads * gridDim.x;
  const i64 packed = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 ? n / kPack<T> * kPack<T> : 0;
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

/// Launches the check over every gradient of dtype T, kMaxTensors at a time.
template <class T>
void check_dtype(const std::vector<Tensor>& grads, float* found_inf, const float* scale, bool unscale) {
  GradList<T> list;
  i64 largest = 0;
  auto launch = [&] {
    const i64 packs = (largest + kPack<T> - 1) / kPack<T>;
    const dim3 grid(std::min(blocks_for(packs, kThreads), kMaxBlocksPerTensor), static_cast<unsigned int>(list.count));
    check_and_unscale_kernel<T><<<grid, kThreads, 0, stream()>>>(list, found_inf, scale, unscale);
    MINIDL_CUDA_KERNEL_CHECK();
    list.count = 0;
    largest = 0;
  };
  for (const Tensor& g : grads) {
    if (g.dtype() != dtype_of<T>::value || g.numel() == 0) continue;
    list.numel[list.count] = g.numel();
    list.data[list.count] = g.data_ptr<T>();
    largest = std::max(largest, g.numel());
    if (++list.count == kMaxTensors) launch();
  }
  if (list.count > 0) launch();
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
