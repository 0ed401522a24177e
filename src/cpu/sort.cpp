// CPU sort and topk of contiguous rows (see kernels/backend.h): comparisons of the order keys of
// kernels/sort_keys.h, so the permutations are those of the GPU's radix sorts. sort is std::stable_sort per row;
// topk selects with std::nth_element under the total order (key descending, index ascending), which takes ties
// at the lower index as the GPU does, then sorts the k (by that order, or by index when not sorted).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/sort_keys.h"

namespace minidl {
namespace cpu {
namespace {

double sort_cost(std::int64_t n) { return static_cast<double>(n) * (2.0 + std::log2(static_cast<double>(n) + 1.0)); }

}  // namespace

void sort(const Tensor& x, std::int64_t rows, std::int64_t n, bool descending, Tensor& values, Tensor& indices) {
  if (rows * n == 0) return;
  kernels::dispatch_all(x.dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = kernels::key_t<T>;
    const T* px = x.data_ptr<T>();
    T* pv = values.data_ptr<T>();
    std::int64_t* pi = indices.data_ptr<std::int64_t>();
    parallel_for(rows, sort_cost(n), [&](std::int64_t begin, std::int64_t end) {
      std::vector<U> keys(static_cast<std::size_t>(n));
      std::vector<std::int64_t> order(static_cast<std::size_t>(n));
      for (std::int64_t r = begin; r < end; ++r) {
        const T* row = px + r * n;
        for (std::int64_t k = 0; k < n; ++k) keys[k] = kernels::order_key(row[k], descending);
        std::iota(order.begin(), order.end(), std::int64_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return keys[a] < keys[b]; });
        for (std::int64_t j = 0; j < n; ++j) {
          pv[r * n + j] = row[order[j]];
          pi[r * n + j] = order[j];
        }
      }
    });
  });
}

void topk(const Tensor& x, std::int64_t rows, std::int64_t n, std::int64_t k, bool largest, bool sorted, Tensor& values,
          Tensor& indices) {
  if (rows * k == 0) return;
  kernels::dispatch_all(x.dtype(), "topk", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = kernels::key_t<T>;
    const T* px = x.data_ptr<T>();
    T* pv = values.data_ptr<T>();
    std::int64_t* pi = indices.data_ptr<std::int64_t>();
    parallel_for(rows, sort_cost(n), [&](std::int64_t begin, std::int64_t end) {
      std::vector<U> keys(static_cast<std::size_t>(n));
      std::vector<std::int64_t> order(static_cast<std::size_t>(n));
      const auto before = [&](std::int64_t a, std::int64_t b) {
        return keys[a] > keys[b] || (keys[a] == keys[b] && a < b);
      };
      for (std::int64_t r = begin; r < end; ++r) {
        const T* row = px + r * n;
        for (std::int64_t j = 0; j < n; ++j) keys[j] = kernels::order_key(row[j], !largest);
        std::iota(order.begin(), order.end(), std::int64_t{0});
        if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
        if (sorted) {
          std::sort(order.begin(), order.begin() + k, before);
        } else {
          std::sort(order.begin(), order.begin() + k);
        }
        for (std::int64_t j = 0; j < k; ++j) {
          pv[r * k + j] = row[order[j]];
          pi[r * k + j] = order[j];
        }
      }
    });
  });
}

}  // namespace cpu
}  // namespace minidl
