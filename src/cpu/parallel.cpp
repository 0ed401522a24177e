#include "cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "minidl/errors.h"
#include "minidl/threads.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MINIDL_CPU_RELAX() _mm_pause()
#else
#define MINIDL_CPU_RELAX() std::this_thread::yield()
#endif

namespace minidl {
namespace cpu {
namespace {

int default_threads() {
  if (const char* env = std::getenv("MINIDL_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

/// True on a thread while it runs part of a parallel_for, or holds a SerialScope: a parallel_for there runs inline.
thread_local bool t_in_parallel_for = false;

/// The fork-join workers behind parallel_for: threads - 1 workers, the calling thread being the last.
///
/// A training step is a chain of parallel ops a few tens of microseconds apart (autograd bookkeeping and
/// allocation run in between, on the calling thread). Eigen's pool parks its workers in the kernel within a
/// few microseconds of running out of work, and waking them costs tens of microseconds per op, several times a
/// back-to-back dispatch (docs/BENCHMARKS.md): that latency, not the work, was
/// what kept the step from scaling. These workers spin for kSpinMicros after each job (as OpenMP runtimes do)
/// before sleeping on a condition variable.
///
/// A job is published by bumping `generation_`; every worker takes part in every job (claiming blocks until none
/// are left, possibly none) and acknowledges it in `acked_`, and the caller returns only once all have: so no
/// worker can still be looking at a job when the next one is published.
class SpinPool {
 public:
  static constexpr int kSpinMicros = 100;

  explicit SpinPool(int threads) {
    for (int i = 0; i + 1 < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  ~SpinPool() {
    {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      stop_.store(true);
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  /// Runs fn over `blocks` blocks covering [0, n) on all threads; false (nothing run) when another thread's job
  /// is in progress.
  bool run(std::int64_t n, std::int64_t blocks, const std::function<void(std::int64_t, std::int64_t)>& fn) {
    std::unique_lock<std::mutex> submit(submit_, std::try_to_lock);
    if (!submit.owns_lock()) return false;
    fn_ = &fn;
    n_ = n;
    blocks_ = blocks;
    next_.store(0, std::memory_order_relaxed);
    acked_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    generation_.fetch_add(1);  // seq_cst: ordered against a worker's sleepers_ increment, see worker_loop
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_.notify_all();
    }
    work();
    for (int i = 0; acked_.load(std::memory_order_acquire) < static_cast<int>(workers_.size()); ++i) relax(i);
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  /// One wait of a spin loop: a pause at first, then a yield, so that on a machine with more runnable threads
  /// than cores (a shared CI machine) the thread being waited for gets the core.
  static void relax(int iteration) {
    if (iteration < kPausesBeforeYield) {
      MINIDL_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  static constexpr int kPausesBeforeYield = 2000;

  /// Claims and runs blocks of the current job until none are left.
  void work() {
    t_in_parallel_for = true;
    for (std::int64_t b; (b = next_.fetch_add(1, std::memory_order_relaxed)) < blocks_;) {
      try {
        (*fn_)(b * n_ / blocks_, (b + 1) * n_ / blocks_);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    t_in_parallel_for = false;
  }

  void worker_loop() {
    std::uint64_t seen = 0;
    for (;;) {
      const auto spin_end = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
      for (int i = 0; generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed);
           ++i) {
        relax(i);
        if (i % 64 == 0 && std::chrono::steady_clock::now() > spin_end) {
          std::unique_lock<std::mutex> lock(sleep_mutex_);
          sleepers_.fetch_add(1);  // seq_cst: a publisher either sees it and notifies, or we see its generation
          wake_.wait(lock, [&] { return generation_.load() != seen || stop_.load(); });
          sleepers_.fetch_sub(1);
          break;
        }
      }
      if (stop_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      work();
      acked_.fetch_add(1, std::memory_order_release);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex submit_;  // one job at a time
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> generation_{0};
  // The current job, written by the publisher before generation_ is bumped.
  const std::function<void(std::int64_t, std::int64_t)>* fn_ = nullptr;
  std::int64_t n_ = 0, blocks_ = 0;
  std::atomic<std::int64_t> next_{0};
  std::atomic<int> acked_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

struct Pool {
  explicit Pool(int n) : pool(n), device(&pool, n), spin(n), threads(n) {}
  Eigen::ThreadPool pool;  // Eigen's expressions (fill, copy, transpose) run on this one
  Eigen::ThreadPoolDevice device;
  SpinPool spin;
  int threads;
};

std::unique_ptr<Pool>& pool_slot() {
  static std::unique_ptr<Pool> pool = std::make_unique<Pool>(default_threads());
  return pool;
}

}  // namespace

const Eigen::ThreadPoolDevice& device() { return pool_slot()->device; }

std::int64_t parts_per_item(std::int64_t items, std::int64_t max_parts) {
  const std::int64_t threads = pool_slot()->threads;
  if (threads <= 1 || items <= 0) return 1;
  return std::clamp<std::int64_t>((kBlocksPerThread * threads + items - 1) / items, 1,
                                  std::max<std::int64_t>(1, max_parts));
}

SerialScope::SerialScope() : outer_(t_in_parallel_for) { t_in_parallel_for = true; }
SerialScope::~SerialScope() { t_in_parallel_for = outer_; }

void parallel_for(std::int64_t n, double cost_per_item, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  Pool& pool = *pool_slot();
  // Below ~100k cycles of work (Eigen's threshold) the split is not worth a hand-off. Nested calls, and calls
  // from a second thread while the pool is busy (a data loader's gathers), run on the calling thread.
  if (cost_per_item * static_cast<double>(n) < 1e5 || pool.threads <= 1 || t_in_parallel_for) {
    fn(0, n);
    return;
  }
  // Blocks of at least ~50k cycles, up to four per thread, so that threads slowed by other work (or a shared
  // machine) hand their remaining blocks to the others.
  const auto by_cost = static_cast<std::int64_t>(cost_per_item * static_cast<double>(n) / 5e4);
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min({n, kBlocksPerThread * pool.threads, by_cost}));
  if (!pool.spin.run(n, blocks, fn)) fn(0, n);
}

}  // namespace cpu

void set_num_threads(int n) {
  MINIDL_CHECK(n >= 1, ValueError, "set_num_threads: expected a thread count >= 1, found ", n);
  auto& slot = cpu::pool_slot();
  if (slot->threads == n) return;
  slot = std::make_unique<cpu::Pool>(n);
}

int get_num_threads() { return cpu::pool_slot()->threads; }

}  // namespace minidl
