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
void set_allocator_caching(bool) {}
}  // namespace cuda
}  // namespace minidl
#endif
