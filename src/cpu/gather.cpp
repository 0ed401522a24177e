// CPU row gather and scatter-add (see kernels/backend.h), split over the library's thread pool.
#include <cstring>

#include "cpu/parallel.h"
#include "kernels/dispatch_types.h"
#include "kernels/backend.h"

namespace minidl {
namespace cpu {

void index_select(const Tensor& src, const Tensor& index, Tensor& out, std::int64_t outer, std::int64_t n,
                  std::int64_t inner) {
  const std::int64_t k = index.numel();
  const std::int64_t* idx = index.data_ptr<std::int64_t>();
  const std::size_t row_bytes = static_cast<std::size_t>(inner) * element_size(src.dtype());
  const char* s = static_cast<const char*>(src.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  // One task per output row (o, j): a contiguous copy of `inner` elements.
  parallel_for(outer * k, static_cast<double>(row_bytes), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t b = r / k, j = r % k;
      std::memcpy(o + static_cast<std::size_t>(r) * row_bytes,
                  s + static_cast<std::size_t>(b * n + idx[j]) * row_bytes, row_bytes);
    }
  });
}

void index_add(const Tensor& src, const Tensor& index, Tensor& dst, std::int64_t outer, std::int64_t n,
               std::int64_t inner) {
  const std::int64_t k = index.numel();
  const std::int64_t* idx = index.data_ptr<std::int64_t>();
  kernels::dispatch_floating(dst.dtype(), "index_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = src.data_ptr<T>();
    T* d = dst.data_ptr<T>();
    // Split over the inner columns: each task owns its columns of dst, so repeated indices need no locking
    // and every element sums its contributions in the order of j on any number of threads.
    parallel_for(inner, static_cast<double>(outer * k), [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t b = 0; b < outer; ++b) {
        for (std::int64_t j = 0; j < k; ++j) {
          const T* from = s + (b * k + j) * inner;
          T* to = d + (b * n + idx[j]) * inner;
          for (std::int64_t i = i0; i < i1; ++i) to[i] += from[i];
        }
      }
    });
  });
}

std::int64_t first_out_of_range(const Tensor& index, std::int64_t n) {
  const std::int64_t* idx = index.data_ptr<std::int64_t>();
  for (std::int64_t j = 0; j < index.numel(); ++j) {
    if (idx[j] < 0 || idx[j] >= n) return j;
  }
  return -1;
}

}  // namespace cpu
}  // namespace minidl
