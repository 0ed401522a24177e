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

}  // namespace cpu
}  // namespace minidl
