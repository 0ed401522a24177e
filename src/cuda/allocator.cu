#include "cuda/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/env_switch.h"
#include "cuda/context.h"
#include "minidl/cuda.h"

namespace minidl {
namespace gpu {
namespace {

constexpr std::size_t kSmallLimit = 1u << 20;     // up to 1 MiB: rounded to 512 bytes
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = 2u << 20;     // above: rounded to 2 MiB, so similar sizes share blocks

std::size_t round_size(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  const std::size_t r = bytes <= kSmallLimit ? kSmallRound : kLargeRound;
  return (bytes + r - 1) / r * r;
}

std::size_t stat_size(std::size_t bytes) { return (std::max<std::size_t>(bytes, 1) + 511) / 512 * 512; }

struct BlockInfo {
  std::size_t size;   // bytes obtained from cudaMalloc
  std::size_t stat;   // bytes counted as allocated (request rounded to 512, as PyTorch counts)
  int pool;           // 0 = general cache
};

struct DeviceAllocator {
  std::mutex mutex;
  std::map<int, std::multimap<std::size_t, void*>> free_blocks;  // pool -> size -> ptr
  std::unordered_map<void*, BlockInfo> live;
  std::unordered_map<void*, BlockInfo> cached;
  std::set<int> released_pools;
  int active_pool = 0;
  std::size_t limit = 0;  // set_per_process_memory_fraction: most bytes to reserve; 0 = no limit
  double fraction = 1.0;
  cuda::MemoryStats stats;
};

std::mutex g_mutex;
std::map<int, DeviceAllocator> g_allocators;
bool g_caching = !env_switch("MINIDL_CUDA_NO_CACHE", false);

DeviceAllocator& allocator(int dev) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_allocators[dev];
}

/// Frees every cached block of the general pool. Caller holds a.mutex.
void release_cached(DeviceAllocator& a) {
  auto& blocks = a.free_blocks[0];
  if (blocks.empty()) return;
  MINIDL_CUDA_CHECK(cudaDeviceSynchronize());  // cudaFree of memory with pending work would be undefined
  for (auto& [size, ptr] : blocks) {
    MINIDL_CUDA_CHECK(cudaFree(ptr));
    a.cached.erase(ptr);
    a.stats.reserved -= size;
    ++a.stats.num_device_frees;
  }
  blocks.clear();
}

std::string mib(std::size_t b) { return detail::str(static_cast<double>(b) / (1 << 20), " MiB"); }

bool within_limit(const DeviceAllocator& a, std::size_t size) {
  return a.limit == 0 || (a.stats.reserved <= a.limit && size <= a.limit - a.stats.reserved);
}

/// cudaMalloc, refused as the driver would when it would take the reservation past the per-process limit.
cudaError_t malloc_within_limit(DeviceAllocator& a, void** ptr, std::size_t size) {
  return within_limit(a, size) ? cudaMalloc(ptr, size) : cudaErrorMemoryAllocation;
}

}  // namespace

void* device_alloc(std::size_t bytes) {
  const int dev = current_device();
  DeviceAllocator& a = allocator(dev);
  std::lock_guard<std::mutex> lock(a.mutex);
  const std::size_t size = g_caching ? round_size(bytes) : std::max<std::size_t>(bytes, 1);
  const int pool = a.active_pool;
  void* ptr = nullptr;
  auto& blocks = a.free_blocks[pool];
  auto it = blocks.find(size);
  if (g_caching && it != blocks.end()) {
    ptr = it->second;
    blocks.erase(it);
    a.cached.erase(ptr);
  } else {
    cudaError_t err = malloc_within_limit(a, &ptr, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached(a);  // give the cache back to the driver and try once more
      err = malloc_within_limit(a, &ptr, size);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      std::size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      (void)cudaGetLastError();
      const std::string limit =
          within_limit(a, size) ? std::string()
                                : detail::str("; that exceeds the per-process limit of ", a.limit, " bytes (", mib(a.limit),
                                              ", set_per_process_memory_fraction(", a.fraction, "))");
      throw OutOfMemoryError(detail::str("CUDA out of memory on cuda:", dev, ": tried to allocate ", bytes, " bytes (",
                                         mib(bytes), "); the device has ", mib(free_b), " free of ", mib(total_b),
                                         "; minidl holds ", mib(a.stats.allocated), " in tensors and ",
                                         mib(a.stats.reserved), " reserved", limit, " (", cudaGetErrorString(err), ")"),
                             bytes, free_b, total_b);
    }
    a.stats.reserved += size;
    ++a.stats.num_device_allocs;
  }
  const BlockInfo info{size, stat_size(bytes), pool};
  a.live.emplace(ptr, info);
  a.stats.allocated += info.stat;
  a.stats.peak_allocated = std::max(a.stats.peak_allocated, a.stats.allocated);
  return ptr;
}

void device_free(void* ptr) {
  if (!ptr) return;
  const int dev = current_device();
  DeviceAllocator& a = allocator(dev);
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.live.find(ptr);
  if (it == a.live.end()) return;  // not ours: nothing sensible to do in a destructor
  BlockInfo info = it->second;
  a.live.erase(it);
  a.stats.allocated -= info.stat;
  // Without caching a block goes straight back to the driver, except one of a graph's private pool: the
  // captured graph still reads and writes it on every replay, so it is parked until the pool is released.
  const bool graph_owned = info.pool != 0 && !a.released_pools.count(info.pool);
  if (!g_caching && !graph_owned) {
    (void)cudaFree(ptr);
    a.stats.reserved -= info.size;
    ++a.stats.num_device_frees;
    return;
  }
  if (a.released_pools.count(info.pool)) info.pool = 0;
  a.free_blocks[info.pool].emplace(info.size, ptr);
  a.cached.emplace(ptr, info);
}

void begin_private_pool(int id) {
  DeviceAllocator& a = allocator(current_device());
  std::lock_guard<std::mutex> lock(a.mutex);
  a.active_pool = id;
  a.released_pools.erase(id);
}

void end_private_pool() {
  DeviceAllocator& a = allocator(current_device());
  std::lock_guard<std::mutex> lock(a.mutex);
  a.active_pool = 0;
}

void release_private_pool(int id) {
  DeviceAllocator& a = allocator(current_device());
  std::lock_guard<std::mutex> lock(a.mutex);
  a.released_pools.insert(id);
  auto& src = a.free_blocks[id];
  if (g_caching) {
    for (auto& [size, ptr] : src) {
      a.free_blocks[0].emplace(size, ptr);
      a.cached[ptr].pool = 0;
    }
  } else if (!src.empty()) {  // blocks parked by device_free: the graph is gone, so they go to the driver
    MINIDL_CUDA_CHECK(cudaDeviceSynchronize());  // a replay may still be running on them
    for (auto& [size, ptr] : src) {
      MINIDL_CUDA_CHECK(cudaFree(ptr));
      a.cached.erase(ptr);
      a.stats.reserved -= size;
      ++a.stats.num_device_frees;
    }
  }
  src.clear();
}

}  // namespace gpu

namespace cuda {

MemoryStats memory_stats(int index) {
  gpu::DeviceAllocator& a = gpu::allocator(index);
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.stats;
}

void reset_peak_memory_stats(int index) {
  gpu::DeviceAllocator& a = gpu::allocator(index);
  std::lock_guard<std::mutex> lock(a.mutex);
  a.stats.peak_allocated = a.stats.allocated;
}

void empty_cache() {
  const int n = device_count();
  for (int d = 0; d < n; ++d) {
    gpu::DeviceGuard guard(d);
    gpu::DeviceAllocator& a = gpu::allocator(d);
    std::lock_guard<std::mutex> lock(a.mutex);
    gpu::release_cached(a);
  }
}

void set_per_process_memory_fraction(double fraction, int index) {
  MINIDL_CHECK(fraction >= 0.0 && fraction <= 1.0, ValueError,
               "set_per_process_memory_fraction: fraction must lie in [0, 1], found ", fraction);
  MINIDL_CHECK(index >= 0 && index < device_count(), ValueError, "set_per_process_memory_fraction: device index ",
               index, " is out of range (", device_count(), " devices)");
  gpu::DeviceGuard guard(index);
  std::size_t free_b = 0, total_b = 0;
  MINIDL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  gpu::DeviceAllocator& a = gpu::allocator(index);
  std::lock_guard<std::mutex> lock(a.mutex);
  a.fraction = fraction;
  a.limit = fraction >= 1.0 ? 0 : std::max<std::size_t>(1, static_cast<std::size_t>(fraction * static_cast<double>(total_b)));
}

bool allocator_caching() { return gpu::g_caching; }

void set_allocator_caching(bool enabled) {
  if (!enabled) empty_cache();
  gpu::g_caching = enabled;
}

void synchronize(int index) {
  if (index < 0) index = gpu::current_device();
  gpu::DeviceGuard guard(index);
  MINIDL_CUDA_CHECK(cudaStreamSynchronize(gpu::stream()));
}

}  // namespace cuda
}  // namespace minidl
