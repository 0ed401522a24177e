// CUDA random kernels (see kernels/backend.h): uniform and normal draws from the device's Philox stream
// (random.cuh), on gpu::stream().
#include "cuda/random.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

void random_fill(Tensor& out, bool normal, double a, double b) {
  if (out.numel() == 0) return;
  kernels::dispatch_floating(out.dtype(), normal ? "randn" : "rand", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.data_ptr<T>();
    launch_random<T>(out.numel(), normal, a, b, StoreDraw<T>{y, is_aligned(y, 16)});
  });
}

}  // namespace

void uniform(Tensor& out, double low, double high) { random_fill(out, false, low, high); }
void normal(Tensor& out, double mean, double stddev) { random_fill(out, true, mean, stddev); }

}  // namespace gpu
}  // namespace minidl
