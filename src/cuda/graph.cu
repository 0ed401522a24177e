// CUDA-graph capture of the library's stream with a private memory pool (see allocator.h) and a Philox
// offset that advances on the device at every replay (see core/generator.h).
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/generator.h"
#include "cuda/allocator.h"
#include "cuda/context.h"
#include "minidl/cuda.h"

namespace minidl {
namespace cuda {

namespace {
std::atomic<int> g_next_pool{1};
thread_local bool t_capturing = false;

__global__ void advance_offset_kernel(std::uint64_t* base, std::uint64_t by) { *base += by; }
}  // namespace

struct CUDAGraph::Impl {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  int device = 0;
  int pool = 0;
  std::size_t nodes = 0;
  std::uint64_t* philox_base = nullptr;  // device counter added to the offsets baked into the graph
};

CUDAGraph::CUDAGraph() : impl_(new Impl()) {}

CUDAGraph::~CUDAGraph() {
  try {
    reset();
  } catch (...) {
    // destructors must not throw; the driver reclaims everything at exit
  }
  delete impl_;
}

void CUDAGraph::capture_begin() {
  MINIDL_CHECK(!captured() && !t_capturing, ValueError, "CUDAGraph::capture_begin: this graph already holds a capture "
               "(call reset() first) or another capture is in progress");
  impl_->device = gpu::current_device();
  impl_->pool = g_next_pool.fetch_add(1);
  if (!impl_->philox_base) {
    impl_->philox_base = static_cast<std::uint64_t*>(gpu::device_alloc(sizeof(std::uint64_t)));
    MINIDL_CUDA_CHECK(cudaMemsetAsync(impl_->philox_base, 0, sizeof(std::uint64_t), gpu::stream()));
  }
  MINIDL_CUDA_CHECK(cudaStreamSynchronize(gpu::stream()));  // earlier eager work must not leak into the graph
  gpu::begin_private_pool(impl_->pool);
  philox_begin_capture(impl_->device, impl_->philox_base);
  t_capturing = true;
  const cudaError_t err = cudaStreamBeginCapture(gpu::stream(), cudaStreamCaptureModeRelaxed);
  if (err != cudaSuccess) {
    t_capturing = false;
    philox_end_capture(impl_->device);
    gpu::end_private_pool();
    gpu::throw_cuda_error(err, "cudaStreamBeginCapture", __FILE__, __LINE__);
  }
}

void CUDAGraph::capture_end() {
  MINIDL_CHECK(t_capturing, ValueError, "CUDAGraph::capture_end: no capture in progress");
  // The graph's last node advances the device-side Philox offset by what one replay consumed.
  const std::uint64_t used = philox_end_capture(impl_->device);
  if (used > 0) advance_offset_kernel<<<1, 1, 0, gpu::stream()>>>(impl_->philox_base, used);
  t_capturing = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(gpu::stream(), &graph);
  gpu::end_private_pool();
  if (err != cudaSuccess) gpu::throw_cuda_error(err, "cudaStreamEndCapture (did the captured code synchronise?)", __FILE__, __LINE__);
  impl_->graph = graph;
  MINIDL_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &impl_->nodes));
  MINIDL_CUDA_CHECK(cudaGraphInstantiate(&impl_->exec, graph, 0));
  MINIDL_CUDA_CHECK(cudaGraphUpload(impl_->exec, gpu::stream()));
}

void CUDAGraph::replay() {
  MINIDL_CHECK(captured(), ValueError, "CUDAGraph::replay: nothing captured");
  gpu::DeviceGuard guard(impl_->device);
  MINIDL_CUDA_CHECK(cudaGraphLaunch(impl_->exec, gpu::stream()));
}

void CUDAGraph::reset() {
  if (!impl_->graph && !impl_->philox_base) return;
  gpu::DeviceGuard guard(impl_->device);
  MINIDL_CUDA_CHECK(cudaStreamSynchronize(gpu::stream()));
  if (impl_->exec) MINIDL_CUDA_CHECK(cudaGraphExecDestroy(impl_->exec));
  if (impl_->graph) {
    MINIDL_CUDA_CHECK(cudaGraphDestroy(impl_->graph));
    gpu::release_private_pool(impl_->pool);
  }
  impl_->exec = nullptr;
  impl_->graph = nullptr;
  impl_->nodes = 0;
  gpu::device_free(impl_->philox_base);
  impl_->philox_base = nullptr;
}

void CUDAGraph::debug_dump(const std::string& path) const {
  MINIDL_CHECK(impl_->graph != nullptr, ValueError, "CUDAGraph::debug_dump: nothing captured");
  // Opened here first, so that an unwritable path is reported with the system's reason (cudaGraphDebugDotPrint
  // only says "OS call failed") and is not a failing CUDA call, which compute-sanitizer reports as an error.
  {
    std::ofstream probe(path);
    MINIDL_CHECK(probe.good(), IOError, "CUDAGraph::debug_dump: could not write '", path, "' (", std::strerror(errno),
                 ")");
  }
  const cudaError_t err = cudaGraphDebugDotPrint(impl_->graph, path.c_str(), cudaGraphDebugDotFlagsVerbose);
  MINIDL_CHECK(err == cudaSuccess, IOError, "CUDAGraph::debug_dump: could not write '", path, "' (",
               cudaGetErrorString(err), ")");
}

bool CUDAGraph::captured() const { return impl_->exec != nullptr; }
std::size_t CUDAGraph::num_nodes() const { return impl_->nodes; }
bool is_capturing() { return t_capturing; }

}  // namespace cuda
}  // namespace minidl
