// CPU range kernels (see kernels/backend.h): arange, linspace and logspace, element i computed on its own from
// the formulas of kernels/range.h, split over the thread pool.
#include "kernels/range.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"

namespace minidl {
namespace cpu {
namespace {

template <class T, class F>
void fill_indexed(Tensor& out, double cost, const F& f) {
  T* const p = out.data_ptr<T>();
  parallel_for(out.numel(), cost, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) p[i] = f(i);
  });
}

}  // namespace

void arange(Tensor& out, double start, double step) {
  kernels::dispatch_all(out.dtype(), "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_indexed<T>(out, 4.0, kernels::Arange<T>{start, step});
  });
}

void linspace(Tensor& out, double start, double end) {
  kernels::dispatch(kernels::RangeTypes{}, out.dtype(), "linspace", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_indexed<T>(out, 6.0, kernels::Linspace<T>{kernels::LinspaceTerm<T>(start, end, out.numel())});
  });
}

void logspace(Tensor& out, double start, double end, double base) {
  kernels::dispatch(kernels::RangeTypes{}, out.dtype(), "logspace", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_indexed<T>(out, 60.0, kernels::Logspace<T>(start, end, out.numel(), base));
  });
}

}  // namespace cpu
}  // namespace minidl
