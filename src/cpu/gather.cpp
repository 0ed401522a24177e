// CPU indexed accesses (kernels/index_geometry.h) and nonzero, split over the library's thread pool. Elements are
// walked with an odometer (no division per element), and a contiguous inner dim that no index walks moves as rows
// (memcpy, or one add loop). A scatter splits its work over the dims along which the written tensor advances:
// elements that differ there write different elements, so no two tasks touch one element, and the elements that
// reach one element are applied in the row-major order of the iteration space on any number of threads.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/index_geometry.h"

namespace minidl {
namespace cpu {
namespace {

using i64 = std::int64_t;
using kernels::IndexFault;
using kernels::IndexGeometry;
using kernels::kMaxDims;
using kernels::kMaxIndices;

/// The first fault any task reports.
class FaultSlot {
 public:
  void set(int k, i64 value) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!fault_.any()) fault_ = {k, value};
  }
  IndexFault get() const { return fault_; }

 private:
  std::mutex mutex_;
  IndexFault fault_;
};

/// The offsets of a geometry's elements from `start` on, one element per next().
class Walker {
 public:
  Walker(const IndexGeometry& g, i64 start) : g_(g) {
    g.locate<false>(start, data_, other_, at_);
    for (int d = g.ndim - 1; d >= 0; --d) {
      c_[d] = start % g.sizes[d];
      start /= g.sizes[d];
    }
  }
  i64 other() const { return other_; }
  bool data(i64& off, int& bad_k, i64& bad_value) const {
    off = data_;
    return g_.resolve(off, at_, bad_k, bad_value);
  }
  void next() {
    for (int d = g_.ndim - 1; d >= 0; --d) {
      ++c_[d];
      data_ += g_.data_strides[d];
      other_ += g_.other_strides[d];
      for (int k = 0; k < g_.nidx; ++k) at_[k] += g_.index_strides[k][d];
      if (c_[d] < g_.sizes[d]) return;
      c_[d] = 0;
      data_ -= g_.data_strides[d] * g_.sizes[d];
      other_ -= g_.other_strides[d] * g_.sizes[d];
      for (int k = 0; k < g_.nidx; ++k) at_[k] -= g_.index_strides[k][d] * g_.sizes[d];
    }
  }

 private:
  const IndexGeometry& g_;
  i64 c_[kMaxDims] = {};
  i64 data_ = 0, other_ = 0;
  i64 at_[kMaxIndices] = {};
};

/// g as rows: when its innermost dim is contiguous in data and other and no index walks it, that dim is cut off
/// and `row` holds its length; otherwise row is 1 and the geometry is g itself.
struct Rows {
  IndexGeometry g;
  i64 row = 1;
};

Rows rows_of(const IndexGeometry& g) {
  Rows r{g, 1};
  const int last = g.ndim - 1;
  if (last < 0 || g.data_strides[last] != 1 || g.other_strides[last] != 1) return r;
  for (int k = 0; k < g.nidx; ++k) {
    if (g.index_strides[k][last] != 0) return r;
  }
  r.row = g.sizes[last];
  r.g.ndim = last;
  r.g.numel = g.numel / r.row;
  return r;
}

/// g's dims reordered: those along which data advances first (the tasks' split), then those where it does not
/// (walked in order inside a task); returns the number of elements of the latter per task.
i64 order_for_scatter(IndexGeometry& g) {
  IndexGeometry r = g;
  int n = 0;
  i64 inner = 1;
  for (const bool advancing : {true, false}) {
    for (int d = 0; d < g.ndim; ++d) {
      if ((g.data_strides[d] != 0) != advancing) continue;
      r.sizes[n] = g.sizes[d];
      r.data_strides[n] = g.data_strides[d];
      r.other_strides[n] = g.other_strides[d];
      for (int k = 0; k < g.nidx; ++k) r.index_strides[k][n] = g.index_strides[k][d];
      if (!advancing) inner *= g.sizes[d];
      ++n;
    }
  }
  g = r;
  return inner;
}

}  // namespace

IndexFault index_gather(const IndexGeometry& geometry, const Tensor& data, Tensor& out) {
  FaultSlot fault;
  if (geometry.numel == 0) return {};
  const Rows r = rows_of(geometry);
  kernels::dispatch_bytes(element_size(data.dtype()), "index_gather", [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* src = static_cast<const E*>(data.data_ptr());
    E* dst = static_cast<E*>(out.data_ptr());
    const i64 row = r.row;
    parallel_for(r.g.numel, static_cast<double>(row) + 4, [&](i64 begin, i64 end) {
      Walker w(r.g, begin);
      for (i64 e = begin; e < end; ++e, w.next()) {
        i64 off, bad_value;
        int bad_k;
        if (!w.data(off, bad_k, bad_value)) {
          fault.set(bad_k, bad_value);
          continue;
        }
        if (row == 1) {
          dst[w.other()] = src[off];
        } else {
          std::memcpy(dst + w.other(), src + off, static_cast<std::size_t>(row) * sizeof(E));
        }
      }
    });
  });
  return fault.get();
}

IndexFault index_scatter(const IndexGeometry& geometry, const Tensor& values, Tensor& data, bool accumulate) {
  FaultSlot fault;
  if (geometry.numel == 0) return {};
  Rows r = rows_of(geometry);
  const i64 per_task = order_for_scatter(r.g);
  const i64 tasks = r.g.numel / per_task;
  const auto run = [&](auto tag, auto apply) {
    using E = typename decltype(tag)::type;
    const E* src = static_cast<const E*>(values.data_ptr());
    E* dst = static_cast<E*>(data.data_ptr());
    const i64 row = r.row;
    parallel_for(tasks, static_cast<double>(per_task * row) + 4, [&](i64 t0, i64 t1) {
      Walker w(r.g, t0 * per_task);
      for (i64 e = t0 * per_task; e < t1 * per_task; ++e, w.next()) {
        i64 off, bad_value;
        int bad_k;
        if (!w.data(off, bad_k, bad_value)) {
          fault.set(bad_k, bad_value);
          continue;
        }
        apply(dst + off, src + w.other(), row);
      }
    });
  };
  if (accumulate) {
    kernels::dispatch_all(data.dtype(), "index_scatter", [&](auto tag) {
      using T = typename decltype(tag)::type;
      run(tag, [](T* to, const T* from, i64 row) {
        for (i64 j = 0; j < row; ++j) to[j] = kernels::accumulate_add(to[j], from[j]);
      });
    });
  } else {
    kernels::dispatch_bytes(element_size(data.dtype()), "index_scatter", [&](auto tag) {
      using E = typename decltype(tag)::type;
      run(tag, [](E* to, const E* from, i64 row) {
        if (row == 1) {
          *to = *from;
        } else {
          std::memcpy(to, from, static_cast<std::size_t>(row) * sizeof(E));
        }
      });
    });
  }
  return fault.get();
}

void index_select(const Tensor& src, const Tensor& index, Tensor& out, std::int64_t outer, std::int64_t n,
                  std::int64_t inner) {
  index_gather(kernels::select_geometry(outer, n, inner, index.numel(), index.data_ptr<i64>()), src, out);
}

std::int64_t first_out_of_range(const Tensor& index, std::int64_t n) {
  const std::int64_t* idx = index.data_ptr<std::int64_t>();
  for (std::int64_t j = 0; j < index.numel(); ++j) {
    if (idx[j] < 0 || idx[j] >= n) return j;
  }
  return -1;
}

namespace {
/// Whether element i of a contiguous x is nonzero (NaN counts as nonzero), calling f(i) for each that is, in order.
template <class F>
void for_each_nonzero(const Tensor& x, i64 begin, i64 end, F&& f) {
  kernels::dispatch_all(x.dtype(), "nonzero", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.data_ptr<T>();
    for (i64 i = begin; i < end; ++i) {
      if (kernels::convert<bool>(p[i])) f(i);
    }
  });
}

/// Blocks of a nonzero pass: enough for every thread, few enough that their counts cost nothing.
i64 nonzero_blocks(i64 n) { return std::max<i64>(1, std::min<i64>(n / 4096, 256)); }
}  // namespace

std::int64_t count_nonzero(const Tensor& x) {
  const i64 n = x.numel(), blocks = nonzero_blocks(n);
  std::vector<i64> counts(static_cast<std::size_t>(blocks), 0);
  parallel_for(blocks, static_cast<double>(n / blocks), [&](i64 b0, i64 b1) {
    for (i64 b = b0; b < b1; ++b) {
      i64 c = 0;
      for_each_nonzero(x, n * b / blocks, n * (b + 1) / blocks, [&](i64) { ++c; });
      counts[static_cast<std::size_t>(b)] = c;
    }
  });
  i64 total = 0;
  for (const i64 c : counts) total += c;
  return total;
}

void nonzero(const Tensor& x, Tensor& out) {
  const i64 n = x.numel(), blocks = nonzero_blocks(n), ndim = x.dim();
  std::vector<i64> first(static_cast<std::size_t>(blocks) + 1, 0);
  parallel_for(blocks, static_cast<double>(n / blocks), [&](i64 b0, i64 b1) {
    for (i64 b = b0; b < b1; ++b) {
      i64 c = 0;
      for_each_nonzero(x, n * b / blocks, n * (b + 1) / blocks, [&](i64) { ++c; });
      first[static_cast<std::size_t>(b) + 1] = c;
    }
  });
  for (i64 b = 0; b < blocks; ++b) first[static_cast<std::size_t>(b) + 1] += first[static_cast<std::size_t>(b)];
  i64* o = out.data_ptr<i64>();
  const Shape& sizes = x.sizes();
  parallel_for(blocks, static_cast<double>(n / blocks), [&](i64 b0, i64 b1) {
    for (i64 b = b0; b < b1; ++b) {
      i64 row = first[static_cast<std::size_t>(b)];
      for_each_nonzero(x, n * b / blocks, n * (b + 1) / blocks, [&](i64 i) {
        for (i64 d = ndim - 1; d >= 0; --d) {
          o[row * ndim + d] = i % sizes[static_cast<std::size_t>(d)];
          i /= sizes[static_cast<std::size_t>(d)];
        }
        ++row;
      });
    }
  });
}

}  // namespace cpu
}  // namespace minidl
