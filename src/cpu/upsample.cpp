// CPU interpolate (nearest, (bi)linear) and its input gradient, from the formulas of kernels/upsample.h. Each
// output row's and column's taps (and each input row's and column's range of readers) are computed once per call
// and shared by every plane; rows of all planes are spread over parallel_for.
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include "kernels/backend.h"

#include <vector>

#include "kernels/upsample.h"

namespace minidl {
namespace cpu {

using kernels::AxisMap;
using kernels::UpsampleParams;

template <class T>
void upsample_forward(const UpsampleParams& p, const T* x, T* y) {
  if (p.planes == 0) return;
  const AxisMap<T> mh(p.h, p.linear, p.align_corners), mw(p.w, p.linear, p.align_corners);
  std::vector<kernels::Tap<T>> th, tw;
  for (std::int64_t o = 0; o < p.h.out; ++o) th.push_back(mh.tap(o));
  for (std::int64_t o = 0; o < p.w.out; ++o) tw.push_back(mw.tap(o));
  const std::int64_t in_plane = p.h.in * p.w.in;
  parallel_for(p.planes * p.h.out, static_cast<double>(p.w.out * (p.linear ? 8 : 2)),
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t r = begin; r < end; ++r) {
                   const T* xp = x + (r / p.h.out) * in_plane;
                   const kernels::Tap<T>& row = th[static_cast<std::size_t>(r % p.h.out)];
                   T* yr = y + r * p.w.out;
                   for (std::int64_t ow = 0; ow < p.w.out; ++ow) {
                     yr[ow] = kernels::upsample_value<T>(xp, p.w.in, p.linear, row, tw[static_cast<std::size_t>(ow)]);
                   }
                 }
               });
}

template <class T>
void upsample_backward(const UpsampleParams& p, const T* dy, T* dx) {
  if (p.planes == 0) return;
  const AxisMap<T> mh(p.h, p.linear, p.align_corners), mw(p.w, p.linear, p.align_corners);
  std::vector<kernels::OutputRange> rh, rw;
  for (std::int64_t i = 0; i < p.h.in; ++i) rh.push_back(mh.readers(i));
  for (std::int64_t i = 0; i < p.w.in; ++i) rw.push_back(mw.readers(i));
  const std::int64_t out_plane = p.h.out * p.w.out;
  // Each input reads about out/in outputs per axis (at least one or two taps where it is read at all).
  const double per_row =
      static_cast<double>(p.w.in) * 4.0 * (1.0 + static_cast<double>(out_plane) / static_cast<double>(p.h.in * p.w.in));
  parallel_for(p.planes * p.h.in, per_row, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* dyp = dy + (r / p.h.in) * out_plane;
      const std::int64_t ih = r % p.h.in;
      T* dxr = dx + r * p.w.in;
      for (std::int64_t iw = 0; iw < p.w.in; ++iw) {
        dxr[iw] = kernels::upsample_input_grad<T>(dyp, p.w.out, mh, mw, ih, iw, rh[static_cast<std::size_t>(ih)],
                                                  rw[static_cast<std::size_t>(iw)]);
      }
    }
  });
}

#define MINIDL_INSTANTIATE_UPSAMPLE(T)                                    \
  template void upsample_forward<T>(const UpsampleParams&, const T*, T*); \
  template void upsample_backward<T>(const UpsampleParams&, const T*, T*);
MINIDL_INSTANTIATE_UPSAMPLE(float)
MINIDL_INSTANTIATE_UPSAMPLE(double)
#undef MINIDL_INSTANTIATE_UPSAMPLE

}  // namespace cpu
}  // namespace minidl
