// CPU copy-family kernels (see kernels/backend.h): fill, copy with dtype conversion, arange, transpose. Eigen
// expressions evaluated on the library's thread pool.
#include "cpu/parallel.h"
#include "cpu/tensor_map.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {

void fill(Tensor& out, double value) {
  kernels::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    vec<T>(out).device(device()) = vec<T>(out).constant(static_cast<T>(value));
  });
}

void copy(const Tensor& src, Tensor& dst) {
  kernels::dispatch_all(src.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    kernels::dispatch_all(dst.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      vec<D>(dst).device(device()) = cvec<S>(src).template cast<D>();
    });
  });
}

void arange(Tensor& out, double start, double step) {
  kernels::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data_ptr<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) p[i] = static_cast<T>(start + step * static_cast<double>(i));
  });
}

void transpose(const Tensor& x, Tensor& out, std::int64_t A, std::int64_t d0, std::int64_t B, std::int64_t d1,
               std::int64_t C) {
  kernels::dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    Eigen::TensorMap<Eigen::Tensor<const T, 5, Eigen::RowMajor, Eigen::Index>> in(x.data_ptr<T>(), A, d0, B, d1, C);
    Eigen::TensorMap<Eigen::Tensor<T, 5, Eigen::RowMajor, Eigen::Index>> res(out.data_ptr<T>(), A, d1, B, d0, C);
    res.device(device()) = in.shuffle(Eigen::array<int, 5>{0, 3, 2, 1, 4});
  });
}

}  // namespace cpu
}  // namespace minidl
