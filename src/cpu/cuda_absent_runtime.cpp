// CPU-only build: the CUDA runtime entry points of minidl/cuda.h answer that CUDA is not built in.
#include "minidl/config.h"
#if !MINIDL_CUDA_ENABLED
#include "kernels/backend.h"
#include "minidl/cuda.h"

namespace minidl {
namespace cuda {
void synchronize(int) {}
MemoryStats memory_stats(int) { detail::throw_cuda_not_built(); }
void reset_peak_memory_stats(int) { detail::throw_cuda_not_built(); }
void empty_cache() {}
void set_per_process_memory_fraction(double, int) { detail::throw_cuda_not_built(); }
void set_allocator_caching(bool) {}
bool allocator_caching() { return false; }

struct CUDAGraph::Impl {};
CUDAGraph::CUDAGraph() : impl_(nullptr) {}
CUDAGraph::~CUDAGraph() = default;
void CUDAGraph::capture_begin() { detail::throw_cuda_not_built(); }
void CUDAGraph::capture_end() { detail::throw_cuda_not_built(); }
void CUDAGraph::replay() { detail::throw_cuda_not_built(); }
void CUDAGraph::reset() {}
bool CUDAGraph::captured() const { return false; }
std::size_t CUDAGraph::num_nodes() const { return 0; }
void CUDAGraph::debug_dump(const std::string&) const { detail::throw_cuda_not_built(); }
bool is_capturing() { return false; }
void profiler_start() {}
void profiler_stop() {}
std::vector<std::string> conv2d_algorithm_choices() { return {}; }
}  // namespace cuda
}  // namespace minidl
#endif
