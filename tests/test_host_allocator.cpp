// The caching host allocator behind CPU tensor storage (src/cpu/host_allocator.h).
#include <gtest/gtest.h>
#include <minidl/minidl.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "cpu/host_allocator.h"

using minidl::cpu::HostAllocator;

namespace {

constexpr std::size_t kNoLimit = std::numeric_limits<std::size_t>::max() / 2;

bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % HostAllocator::kAlignment == 0; }

}  // namespace

TEST(HostAllocator, SizeClassesCoverTheRequestWithAtMostAFifthOfSlack) {
  EXPECT_EQ(HostAllocator::size_class(0), 64u);
  EXPECT_EQ(HostAllocator::size_class(1), 64u);
  EXPECT_EQ(HostAllocator::size_class(64), 64u);
  EXPECT_EQ(HostAllocator::size_class(65), 128u);
  EXPECT_EQ(HostAllocator::size_class(128), 128u);
  EXPECT_EQ(HostAllocator::size_class(129), 192u);
  EXPECT_EQ(HostAllocator::size_class(257), 320u);
  EXPECT_EQ(HostAllocator::size_class(1000), 1024u);
  EXPECT_EQ(HostAllocator::size_class(1025), 1280u);
  EXPECT_EQ(HostAllocator::size_class(1536), 1536u);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const std::size_t bytes = rng() % (std::size_t{1} << (1 + rng() % 36));
    const std::size_t cls = HostAllocator::size_class(bytes);
    ASSERT_GE(cls, bytes);
    ASSERT_EQ(cls % HostAllocator::kAlignment, 0u) << bytes;
    ASSERT_LE(cls - bytes, std::max<std::size_t>(cls / 5, HostAllocator::kAlignment)) << bytes;
    ASSERT_EQ(HostAllocator::size_class(cls), cls) << bytes;  // a class is its own class
  }
}

TEST(HostAllocator, BlocksAreAlignedDistinctAndWritable) {
  for (bool caching : {true, false}) {
    HostAllocator a(caching, kNoLimit);
    std::vector<std::pair<unsigned char*, std::size_t>> blocks;
    std::mt19937 rng(1);
    for (std::size_t bytes : {0, 1, 63, 64, 65, 1000, 4096, 100000, 3 << 20}) {
      auto* p = static_cast<unsigned char*>(a.allocate(bytes));
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned(p)) << bytes;
      std::memset(p, static_cast<int>(rng() & 0xff), std::max<std::size_t>(bytes, 1));
      blocks.emplace_back(p, bytes);
    }
    std::set<unsigned char*> distinct;
    for (auto& b : blocks) distinct.insert(b.first);
    EXPECT_EQ(distinct.size(), blocks.size());
    for (auto& b : blocks) a.deallocate(b.first, b.second);
    a.deallocate(nullptr, 10);  // ignored
    EXPECT_EQ(a.stats().allocated, 0u);
  }
}

TEST(HostAllocator, FreedBlocksAreReusedForRequestsOfTheirClass) {
  HostAllocator a(true, kNoLimit);
  void* p = a.allocate(1 << 20);
  a.deallocate(p, 1 << 20);
  EXPECT_EQ(a.allocate((1 << 20) - 100), p);  // same class
  void* q = a.allocate(1 << 20);               // the cached block is taken: a new one
  EXPECT_NE(q, p);
  void* r = a.allocate(2 << 20);  // another class never takes a cached block of this one
  a.deallocate(q, 1 << 20);
  void* s = a.allocate(3 << 20);
  EXPECT_NE(s, q);
  const minidl::cpu::HostMemoryStats st = a.stats();
  EXPECT_EQ(st.num_cache_hits, 1u);
  EXPECT_EQ(st.num_system_allocs, 4u);
  EXPECT_EQ(st.cached, std::size_t{1} << 20);
  a.deallocate(p, (1 << 20) - 100);
  a.deallocate(r, 2 << 20);
  a.deallocate(s, 3 << 20);
}

TEST(HostAllocator, StatisticsFollowAllocationsAndEmptyCache) {
  HostAllocator a(true, kNoLimit);
  const std::size_t c1 = HostAllocator::size_class(5000), c2 = HostAllocator::size_class(70000);
  void* p = a.allocate(5000);
  void* q = a.allocate(70000);
  minidl::cpu::HostMemoryStats st = a.stats();
  EXPECT_EQ(st.allocated, c1 + c2);
  EXPECT_EQ(st.peak_allocated, c1 + c2);
  EXPECT_EQ(st.cached, 0u);
  EXPECT_EQ(st.num_system_allocs, 2u);
  a.deallocate(q, 70000);
  st = a.stats();
  EXPECT_EQ(st.allocated, c1);
  EXPECT_EQ(st.peak_allocated, c1 + c2);
  EXPECT_EQ(st.cached, c2);
  EXPECT_EQ(st.num_system_frees, 0u);
  a.empty_cache();
  st = a.stats();
  EXPECT_EQ(st.cached, 0u);
  EXPECT_EQ(st.num_system_frees, 1u);
  a.deallocate(p, 5000);
  st = a.stats();
  EXPECT_EQ(st.allocated, 0u);
  EXPECT_EQ(st.cached, c1);
}

TEST(HostAllocator, CacheLimitSendsFurtherBlocksBackToTheSystem) {
  const std::size_t cls = HostAllocator::size_class(10000);
  HostAllocator a(true, 2 * cls);
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(a.allocate(10000));
  for (void* p : blocks) a.deallocate(p, 10000);
  const minidl::cpu::HostMemoryStats st = a.stats();
  EXPECT_EQ(st.cached, 2 * cls);
  EXPECT_EQ(st.num_system_frees, 3u);
}

TEST(HostAllocator, BypassAllocatesAndFreesEveryBlockDirectly) {
  HostAllocator a(false, kNoLimit);
  EXPECT_FALSE(a.caching());
  for (int i = 0; i < 3; ++i) a.deallocate(a.allocate(1 << 16), 1 << 16);
  const minidl::cpu::HostMemoryStats st = a.stats();
  EXPECT_EQ(st.num_system_allocs, 3u);
  EXPECT_EQ(st.num_system_frees, 3u);
  EXPECT_EQ(st.num_cache_hits, 0u);
  EXPECT_EQ(st.cached, 0u);
  EXPECT_EQ(st.allocated, 0u);
}

TEST(HostAllocator, ConcurrentAllocationsFromManyThreadsStayConsistent) {
  HostAllocator a(true, kNoLimit);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&a, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 2000; ++i) {
        const std::size_t bytes = 64 + rng() % 100000;
        auto* p = static_cast<unsigned char*>(a.allocate(bytes));
        const auto tag = static_cast<unsigned char>(t * 31 + i);
        p[0] = tag;
        p[bytes - 1] = tag;
        std::this_thread::yield();
        ASSERT_EQ(p[0], tag);  // nobody else was handed this block meanwhile
        ASSERT_EQ(p[bytes - 1], tag);
        a.deallocate(p, bytes);
      }
    });
  }
  for (auto& th : threads) th.join();
  const minidl::cpu::HostMemoryStats st = a.stats();
  EXPECT_EQ(st.allocated, 0u);
  EXPECT_EQ(st.num_cache_hits + st.num_system_allocs, 16000u);
  EXPECT_GT(st.num_cache_hits, 0u);
}

TEST(HostAllocator, RequestsWhoseClassWouldOverflowAreOutOfMemoryErrors) {
  HostAllocator a(true, kNoLimit);
  EXPECT_THROW(a.allocate(std::numeric_limits<std::size_t>::max() - 10), minidl::OutOfMemoryError);
  EXPECT_EQ(a.stats().allocated, 0u);
}

TEST(HostAllocator, CpuTensorsUseTheLibraryAllocatorAndReuseTheirMemory) {
  minidl::cpu::HostAllocator& lib = minidl::cpu::host_allocator();
  const bool caching = lib.caching();  // false under MINIDL_CPU_NO_CACHE=1
  const std::size_t before = lib.stats().allocated;
  const void* first;
  {
    minidl::Tensor t = minidl::randn({123, 457});
    first = t.data_ptr();
    EXPECT_TRUE(aligned(first));
    EXPECT_GE(lib.stats().allocated, before + HostAllocator::size_class(123 * 457 * 4));
  }
  EXPECT_EQ(lib.stats().allocated, before);
  const std::size_t hits = lib.stats().num_cache_hits;
  minidl::Tensor again = minidl::empty({123, 457});
  if (caching) {
    EXPECT_EQ(again.data_ptr(), first);
    EXPECT_EQ(lib.stats().num_cache_hits, hits + 1);
  } else {
    EXPECT_EQ(lib.stats().num_cache_hits, hits);
  }
}
