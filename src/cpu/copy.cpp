// CPU copy-family kernels (see kernels/backend.h): fill and copy (any strides on either side, any two dtypes,
// the conversions of kernels/convert.h), on the library's thread pool. Contiguous operands run as
// flat loops; strided ones map the first flat index of each run along the innermost dim through a
// kernels::StridedIndex and step through the run.
#include <algorithm>

#include "cpu/cpu_clones.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"
#include "kernels/strided_index.h"

namespace minidl {
namespace cpu {
namespace {

constexpr double kCopyCost = 2;     // cycles per element of a flat copy
constexpr double kStridedCost = 4;  // and of one along a run of a strided walk

/// Calls run(offsets, count, inner_strides) for the runs of flat indices in [begin, end) along si's innermost
/// dim: the index arithmetic (divisions per dim) is paid once per run, not per element (a transposed head split's
/// rows are runs of the head size).
template <int N, class Run>
void for_each_run(const kernels::StridedIndex<N>& si, std::int64_t begin, std::int64_t end, Run run) {
  const int last = si.ndim - 1;
  const std::int64_t inner = last < 0 ? 1 : si.sizes[last];
  std::int64_t step[N];
  for (int k = 0; k < N; ++k) step[k] = last < 0 ? 0 : si.strides[k][last];
  for (std::int64_t i = begin; i < end;) {
    std::int64_t off[N];
    si.offsets(i, off);
    const std::int64_t count = std::min(end - i, inner - i % inner);
    run(off, count, step);
    i += count;
  }
}

template <class S, class D>
MINIDL_CPU_CLONES void convert_range(const S* src, D* dst, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) dst[i] = kernels::convert<D>(src[i]);
}

}  // namespace

void fill(Tensor& out, double value) {
  kernels::dispatch_all(out.dtype(), "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = kernels::convert<T>(value);
    T* p = out.data_ptr<T>();
    if (out.is_contiguous()) {
      parallel_for(out.numel(), kCopyCost,
                   [&](std::int64_t begin, std::int64_t end) { std::fill(p + begin, p + end, v); });
      return;
    }
    const auto si = kernels::strided_index<1>(out.sizes(), {out.strides()}, "fill_");
    parallel_for(out.numel(), kStridedCost, [&](std::int64_t begin, std::int64_t end) {
      for_each_run(si, begin, end, [&](const std::int64_t* off, std::int64_t count, const std::int64_t* step) {
        T* d = p + off[0];
        for (std::int64_t j = 0; j < count; ++j) d[j * step[0]] = v;
      });
    });
  });
}

void copy(const Tensor& src, Tensor& dst) {
  kernels::dispatch_all(src.dtype(), "copy", [&](auto stag) {
    using S = typename decltype(stag)::type;
    kernels::dispatch_all(dst.dtype(), "copy", [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      const S* ps = src.data_ptr<S>();
      D* pd = dst.data_ptr<D>();
      if (src.is_contiguous() && dst.is_contiguous()) {
        parallel_for(dst.numel(), kCopyCost,
                     [&](std::int64_t begin, std::int64_t end) { convert_range(ps, pd, begin, end); });
        return;
      }
      const auto si = kernels::strided_index<2>(dst.sizes(), {dst.strides(), src.strides()}, "copy");
      parallel_for(dst.numel(), kStridedCost, [&](std::int64_t begin, std::int64_t end) {
        for_each_run(si, begin, end, [&](const std::int64_t* off, std::int64_t count, const std::int64_t* step) {
          D* d = pd + off[0];
          const S* s = ps + off[1];
          if (step[0] == 1 && step[1] == 1) return convert_range(s, d, 0, count);
          for (std::int64_t j = 0; j < count; ++j) d[j * step[0]] = kernels::convert<D>(s[j * step[1]]);
        });
      });
    });
  });
}

}  // namespace cpu
}  // namespace minidl
