// CUDA tril / triu (see kernels/backend.h): one thread per element, keeping the columns of kernels/triangle.h;
// on gpu::stream().
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/triangle.h"

namespace minidl {
namespace gpu {
namespace {

template <class T>
__global__ void triangle_kernel(const T* x, T* out, i64 total, i64 n, i64 m, i64 diagonal, bool upper) {
  GRID_STRIDE(e, total) {
    const i64 r = e / m, j = e - r * m;
    const kernels::ColumnRange keep = kernels::kept_columns(r % n, m, diagonal, upper);
    out[e] = j >= keep.begin && j < keep.end ? x[e] : T(0);
  }
}

}  // namespace

void triangle(const Tensor& x, std::int64_t diagonal, bool upper, Tensor& out) {
  const i64 total = out.numel();
  if (total == 0) return;
  const std::int64_t d = x.dim();
  kernels::dispatch_all(x.dtype(), upper ? "triu" : "tril", [&](auto tag) {
    using T = typename decltype(tag)::type;
    triangle_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(x.data_ptr<T>(), out.data_ptr<T>(), total,
                                                                  x.size(d - 2), x.size(d - 1), diagonal, upper);
  });
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
