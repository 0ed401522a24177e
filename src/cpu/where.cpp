// CPU where (see kernels/backend.h): the selection of kernels/where.h over the library's thread pool, in the
// flat, rows or StridedIndex form that kernels::run_where picks.
#include "cpu/cpu_clones.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/where.h"

namespace minidl {
namespace cpu {
namespace {

constexpr double kSelectCost = 2;    // cycles per element of the flat loop
constexpr double kStridedCost = 20;  // and of one through index arithmetic

template <class T, class F, class... In>
MINIDL_CPU_CLONES void map_range(T* out, F f, std::int64_t begin, std::int64_t end, const In*... in) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(in[i]...);
}

}  // namespace

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const std::int64_t n = out.numel();
  kernels::dispatch_all(out.dtype(), "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::run_where<T>(
        cond, a, b, out,
        [&](T* po, auto f, const auto*... in) {
          parallel_for(n, kSelectCost,
                       [&](std::int64_t begin, std::int64_t end) { map_range(po, f, begin, end, in...); });
        },
        [&](T* po, std::int64_t rows, std::int64_t cols, auto f, auto... in) {
          parallel_for(rows, static_cast<double>(cols) * kSelectCost, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t r = begin; r < end; ++r) {
              map_range(po + r * cols, f, 0, cols, in.p + r * in.row_stride...);
            }
          });
        },
        [&](T* po, const auto& si, auto f, const bool* pc, const T* pa, const T* pb) {
          parallel_for(n, kStridedCost, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t i = begin; i < end; ++i) {
              std::int64_t off[4];
              si.offsets(i, off);
              po[off[0]] = f(pc[off[1]], pa[off[2]], pb[off[3]]);
            }
          });
        });
  });
}

}  // namespace cpu
}  // namespace minidl
