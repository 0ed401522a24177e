#pragma once
// Where an upsampled (or downsampled) pixel reads its input, for both backends: PyTorch's coordinate rules of
// interpolate's nearest and (bi)linear modes, per spatial axis. Output index o of an axis reads input index
// nearest:  min(floor(o * s), in - 1) in float, s = 1 / scale_factor where one was given, else in / out (and o
//           itself where out == in, o / 2 where out == 2 * in, as PyTorch's CPU);
// linear:   src = s * o (align_corners, s = (in - 1) / (out - 1), 0 for one output), else
//           src = max(s * (o + 1/2) - 1/2, 0) with s as for nearest; i0 = min(floor(src), in - 1),
//           i1 = i0 + 1 (i0 at the last row), weights 1 - l1 and l1 = clamp(src - i0, 0, 1),
// computed in the accumulation type A (float for float, double for double), as PyTorch's opmath.
//
// The backward passes gather rather than scatter: input index i receives from the outputs whose taps include it.
// Each tap index is non-decreasing in o, so those outputs are one range, found by bisection (AxisMap::readers).
// The forward pass and the input gradient thus have one formula and one summation order on both backends, with no
// atomics.
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define MINIDL_UPSAMPLE_HD __host__ __device__ __forceinline__
#else
#define MINIDL_UPSAMPLE_HD inline
#endif

namespace minidl {
namespace kernels {

/// One spatial axis: input and output lengths, and the scale factor the user gave (0 for none: the coordinates
/// then use in / out).
struct UpsampleAxis {
  std::int64_t in = 1, out = 1;
  double scale = 0;
};

/// (planes, h.in, w.in) contiguous input to (planes, h.out, w.out); a 1-d interpolation has h.in = h.out = 1.
struct UpsampleParams {
  std::int64_t planes = 0;
  UpsampleAxis h, w;
  bool linear = false;  // (bi)linear, else nearest
  bool align_corners = false;
};

/// The inputs output o reads along one axis and their weights (nearest: i0 = i1, l0 = 1, l1 = 0).
template <class A>
struct Tap {
  std::int64_t i0, i1;
  A l0, l1;
};

/// The half-open range of output indices.
struct OutputRange {
  std::int64_t begin, end;
};

template <class A>
class AxisMap {
 public:
  MINIDL_UPSAMPLE_HD AxisMap(const UpsampleAxis& a, bool linear, bool align_corners)
      : in_(a.in), out_(a.out), linear_(linear), align_(align_corners) {
    if (linear && align_corners) {
      s_ = a.out > 1 ? static_cast<A>(a.in - 1) / static_cast<A>(a.out - 1) : A(0);
    } else if (linear) {
      s_ = a.scale > 0 ? static_cast<A>(1.0 / a.scale) : static_cast<A>(a.in) / static_cast<A>(a.out);
    }
    nearest_s_ = a.scale > 0 ? static_cast<float>(1.0 / a.scale) : static_cast<float>(a.in) / static_cast<float>(a.out);
  }

  MINIDL_UPSAMPLE_HD Tap<A> tap(std::int64_t o) const {
    if (!linear_) {
      const std::int64_t i = nearest(o);
      return {i, i, A(1), A(0)};
    }
    A src = align_ ? s_ * static_cast<A>(o) : s_ * (static_cast<A>(o) + A(0.5)) - A(0.5);
    if (!align_ && src < A(0)) src = A(0);
    std::int64_t i0 = static_cast<std::int64_t>(floor(src));
    if (i0 > in_ - 1) i0 = in_ - 1;
    A l1 = src - static_cast<A>(i0);
    l1 = l1 < A(0) ? A(0) : (l1 > A(1) ? A(1) : l1);
    return {i0, i0 < in_ - 1 ? i0 + 1 : i0, A(1) - l1, l1};
  }

  /// The weight with which output tap t reads input i (0 when it does not).
  MINIDL_UPSAMPLE_HD A weight(const Tap<A>& t, std::int64_t i) const {
    return (t.i0 == i ? t.l0 : A(0)) + (t.i1 == i ? t.l1 : A(0));
  }

  /// The outputs whose taps include input i: those with i1 >= i and i0 <= i.
  MINIDL_UPSAMPLE_HD OutputRange readers(std::int64_t i) const {
    return {first_output([&](const Tap<A>& t) { return t.i1 >= i; }),
            first_output([&](const Tap<A>& t) { return t.i0 > i; })};
  }

 private:
  MINIDL_UPSAMPLE_HD std::int64_t nearest(std::int64_t o) const {
    if (out_ == in_) return o;
    if (out_ == 2 * in_) return o >> 1;
    const std::int64_t i = static_cast<std::int64_t>(floorf(static_cast<float>(o) * nearest_s_));
    return i < in_ - 1 ? i : in_ - 1;
  }

  /// The first o in [0, out) whose tap satisfies `pred` (false, then true as o grows), or out.
  template <class P>
  MINIDL_UPSAMPLE_HD std::int64_t first_output(const P& pred) const {
    std::int64_t lo = 0, hi = out_;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (pred(tap(mid))) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }

  std::int64_t in_, out_;
  bool linear_, align_;
  A s_ = A(0);
  float nearest_s_;
};

/// Output (oh, ow) of one plane x (h.in x w.in): the nearest element, or the bilinear blend in PyTorch's order.
template <class A, class T>
MINIDL_UPSAMPLE_HD T upsample_value(const T* x, std::int64_t w_in, bool linear, const Tap<A>& th, const Tap<A>& tw) {
  if (!linear) return x[th.i0 * w_in + tw.i0];
  const T* r0 = x + th.i0 * w_in;
  const T* r1 = x + th.i1 * w_in;
  const A top = tw.l0 * static_cast<A>(r0[tw.i0]) + tw.l1 * static_cast<A>(r0[tw.i1]);
  const A bottom = tw.l0 * static_cast<A>(r1[tw.i0]) + tw.l1 * static_cast<A>(r1[tw.i1]);
  return static_cast<T>(th.l0 * top + th.l1 * bottom);
}

/// The gradient of input (ih, iw) of one plane from that plane's output gradient dy (h.out x w.out): the sum
/// over the outputs reading it, rows outer, each weighted by its two weights.
template <class A, class T>
MINIDL_UPSAMPLE_HD T upsample_input_grad(const T* dy, std::int64_t w_out, const AxisMap<A>& mh, const AxisMap<A>& mw,
                                         std::int64_t ih, std::int64_t iw, OutputRange rh, OutputRange rw) {
  A total = A(0);
  for (std::int64_t oh = rh.begin; oh < rh.end; ++oh) {
    const A wh = mh.weight(mh.tap(oh), ih);
    A row = A(0);
    for (std::int64_t ow = rw.begin; ow < rw.end; ++ow) {
      row += mw.weight(mw.tap(ow), iw) * static_cast<A>(dy[oh * w_out + ow]);
    }
    total += wh * row;
  }
  return static_cast<T>(total);
}

}  // namespace kernels
}  // namespace minidl
