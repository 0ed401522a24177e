#pragma once
// The CPU backend's threads, set_num_threads() of them. parallel_for, which every kernel of a training step
// uses, runs on fork-join workers that spin briefly between jobs (parallel.cpp says why); the few Eigen tensor
// expressions left (fill, copy, transpose) run on Eigen's pool through device(), whose threads sleep while
// parallel_for works. No OpenMP anywhere.
#define EIGEN_USE_THREADS
#include <cstdint>
#include <functional>
#include <unsupported/Eigen/CXX11/Tensor>

namespace minidl {
namespace cpu {

/// The shared Eigen device (its thread count follows set_num_threads()).
const Eigen::ThreadPoolDevice& device();
/// Calls fn(begin, end) on disjoint chunks covering [0, n); `cost_per_item` (in cycles) decides how finely
/// to split. Runs inline when the work is small, when called from inside another parallel_for, and when another
/// thread's parallel_for holds the workers. An exception thrown by fn is rethrown here once every chunk is done.
void parallel_for(std::int64_t n, double cost_per_item, const std::function<void(std::int64_t, std::int64_t)>& fn);
/// parallel_for cuts its work into up to this many blocks per thread, so that a thread held up elsewhere hands
/// blocks to the others; kernels that cut their own parts (the GEMM's blocks, the weight gradient's chunks,
/// parts_per_item) aim for as many.
constexpr std::int64_t kBlocksPerThread = 4;

/// Cost in cycles (parallel_for's unit) of adding one partial result that another core wrote: the read from
/// that core's cache, not the add, sets it. Counted as one cycle, a split-k GEMM's sums (8192 elements, 16
/// partials each) ran as two blocks while fourteen of sixteen threads waited.
constexpr double kRemotePartialCost = 8;

/// Into how many parts to cut each of `items` equal work items (images of a batch) so that the pool gets about
/// kBlocksPerThread parts per thread: 1 on one thread or with that many items already, at most `max_parts`.
/// With fewer items than that the slowest core sets the pace: on a shared many-core host the same GEMM run on
/// every core at once goes at rates that differ by more than 2x between cores. Not more: each part repeats some
/// work (a band's overlap rows, a range's packing), and aiming for eight parts per thread (batch 64 on 16
/// threads: two per image) made the training step slower.
std::int64_t parts_per_item(std::int64_t items, std::int64_t max_parts);

/// While one is alive on a thread, parallel_for calls made on that thread run on it alone. For background
/// threads whose work must not take the pool from the training step: a data loader's prefetch thread that took
/// it for a batch's gather made the step's own kernel, finding the pool busy, run on one thread (a convolution's
/// mean time came out about three times its median).
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  bool outer_;
};

}  // namespace cpu
}  // namespace minidl
