// cpu::parallel_for (src/cpu/parallel.h): every index exactly once on any thread count, nested and concurrent
// calls, exceptions, SerialScope.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cpu/parallel.h"
#include "minidl/threads.h"

namespace {

/// Restores the thread count a test changes.
class CpuParallel : public ::testing::Test {
 protected:
  void TearDown() override { minidl::set_num_threads(saved_); }
  int saved_ = minidl::get_num_threads();
};

/// Runs parallel_for over [0, n) and checks that each index was visited exactly once.
void expect_each_index_once(std::int64_t n, double cost) {
  std::vector<std::atomic<int>> visits(static_cast<std::size_t>(n));
  minidl::cpu::parallel_for(n, cost, [&](std::int64_t begin, std::int64_t end) {
    ASSERT_LE(0, begin);
    ASSERT_LE(begin, end);
    ASSERT_LE(end, n);
    for (std::int64_t i = begin; i < end; ++i) visits[static_cast<std::size_t>(i)].fetch_add(1);
  });
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[static_cast<std::size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
}

TEST_F(CpuParallel, EveryIndexExactlyOnceOnAnyThreadCount) {
  for (int threads : {1, 2, 3, 16}) {
    minidl::set_num_threads(threads);
    for (std::int64_t n : {1, 2, 5, 16, 63, 64, 1000, 100003}) {
      expect_each_index_once(n, 1e6);  // split as finely as allowed
      expect_each_index_once(n, 1.0);  // small work: inline
    }
    std::atomic<int> calls{0};
    minidl::cpu::parallel_for(0, 1e6, [&](std::int64_t, std::int64_t) { ++calls; });
    EXPECT_EQ(calls.load(), 0);
  }
}

TEST_F(CpuParallel, ManyCallsInARowWithPausesBetween) {
  minidl::set_num_threads(4);
  for (int round = 0; round < 300; ++round) {
    if (round % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the workers fall asleep
    expect_each_index_once(97, 1e5);
  }
}

TEST_F(CpuParallel, NestedCallsRunInline) {
  minidl::set_num_threads(4);
  const std::int64_t outer = 8, inner = 50;
  std::vector<std::atomic<int>> visits(static_cast<std::size_t>(outer * inner));
  minidl::cpu::parallel_for(outer, 1e6, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      minidl::cpu::parallel_for(inner, 1e6, [&](std::int64_t ib, std::int64_t ie) {
        for (std::int64_t i = ib; i < ie; ++i) visits[static_cast<std::size_t>(o * inner + i)].fetch_add(1);
      });
    }
  });
  for (auto& v : visits) EXPECT_EQ(v.load(), 1);
}

TEST_F(CpuParallel, ConcurrentCallersFromTwoThreadsBothComplete) {
  minidl::set_num_threads(4);
  std::thread other([] {
    for (int r = 0; r < 200; ++r) expect_each_index_once(1000, 1e4);
  });
  for (int r = 0; r < 200; ++r) expect_each_index_once(1000, 1e4);
  other.join();
}

TEST_F(CpuParallel, ExceptionsReachTheCallerAfterAllChunks) {
  for (int threads : {1, 4}) {
    minidl::set_num_threads(threads);
    std::atomic<std::int64_t> done{0};
    EXPECT_THROW(minidl::cpu::parallel_for(64, 1e6,
                                           [&](std::int64_t b, std::int64_t e) {
                                             if (b <= 13 && 13 < e) throw std::runtime_error("chunk with 13");
                                             done += e - b;
                                           }),
                 std::runtime_error);
    EXPECT_LT(done.load(), 64);
    expect_each_index_once(64, 1e6);  // the pool still works
  }
}

/// The chunks one parallel_for over [0, n) was cut into, and whether all ran on the calling thread.
struct Split {
  int chunks;
  bool all_on_caller;
};
Split split_of(std::int64_t n) {
  std::atomic<int> chunks{0}, elsewhere{0};
  const std::thread::id caller = std::this_thread::get_id();
  minidl::cpu::parallel_for(n, 1e6, [&](std::int64_t, std::int64_t) {
    ++chunks;
    if (std::this_thread::get_id() != caller) ++elsewhere;
  });
  return {chunks.load(), elsewhere.load() == 0};
}

TEST_F(CpuParallel, SerialScopeRunsCallsOnTheCallingThreadUntilItEnds) {
  minidl::set_num_threads(4);
  EXPECT_GT(split_of(64).chunks, 1);
  {
    const minidl::cpu::SerialScope outer;
    {
      const minidl::cpu::SerialScope inner;
      const Split s = split_of(64);
      EXPECT_EQ(s.chunks, 1);
      EXPECT_TRUE(s.all_on_caller);
    }
    const Split s = split_of(64);  // the inner scope's end leaves the outer one in force
    EXPECT_EQ(s.chunks, 1);
    EXPECT_TRUE(s.all_on_caller);
    expect_each_index_once(100003, 1e6);
  }
  EXPECT_GT(split_of(64).chunks, 1);
  // A scope on another thread leaves this one's calls split.
  std::promise<void> entered, leave;
  std::thread other([&] {
    const minidl::cpu::SerialScope scope;
    entered.set_value();
    leave.get_future().wait();
  });
  entered.get_future().wait();
  EXPECT_GT(split_of(64).chunks, 1);
  leave.set_value();
  other.join();
}

}  // namespace
