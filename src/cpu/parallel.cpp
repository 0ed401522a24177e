#include "cpu/parallel.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "minidl/errors.h"
#include "minidl/threads.h"

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

struct Pool {
  explicit Pool(int n) : pool(n), device(&pool, n) {}
  Eigen::ThreadPool pool;
  Eigen::ThreadPoolDevice device;
};

std::unique_ptr<Pool>& pool_slot() {
  static std::unique_ptr<Pool> pool = std::make_unique<Pool>(default_threads());
  return pool;
}

}  // namespace

const Eigen::ThreadPoolDevice& device() { return pool_slot()->device; }

void parallel_for(std::int64_t n, double cost_per_item, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  // Eigen's cost model: below ~100k cycles of work the split is not worth a hand-off to the pool.
  if (cost_per_item * static_cast<double>(n) < 1e5 || device().numThreads() <= 1) {
    fn(0, n);
    return;
  }
  device().parallelFor(n, Eigen::TensorOpCost(0, 0, cost_per_item),
                       [&fn](Eigen::Index begin, Eigen::Index end) { fn(begin, end); });
}

}  // namespace cpu

void set_num_threads(int n) {
  MINIDL_CHECK(n >= 1, ValueError, "set_num_threads: expected a thread count >= 1, found ", n);
  auto& slot = cpu::pool_slot();
  if (slot->device.numThreads() == n) return;
  slot = std::make_unique<cpu::Pool>(n);
}

int get_num_threads() { return cpu::device().numThreads(); }

}  // namespace minidl
