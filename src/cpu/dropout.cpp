// Dropout on the CPU, in one pass: each element's uniform number (cpu/uniform_stream.h: the values uniform()
// would give), the DropoutMask rule, the multiply. The mask is written once and never read back; the three
// primitive passes (uniform, rule, multiply), which give the same values bitwise, moved six tensors' worth of
// memory instead of three and cost three fork-joins instead of one.
#include "cpu/parallel.h"
#include "cpu/uniform_stream.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {

void dropout(const Tensor& x, double p, Tensor& out, Tensor& mask) {
  const UniformStream stream = next_uniform_stream();
  kernels::dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::int64_t n = x.numel();
    const T* const xp = x.data_ptr<T>();
    T* const op = out.data_ptr<T>();
    T* const mp = mask.data_ptr<T>();
    const kernels::DropoutMask<T> rule{static_cast<T>(p)};
    parallel_for((n + 1) / 2, 45.0, [&](std::int64_t begin, std::int64_t end) {
      uniform_blocks<T>(stream, 0.0, 1.0, n, begin, end, [=](std::int64_t i, T u) {
        const T m = rule(u);
        mp[i] = m;
        op[i] = xp[i] * m;
      });
    });
  });
}

}  // namespace cpu
}  // namespace minidl
