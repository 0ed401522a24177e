// CPU copy-family kernels (see kernels/backend.h): fill and copy (any strides on either side, any two dtypes,
// the conversions of kernels/convert.h), on the library's thread pool. Contiguous operands run as
// flat loops; strided ones map each flat index through a kernels::StridedIndex.
#include "cpu/cpu_clones.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"
#include "kernels/strided_index.h"

namespace minidl {
namespace cpu {
namespace {

constexpr double kCopyCost = 2;      // cycles per element of a flat copy
constexpr double kStridedCost = 20;  // and of one through index arithmetic

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
      for (std::int64_t i = begin; i < end; ++i) {
        std::int64_t off[1];
        si.offsets(i, off);
        p[off[0]] = v;
      }
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
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t off[2];
          si.offsets(i, off);
          pd[off[0]] = kernels::convert<D>(ps[off[1]]);
        }
      });
    });
  });
}

}  // namespace cpu
}  // namespace minidl
