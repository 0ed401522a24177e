#pragma once
// The one CPU thread pool of the library. Eigen's tensor expressions and contractions run on it through
// device(); parallel_for splits plain index ranges over it. No OpenMP anywhere, so nothing oversubscribes.
#define EIGEN_USE_THREADS
#include <cstdint>
#include <functional>
#include <unsupported/Eigen/CXX11/Tensor>

namespace minidl {
namespace cpu {

/// The shared Eigen device (its thread count follows set_num_threads()).
const Eigen::ThreadPoolDevice& device();
/// Calls fn(begin, end) on disjoint chunks covering [0, n); `cost_per_item` (in cycles) decides how finely
/// to split. Runs inline when n is small.
void parallel_for(std::int64_t n, double cost_per_item, const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace cpu
}  // namespace minidl
