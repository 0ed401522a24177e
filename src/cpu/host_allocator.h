#pragma once
// Caching allocator for CPU tensor storage. A training step frees and allocates the same activation and
// gradient sizes every time; glibc hands blocks above its mmap threshold back to the kernel on free, so each
// step would page-fault (and zero) all of its memory afresh, and page faults of many threads serialise on the
// process's page-table locks. Freed blocks are kept instead, in free lists by size class, and handed out again.
//
// MINIDL_CPU_NO_CACHE=1 makes the library's allocator allocate and free every block directly (for
// AddressSanitizer and valgrind runs, which then see each use after free).
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace minidl {
namespace cpu {

/// Counters in bytes (of size classes, i.e. as held from the system) and calls.
struct HostMemoryStats {
  std::size_t allocated = 0;       // held by live blocks
  std::size_t peak_allocated = 0;  // maximum of `allocated`
  std::size_t cached = 0;          // freed blocks kept for reuse
  std::size_t num_system_allocs = 0;
  std::size_t num_system_frees = 0;
  std::size_t num_cache_hits = 0;  // allocations served from the cache
};

class HostAllocator {
 public:
  /// Blocks start on a cache line, which is also what AVX-512 loads like.
  static constexpr std::size_t kAlignment = 64;

  /// With `caching` false every block goes straight to the system and back. Idle cached bytes never exceed
  /// `cache_limit`: a freed block that would exceed it goes back to the system.
  HostAllocator(bool caching, std::size_t cache_limit);
  ~HostAllocator();  // returns the cached blocks; live ones must be gone
  HostAllocator(const HostAllocator&) = delete;
  HostAllocator& operator=(const HostAllocator&) = delete;

  /// A kAlignment-aligned block of at least `bytes` bytes (0 gives a valid, distinct block). Throws
  /// OutOfMemoryError when the system has none.
  void* allocate(std::size_t bytes);
  /// Takes back a block from allocate(bytes), with the same `bytes`. Null is ignored.
  void deallocate(void* ptr, std::size_t bytes);
  /// Returns every cached block to the system.
  void empty_cache();
  HostMemoryStats stats() const;
  bool caching() const { return caching_; }

  /// The size class of a request: `bytes` rounded up to a multiple of kAlignment and, from 256 bytes on, to
  /// the next of the steps 1, 1.25, 1.5, 1.75 times a power of two, so a block wastes at most a fifth of
  /// itself, and a step's tensors, which recur with the same sizes, find their classes again.
  static std::size_t size_class(std::size_t bytes);

 private:
  void release_cached();  // caller holds mutex_

  const bool caching_;
  const std::size_t cache_limit_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // size class -> idle blocks
  HostMemoryStats stats_;
};

/// The allocator behind every CPU Storage: caching unless MINIDL_CPU_NO_CACHE is set to anything but "0";
/// idle blocks limited to a quarter of the machine's memory. Never destroyed (tensors in static objects may be
/// freed after the end of main).
HostAllocator& host_allocator();

}  // namespace cpu
}  // namespace minidl
