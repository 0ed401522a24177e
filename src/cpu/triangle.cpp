// CPU tril / triu (see kernels/backend.h): each row of each matrix is a copy of its kept columns
// (kernels/triangle.h) and fills of the others, split over the library's thread pool by rows.
#include <algorithm>

#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/triangle.h"

namespace minidl {
namespace cpu {

void triangle(const Tensor& x, std::int64_t diagonal, bool upper, Tensor& out) {
  const std::int64_t d = x.dim();
  const std::int64_t n = x.size(d - 2), m = x.size(d - 1);
  if (out.numel() == 0) return;
  kernels::dispatch_all(x.dtype(), upper ? "triu" : "tril", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* po = out.data_ptr<T>();
    parallel_for(out.numel() / m, static_cast<double>(m), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const kernels::ColumnRange keep = kernels::kept_columns(r % n, m, diagonal, upper);
        const T* src = px + r * m;
        T* dst = po + r * m;
        std::fill(dst, dst + keep.begin, T(0));
        std::copy(src + keep.begin, src + keep.end, dst + keep.begin);
        std::fill(dst + keep.end, dst + m, T(0));
      }
    });
  });
}

}  // namespace cpu
}  // namespace minidl
