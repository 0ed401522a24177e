// Per-device CUDA state: the library's stream and the cuBLAS/cuDNN handles bound to it, error translation,
// and the workspace buffer shared by cuDNN and cuBLAS calls.
#include <cuda_profiler_api.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/allocator.h"
#include "cuda/context.h"
#include "minidl/cuda.h"

namespace minidl {
namespace gpu {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so the next operation can work
  throw CudaError(detail::str("CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") in ", call,
                              " at ", file, ":", line));
}

namespace {
/// A library (cuBLAS, cuDNN) failed to allocate device memory of its own: the size it wanted is unknown, so
/// the error names what the device had left.
[[noreturn]] void throw_library_oom(const char* library, const char* call, const char* file, int line) {
  std::size_t free_b = 0, total_b = 0;
  (void)cudaMemGetInfo(&free_b, &total_b);
  (void)cudaGetLastError();
  throw OutOfMemoryError(detail::str(library, " could not allocate device memory in ", call, " at ", file, ":", line,
                                     "; the device has ", free_b, " bytes free of ", total_b),
                         0, free_b, total_b);
}
}  // namespace

void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line) {
  if (st == CUBLAS_STATUS_ALLOC_FAILED) throw_library_oom("cuBLAS", call, file, line);
  throw CudaError(detail::str("cuBLAS error ", cublasGetStatusName(st), " (", cublasGetStatusString(st), ") in ", call,
                              " at ", file, ":", line));
}

void throw_cudnn_error(cudnnStatus_t st, const char* call, const char* file, int line) {
  if (st == CUDNN_STATUS_ALLOC_FAILED) throw_library_oom("cuDNN", call, file, line);
  throw CudaError(detail::str("cuDNN error ", cudnnGetErrorString(st), " in ", call, " at ", file, ":", line));
}

int current_device() {
  int d = 0;
  MINIDL_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

DeviceGuard::DeviceGuard(int index) : prev_(current_device()) {
  if (index != prev_) MINIDL_CUDA_CHECK(cudaSetDevice(index));
}

DeviceGuard::~DeviceGuard() {
  int now = 0;
  if (cudaGetDevice(&now) == cudaSuccess && now != prev_) (void)cudaSetDevice(prev_);
}

namespace {

constexpr std::size_t kCublasWorkspace = 32u << 20;  // fixed, so cuBLAS never allocates inside a CUDA graph

struct DeviceContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  void* cublas_workspace = nullptr;
};

std::mutex g_mutex;
std::vector<DeviceContext*> g_contexts;

/// device_alloc, with an out-of-memory error that says the memory was scratch for `what`.
/// With the caching allocator off (MINIDL_CUDA_NO_CACHE=1, the setting of compute-sanitizer runs) the scratch
/// starts zeroed, queued on `s`: cuDNN's layout transposes read parts of their workspace that nothing wrote
/// (initcheck, cuDNN 9.14: 1.4 million reports in nhwcToNchwKernel inside
/// cudnnConvolutionBackwardFilter for one test whose results were right), which buried minidl's own reports.
/// With the cache on no tool is watching and nothing is spent; during capture the memset would be replayed.
void* workspace_alloc(std::size_t bytes, const char* what, cudaStream_t s) {
  void* p = nullptr;
  try {
    p = device_alloc(bytes);
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(detail::str(e.what(), " [allocating ", what, " of ", bytes, " bytes]"), e.requested_bytes(),
                           e.free_bytes(), e.total_bytes());
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (!cuda::allocator_caching() && cudaStreamIsCapturing(s, &capture) == cudaSuccess &&
      capture == cudaStreamCaptureStatusNone) {
    MINIDL_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));
  }
  return p;
}

/// Releases every device's handles, the cuBLAS workspace and the stream, when the caching allocator is off (the setting
/// of compute-sanitizer runs: MINIDL_CUDA_NO_CACHE=1), so that its leak check at exit reports only memory that
/// something really lost. Normal runs leave it all to the driver: the handles must outlive static tensors.
void release_contexts_at_exit() {
  if (cuda::allocator_caching()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (std::size_t dev = 0; dev < g_contexts.size(); ++dev) {
    DeviceContext* c = g_contexts[dev];
    if (!c) continue;
    DeviceGuard guard(static_cast<int>(dev));
    (void)cudaStreamSynchronize(c->stream);
    if (c->cudnn) (void)cudnnDestroy(c->cudnn);
    if (c->cublas) (void)cublasDestroy(c->cublas);
    device_free(c->cublas_workspace);
    (void)cudaStreamDestroy(c->stream);
    delete c;
    g_contexts[dev] = nullptr;
  }
}

DeviceContext& context() {
  const int dev = current_device();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (static_cast<int>(g_contexts.size()) <= dev) g_contexts.resize(static_cast<std::size_t>(dev) + 1, nullptr);
  if (!g_contexts[static_cast<std::size_t>(dev)]) {
    // Not destroyed in normal runs (see release_contexts_at_exit): handles must outlive static tensors.
    auto* c = new DeviceContext();
    MINIDL_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    g_contexts[static_cast<std::size_t>(dev)] = c;
    // Registered after the CUDA runtime initialised itself, so it runs before the runtime's own teardown.
    static const bool registered = (std::atexit(release_contexts_at_exit), true);
    (void)registered;
  }
  return *g_contexts[static_cast<std::size_t>(dev)];
}

}  // namespace

cudaStream_t stream() { return context().stream; }

bool stream_is_capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  MINIDL_CUDA_CHECK(cudaStreamIsCapturing(stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

bool timed_algorithm_search() { return cuda::cudnn_benchmark() && !deterministic(); }

cublasHandle_t cublas() {
  DeviceContext& c = context();
  if (!c.cublas) {
    // The handle is published only once it has its workspace: after an out-of-memory here the next call
    // starts over instead of using a handle that would allocate scratch itself (breaking graph capture).
    if (!c.cublas_workspace) c.cublas_workspace = workspace_alloc(kCublasWorkspace, "the cuBLAS workspace", c.stream);
    cublasHandle_t h = nullptr;
    MINIDL_CUBLAS_CHECK(cublasCreate(&h));
    const cublasStatus_t st = [&] {
      const cublasStatus_t s = cublasSetStream(h, c.stream);
      return s != CUBLAS_STATUS_SUCCESS ? s : cublasSetWorkspace(h, c.cublas_workspace, kCublasWorkspace);
    }();
    if (st != CUBLAS_STATUS_SUCCESS) {
      (void)cublasDestroy(h);
      throw_cublas_error(st, "cublasSetStream/cublasSetWorkspace", __FILE__, __LINE__);
    }
    c.cublas = h;
  }
  return c.cublas;
}

cudnnHandle_t cudnn() {
  DeviceContext& c = context();
  if (!c.cudnn) {
    MINIDL_CUDNN_CHECK(cudnnCreate(&c.cudnn));
    MINIDL_CUDNN_CHECK(cudnnSetStream(c.cudnn, c.stream));
  }
  return c.cudnn;
}

Workspace::Workspace(std::size_t bytes, const char* what)
    : ptr_(bytes > 0 ? workspace_alloc(bytes, what, stream()) : nullptr) {}

Workspace::~Workspace() { device_free(ptr_); }

}  // namespace gpu

namespace cuda {
void profiler_start() { MINIDL_CUDA_CHECK(cudaProfilerStart()); }
void profiler_stop() { MINIDL_CUDA_CHECK(cudaProfilerStop()); }
}  // namespace cuda
}  // namespace minidl
