// CPU batched matrix product (see kernels/backend.h) on the library's own GEMM (cpu/gemm.h).
#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {

void matmul(const Tensor& a, const Tensor& b, Tensor& out, std::int64_t batch, std::int64_t m, std::int64_t n,
            std::int64_t k, bool trans_a, bool trans_b) {
  kernels::dispatch_floating(out.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Transposed operands are strided views: no copies.
    const auto item = [&](std::int64_t i) -> GemmArgs<T> {
      return {m, n, k,
              {a.data_ptr<T>() + i * m * k, trans_a ? 1 : k, trans_a ? m : 1},
              {b.data_ptr<T>() + i * k * n, trans_b ? 1 : n, trans_b ? k : 1},
              {out.data_ptr<T>() + i * m * n, n, 1},
              false};
    };
    // Products too small to split (gemm_parallel would run them on this thread) are spread over the pool
    // whole instead.
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    if (batch > 1 && flops < kGemmSplitFlops) {
      parallel_for(batch, flops / 8.0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) gemm(item(i));
      });
      return;
    }
    for (std::int64_t i = 0; i < batch; ++i) gemm_parallel(item(i));
  });
}

}  // namespace cpu
}  // namespace minidl
