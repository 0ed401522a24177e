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

/// For each row r of x (rows of n): keys[j] = the order key of x[r, j] (flipped when `flip`) and order = 0 .. n-1,
/// then arrange(keys, order) puts the positions wanted first; values[r, j] = x[r, order[j]] and indices[r, j] =
/// order[j] for the m outputs of a row.
template <class Arrange>
void ordered_rows(const char* op, const Tensor& x, std::int64_t rows, std::int64_t n, std::int64_t m, bool flip,
                  Tensor& values, Tensor& indices, const Arrange& arrange) {
  if (rows * m == 0) return;
  kernels::dispatch_all(x.dtype(), op, [&](auto tag) {
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
        for (std::int64_t j = 0; j < n; ++j) keys[j] = kernels::order_key(row[j], flip);
        std::iota(order.begin(), order.end(), std::int64_t{0});
        arrange(keys, order);
        for (std::int64_t j = 0; j < m; ++j) {
          pv[r * m + j] = row[order[j]];
          pi[r * m + j] = order[j];
        }
      }
    });
  });
}

}  // namespace

void sort(const Tensor& x, std::int64_t rows, std::int64_t n, bool descending, Tensor& values, Tensor& indices) {
  ordered_rows("sort", x, rows, n, n, descending, values, indices, [](const auto& keys, auto& order) {
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return keys[a] < keys[b]; });
  });
}

void topk(const Tensor& x, std::int64_t rows, std::int64_t n, std::int64_t k, bool largest, bool sorted, Tensor& values,
          Tensor& indices) {
  ordered_rows("topk", x, rows, n, k, !largest, values, indices, [&](const auto& keys, auto& order) {
    const auto before = [&](std::int64_t a, std::int64_t b) {
      return keys[a] > keys[b] || (keys[a] == keys[b] && a < b);
    };
    if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
    if (sorted) {
      std::sort(order.begin(), order.begin() + k, before);
    } else {
      std::sort(order.begin(), order.begin() + k);
    }
  });
}

}  // namespace cpu
}  // namespace minidl
