#include "cuda/timing.h"

#include "cuda/context.h"

namespace minidl {
namespace gpu {
namespace {

// Well above the time to queue a few runs (a cuDNN call takes the host tens of microseconds).
constexpr unsigned long long kHoldNs = 200'000;

/// Spins for `ns` nanoseconds, so that the timed runs queued behind it start back to back.
__global__ void hold_stream_kernel(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

}  // namespace

float time_on_stream(const std::function<void()>& launch, int runs) {
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } e;
  MINIDL_CUDA_CHECK(cudaEventCreate(&e.start));
  MINIDL_CUDA_CHECK(cudaEventCreate(&e.stop));
  hold_stream_kernel<<<1, 1, 0, stream()>>>(kHoldNs);
  MINIDL_CUDA_KERNEL_CHECK();
  MINIDL_CUDA_CHECK(cudaEventRecord(e.start, stream()));
  for (int i = 0; i < runs; ++i) launch();
  MINIDL_CUDA_CHECK(cudaEventRecord(e.stop, stream()));
  MINIDL_CUDA_CHECK(cudaEventSynchronize(e.stop));
  float ms = 0;
  MINIDL_CUDA_CHECK(cudaEventElapsedTime(&ms, e.start, e.stop));
  return ms / static_cast<float>(runs);
}

}  // namespace gpu
}  // namespace minidl
