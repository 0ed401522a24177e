#pragma once
// Per-device CUDA state of the library: one non-blocking stream that every kernel, cuBLAS and cuDNN call uses
// (so work is stream-ordered and can be captured into a CUDA graph), the library handles bound to it, and
// the caching allocator. Error checks turn every status into a CudaError naming the call.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <curand.h>

#include <cstddef>
#include <string>

#include "cuda/device_guard.h"  // current_device, DeviceGuard
#include "minidl/errors.h"

namespace minidl {
namespace gpu {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t st, const char* call, const char* file, int line);

/// The library's stream on the current device (current_device() and DeviceGuard: cuda/device_guard.h).
cudaStream_t stream();
/// cuBLAS / cuDNN handles of the current device, bound to stream().
cublasHandle_t cublas();
cudnnHandle_t cudnn();

/// Whether stream() is recording a CUDA graph (nothing runs then, so nothing can be timed).
bool stream_is_capturing();
/// Whether the convolutions' and matmul's algorithm searches may choose by timing their candidates:
/// cuda::cudnn_benchmark(), and not deterministic(). A timed choice follows the GPU's speed of the moment, so two
/// runs can take different algorithms, which sum in different orders: with timing, two --deterministic epochs
/// of the example (same seed and binary) ended at different test accuracies.
bool timed_algorithm_search();

/// Caching allocator (stream-ordered on stream()); throws OutOfMemoryError.
void* device_alloc(std::size_t bytes);
void device_free(void* ptr);

/// Scratch memory of one call (a cuDNN workspace, split-K partial sums), taken from the caching allocator and
/// given back when the object goes out of scope, as PyTorch does with cuDNN's workspaces. Stream order makes the
/// early return safe: the kernels queued on the block run before those of its next user. So scratch counts in
/// memory_stats() only while a call holds it; a buffer kept at the largest size ever asked held a large
/// evaluation batch's workspace through training, a large part of a small training step's measured peak.
/// `what` names it in an out-of-memory error. Zero bytes: get() is null.
class Workspace {
 public:
  explicit Workspace(std::size_t bytes, const char* what = "a workspace");
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_;
};

/// Launch configuration for a grid-stride loop over n elements.
inline unsigned int blocks_for(long long n, int threads = 256) {
  long long b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65535LL * 8) b = 65535LL * 8;
  return static_cast<unsigned int>(b);
}

}  // namespace gpu
}  // namespace minidl

#define MINIDL_CUDA_CHECK(call)                                                          \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) ::minidl::gpu::throw_cuda_error(err_, #call, __FILE__, __LINE__); \
  } while (0)
#define MINIDL_CUBLAS_CHECK(call)                                                          \
  do {                                                                                     \
    cublasStatus_t st_ = (call);                                                           \
    if (st_ != CUBLAS_STATUS_SUCCESS) ::minidl::gpu::throw_cublas_error(st_, #call, __FILE__, __LINE__); \
  } while (0)
#define MINIDL_CUDNN_CHECK(call)                                                           \
  do {                                                                                     \
    cudnnStatus_t st_ = (call);                                                            \
    if (st_ != CUDNN_STATUS_SUCCESS) ::minidl::gpu::throw_cudnn_error(st_, #call, __FILE__, __LINE__); \
  } while (0)
/// After a kernel launch: turns a launch error into a CudaError.
#define MINIDL_CUDA_KERNEL_CHECK() MINIDL_CUDA_CHECK(cudaGetLastError())
