// CUDA where (see kernels/backend.h): the selection of kernels/where.h through the elementwise map kernels of
// cuda/launch.cuh (16-byte packs for contiguous operands, a StridedIndex otherwise), on gpu::stream().
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/where.h"

namespace minidl {
namespace gpu {

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const i64 n = out.numel();
  if (n == 0) return;
  kernels::dispatch_all(out.dtype(), "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::run_where<T>(
        cond, a, b, out, [&](T* po, auto f, const auto*... in) { launch_map(po, n, f, in...); },
        [&](T* po, const auto& si, auto f, const auto*... in) { launch_strided_map(po, n, si, f, in...); });
  });
}

}  // namespace gpu
}  // namespace minidl
