// CUDA dropout (see kernels/backend.h): the Philox draws of uniform() (random.cuh), the DropoutMask rule and
// the multiply in one kernel, on gpu::stream().
#include "cuda/random.cuh"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace gpu {
namespace {

template <class T> struct StoreDropout {
  const T* x;
  T* out;
  T* mask;
  kernels::DropoutMask<T> rule;
  bool packed;
  __device__ void operator()(i64 g, const Pack<T>& r, int m) const {
    const bool whole = packed && m == Pack<T>::size;
    const Pack<T> xs = load_group(x, g, m, whole);  // before the stores: out may be x
    Pack<T> ms, ys;
#pragma unroll
    for (int j = 0; j < Pack<T>::size; ++j) {
      ms.v[j] = rule(r.v[j]);
      ys.v[j] = xs.v[j] * ms.v[j];
    }
    store_group(mask, g, ms, m, whole);
    store_group(out, g, ys, m, whole);
  }
};

/// bfloat16 / float16 data: the float draws of group g (as uniform() in float32 makes them) give float masks,
/// x * mask is computed in float and rounded once; the mask is stored rounded to T for the backward.
template <class T> struct StoreDropoutLowp {
  const T* x;
  T* out;
  T* mask;
  kernels::DropoutMask<float> rule;
  __device__ void operator()(i64 g, const Pack<float>& r, int m) const {
#pragma unroll
    for (int j = 0; j < Pack<float>::size; ++j) {
      if (j >= m) break;
      const i64 i = g * Pack<float>::size + j;
      const float mk = rule(r.v[j]);
      const float xv = static_cast<float>(x[i]);  // before the store: out may be x
      mask[i] = static_cast<T>(mk);
      out[i] = static_cast<T>(xv * mk);
    }
  }
};

}  // namespace

// One kernel instead of uniform + DropoutMask + multiply: the same draws, so the same masks as those three.
void dropout(const Tensor& x, double p, Tensor& out, Tensor& mask) {
  if (x.numel() == 0) return;
  kernels::dispatch_floating_lowp(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = x.data_ptr<T>();
    T* ys = out.data_ptr<T>();
    T* ms = mask.data_ptr<T>();
    if constexpr (kernels::is_reduced_float_v<T>) {
      launch_random<float>(x.numel(), false, 0.0, 1.0, StoreDropoutLowp<T>{xs, ys, ms, {static_cast<float>(p)}});
    } else {
      const bool packed = is_aligned(xs, 16) && is_aligned(ys, 16) && is_aligned(ms, 16);
      launch_random<T>(x.numel(), false, 0.0, 1.0, StoreDropout<T>{xs, ys, ms, {static_cast<T>(p)}, packed});
    }
  });
}

}  // namespace gpu
}  // namespace minidl
