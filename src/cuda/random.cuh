#pragma once
// The Philox kernel behind the CUDA random kernels (random.cu: uniform, normal) and dropout (dropout.cu), so
// that dropout's masks are the draws uniform() would make.
#include <curand_kernel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/generator.h"
#include "cuda/launch.cuh"
#include "minidl/cuda.h"

namespace minidl {
namespace gpu {

// Random numbers: one Philox draw gives 128 bits, a pack of T (4 floats, or 2 doubles of 64 bits each). Element
// group g, pack g of the output, draws from Philox subsequence g at the reserved offset, so the values do not
// depend on the launch configuration.

/// Group g of p (m elements, m < the pack size only at the end): one 16-byte access when `whole`, else m scalars.
template <class T> __device__ Pack<T> load_group(const T* p, i64 g, int m, bool whole) {
  constexpr int k = Pack<T>::size;
  if (whole) return load_wide<k>(p + g * k);
  Pack<T> r{};
#pragma unroll
  for (int j = 0; j < k; ++j) {
    if (j < m) r.v[j] = p[g * k + j];
  }
  return r;
}
template <class T> __device__ void store_group(T* p, i64 g, const Pack<T>& r, int m, bool whole) {
  constexpr int k = Pack<T>::size;
  if (whole) return store_wide(p + g * k, r);
#pragma unroll
  for (int j = 0; j < k; ++j) {
    if (j < m) p[g * k + j] = r.v[j];
  }
}

/// Where random_kernel puts the m draws of group g: into `out` (rand, randn), or as a dropout mask with the
/// masked input. `packed`: every pointer is 16-byte aligned, so whole groups move as packs.
template <class T> struct StoreDraw {
  T* out;
  bool packed;
  __device__ void operator()(i64 g, const Pack<T>& r, int m) const {
    store_group(out, g, r, m, packed && m == Pack<T>::size);
  }
};

/// `unit`: uniform on [0, 1) (a = 0, b = 1, dropout's draws). There 1 - u computed in float equals the double
/// expression rounded to float for every float u in (0, 1] (checked exhaustively on the host: where 1 - u is not
/// exact in double, u < 2^-30, both round to 1), so the float path skips the conversions to and from double with
/// bitwise the same values; for double the two are the same expression.
template <class T, class Store>
__global__ void random_kernel(i64 n, unsigned long long seed, unsigned long long offset, const std::uint64_t* offset_base,
                              bool normal, bool unit, double a, double b, T top, Store store) {
  constexpr int k = Pack<T>::size;
  static_assert(k == 4 || k == 2, "random_kernel: float or double");
  if (offset_base) offset += *offset_base;  // set inside a captured graph: fresh numbers every replay
  const i64 groups = (n + k - 1) / k;
  GRID_STRIDE(g, groups) {
    curandStatePhilox4_32_10_t st;
    curand_init(seed, static_cast<unsigned long long>(g), offset, &st);
    Pack<T> u;
    if constexpr (k == 4) {
      const float4 r = normal ? curand_normal4(&st) : curand_uniform4(&st);
      u.v[0] = r.x; u.v[1] = r.y; u.v[2] = r.z; u.v[3] = r.w;
    } else {
      const double2 r = normal ? curand_normal2_double(&st) : curand_uniform2_double(&st);
      u.v[0] = r.x; u.v[1] = r.y;
    }
    Pack<T> r;
#pragma unroll
    for (int j = 0; j < k; ++j) {
      // cuRAND's uniforms lie in (0, 1]; 1 - u maps them onto [0, 1) like the CPU generator. Rounding to T can
      // still carry a value just below b up to b, so uniform values are capped at `top`, the largest T below b.
      const double v = static_cast<double>(u.v[j]);
      const T x = unit ? T(1) - u.v[j] : static_cast<T>(normal ? a + b * v : a + (b - a) * (1.0 - v));
      r.v[j] = normal || x <= top ? x : top;
    }
    store(g, r, static_cast<int>(min(static_cast<i64>(k), n - g * k)));
  }
}

/// Draws n numbers of T (normal(a, b) or uniform [a, b)) from the device's Philox stream into `store`.
template <class T, class Store> void launch_random(i64 n, bool normal, double a, double b, Store store) {
  const PhiloxState st = philox_reserve(current_device(), 4);
  const i64 groups = (n + Pack<T>::size - 1) / Pack<T>::size;
  const T top = std::max(static_cast<T>(a), std::nextafter(static_cast<T>(b), static_cast<T>(a)));
  const bool unit = !normal && a == 0.0 && b == 1.0;
  random_kernel<<<blocks_for(groups), kThreads, 0, stream()>>>(n, st.seed, st.offset, st.device_base, normal, unit,
                                                                a, b, top, store);
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace minidl
