#include "cpu/host_allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/env_switch.h"
#include "minidl/errors.h"

namespace minidl {
namespace cpu {
namespace {


std::size_t quarter_of_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::size_t{1} << 30;
  return static_cast<std::size_t>(pages) / 4 * static_cast<std::size_t>(page);
}

}  // namespace

HostAllocator::HostAllocator(bool caching, std::size_t cache_limit) : caching_(caching), cache_limit_(cache_limit) {}

HostAllocator::~HostAllocator() { empty_cache(); }

std::size_t HostAllocator::size_class(std::size_t bytes) {
  if (bytes <= kAlignment) return kAlignment;
  // The largest power of two p <= bytes - 1; the classes between p and 2p are p + i * p / 4, i = 1..4, on
  // kAlignment steps while p / 4 is smaller.
  std::size_t p = kAlignment;
  while (p <= (bytes - 1) / 2) p *= 2;
  const std::size_t quarter = std::max(p / 4, kAlignment);
  return p + (bytes - p + quarter - 1) / quarter * quarter;
}

void* HostAllocator::allocate(std::size_t bytes) {
  const auto out_of_memory = [&] {
    return OutOfMemoryError(detail::str("CPU out of memory: tried to allocate ", bytes,
                                        " bytes (minidl's tensors hold ", stats_.allocated, ")"),
                            bytes, 0, 0);
  };
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > std::numeric_limits<std::size_t>::max() / 2) throw out_of_memory();  // its class would overflow
  const std::size_t size = size_class(bytes);
  auto it = caching_ ? free_.find(size) : free_.end();
  void* ptr = nullptr;
  if (it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.cached -= size;
    ++stats_.num_cache_hits;
  } else {
    ptr = std::aligned_alloc(kAlignment, size);
    if (!ptr && stats_.cached > 0) {  // the cache holds memory of other sizes: give it back and try again
      release_cached();
      ptr = std::aligned_alloc(kAlignment, size);
    }
    if (!ptr) throw out_of_memory();
    ++stats_.num_system_allocs;
  }
  stats_.allocated += size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return ptr;
}

void HostAllocator::deallocate(void* ptr, std::size_t bytes) {
  if (!ptr) return;
  const std::size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.allocated -= size;
  if (caching_ && stats_.cached + size <= cache_limit_) {
    free_[size].push_back(ptr);
    stats_.cached += size;
    return;
  }
  std::free(ptr);
  ++stats_.num_system_frees;
}

void HostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached();
}

void HostAllocator::release_cached() {
  for (auto& [size, blocks] : free_) {
    for (void* b : blocks) std::free(b);
    stats_.num_system_frees += blocks.size();
  }
  free_.clear();
  stats_.cached = 0;
}

HostMemoryStats HostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

HostAllocator& host_allocator() {
  static HostAllocator* const allocator =
      new HostAllocator(!env_switch("MINIDL_CPU_NO_CACHE", false), quarter_of_memory());
  return *allocator;
}

}  // namespace cpu
}  // namespace minidl
