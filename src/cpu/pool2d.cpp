// Pooling, one NCHW plane per parallel_for item. Plain loops: Eigen has no windowed max with an argmax (let
// alone PyTorch's tie and NaN rules), and a window sum over a padded plane is an index walk, not an algebraic
// expression Eigen could vectorise.
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include "kernels/layer_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_clones.h"
#include "cpu/window_span.h"

namespace minidl {
namespace cpu {
namespace {

using kernels::Pool2dParams;
using Index = std::int64_t;

void check_finalized(const Pool2dParams& p, const char* op) {
  // finalize() validates the fields; P == 0 means it was never called.
  MINIDL_CHECK(p.P > 0 && p.Q > 0, ValueError, op, ": Pool2dParams were not finalized (output size ", p.P, "x", p.Q,
               ")");
}

/// The part of output (oh, ow)'s window that lies inside the plane: rows [h0, h1), columns [w0, w1).
/// finalize() bounds padding by half the kernel, so it is never empty.
struct Window {
  Index h0, h1, w0, w1;
};
Window window(const Pool2dParams& p, Index oh, Index ow) {
  const Index hs = oh * p.sh - p.ph, ws = ow * p.sw - p.pw;
  return {std::max<Index>(hs, 0), std::min(hs + p.kh, p.H), std::max<Index>(ws, 0), std::min(ws + p.kw, p.W)};
}

/// Calls fn(q, plane, oh, ow, window) for every output element, spread over planes. `q` is a per-task copy of
/// the parameters: read through the caller's reference, every field would be reloaded after each store to
/// the output, which may alias it as far as the compiler knows.
template <class F>
void for_each_output(const Pool2dParams& p, F&& fn) {
  const double cost = static_cast<double>(p.P * p.Q * p.kh * p.kw);
  parallel_for(p.N * p.C, cost, [&](Index begin, Index end) {
    const Pool2dParams q = p;
    for (Index plane = begin; plane < end; ++plane)
      for (Index oh = 0; oh < q.P; ++oh)
        for (Index ow = 0; ow < q.Q; ++ow) fn(q, plane, oh, ow, window(q, oh, ow));
  });
}

/// The running maximum's step: (v, i) replaces (best, arg) if v is larger or NaN, so the first maximum, or the
/// last NaN, of a window wins.
template <class T, class I>
inline void take_if_larger(T v, I i, T& best, I& arg) {
  const bool take = v > best || std::isnan(v);
  best = take ? v : best;
  arg = take ? i : arg;
}

/// One window column's pass over one output row: each output whose tap lands at xr[base + ow * sw] takes it if
/// it is larger (or NaN). Separate pointers, so the loop vectorises (compare, then masked selects).
template <class T>
inline void max_pool_tap(const T* __restrict xr, Index base, Index sw, Span cols, T* __restrict best,
                         std::int64_t* __restrict arg) {
  for (Index ow = cols.lo; ow < cols.hi; ++ow) take_if_larger(xr[base + ow * sw], base + ow * sw, best[ow], arg[ow]);
}

/// Max pooling of planes [begin, end), one output row at a time, window element by window element: each
/// output's running maximum is a chain of dependent compare-and-selects, and this order runs the independent
/// chains of a whole row side by side (in vector lanes) instead of one chain at a time. Each window is still
/// visited in row-major order, which the first-maximum rule depends on. `cols[j]` is inside() of window
/// column j, the same for every row: its integer division is paid once, not once per output row (that was an
/// eighth of the time).
template <class T>
MINIDL_CPU_CLONES void max_pool_planes(const Pool2dParams& p, const T* x, T* y, std::int64_t* indices,
                                       const Span* cols, Index begin, Index end) {
  for (Index plane = begin; plane < end; ++plane) {
    const T* xp = x + plane * p.H * p.W;
    for (Index oh = 0; oh < p.P; ++oh) {
      T* best = y + (plane * p.P + oh) * p.Q;
      std::int64_t* arg = indices + (plane * p.P + oh) * p.Q;
      const Index hs = oh * p.sh - p.ph, h0 = std::max<Index>(hs, 0), h1 = std::min(hs + p.kh, p.H);
      for (Index ow = 0; ow < p.Q; ++ow) {
        best[ow] = -std::numeric_limits<T>::infinity();
        arg[ow] = h0 * p.W + std::max<Index>(ow * p.sw - p.pw, 0);  // the window's first element
      }
      for (Index h = h0; h < h1; ++h)
        for (Index j = 0; j < p.kw; ++j) max_pool_tap(xp, h * p.W - p.pw + j, p.sw, cols[j], best, arg);
    }
  }
}

/// True for 2x2 windows at stride 2 without padding (the usual pooling, the example CNN's): the windows tile
/// the plane, and the ones of an output row read two whole input rows.
bool is_2x2_tiling(const Pool2dParams& p) {
  return p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.ph == 0 && p.pw == 0;
}

/// max_pool_planes for 2x2 tiling windows: one pass over each output row, the window's four elements in
/// row-major order (a trailing odd input row or column belongs to no window). The general loop's taps are
/// strided gathers of one element each, half of every loaded cache line unused until the next tap.
/// Two passes per stretch of a row: the maxima with which of the four elements won (0..3, an integer as wide as
/// T, so that compares and selects share vector lanes), then the int64 indices from that. With the index
/// selected in the first pass (one loop, int64 beside float) GCC vectorised nothing, and the loop took 7% of the
/// 2-thread CPU step (perf, 2-core development VM, 2026-11-30).
template <class T>
MINIDL_CPU_CLONES void max_pool_2x2_planes(const Pool2dParams& p, const T* x, T* y, std::int64_t* indices,
                                           Index begin, Index end) {
  using Choice = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  constexpr Index kStretch = 64;
  Choice which[kStretch];
  for (Index plane = begin; plane < end; ++plane) {
    for (Index oh = 0; oh < p.P; ++oh) {
      const Index top = 2 * oh * p.W;  // the first row of the windows, in the plane
      for (Index ow0 = 0; ow0 < p.Q; ow0 += kStretch) {
        const Index n = std::min(kStretch, p.Q - ow0);
        const T* __restrict r0 = x + plane * p.H * p.W + top + 2 * ow0;
        const T* __restrict r1 = r0 + p.W;
        T* __restrict best = y + (plane * p.P + oh) * p.Q + ow0;
        Choice* __restrict choice = which;
        for (Index j = 0; j < n; ++j) {
          T b = r0[2 * j];
          Choice k = 0;
          take_if_larger(r0[2 * j + 1], Choice(1), b, k);
          take_if_larger(r1[2 * j], Choice(2), b, k);
          take_if_larger(r1[2 * j + 1], Choice(3), b, k);
          best[j] = b;
          choice[j] = k;
        }
        std::int64_t* __restrict arg = indices + (plane * p.P + oh) * p.Q + ow0;
        const std::int64_t first = top + 2 * ow0;
        for (Index j = 0; j < n; ++j) arg[j] = first + 2 * j + (choice[j] & 1) + (choice[j] >> 1) * p.W;
      }
    }
  }
}

}  // namespace

template <class T>
void max_pool2d_forward(const Pool2dParams& params, const T* x, T* y, std::int64_t* indices) {
  check_finalized(params, "max_pool2d_forward");
  const double cost = static_cast<double>(params.P * params.Q * params.kh * params.kw);
  std::vector<Span> cols;
  for (Index j = 0; j < params.kw; ++j) cols.push_back(inside(params.Q, params.W, params.sw, params.pw, j));
  const bool tiling = is_2x2_tiling(params);
  parallel_for(params.N * params.C, cost, [&](Index begin, Index end) {
    const Pool2dParams p = params;  // a local copy: stores to y may alias the caller's as far as the compiler knows
    if (tiling) {
      max_pool_2x2_planes(p, x, y, indices, begin, end);
    } else {
      max_pool_planes(p, x, y, indices, cols.data(), begin, end);
    }
  });
}

template <class T>
void max_pool2d_backward(const Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx) {
  check_finalized(p, "max_pool2d_backward");
  const Index HW = p.H * p.W, PQ = p.P * p.Q;
  // An exception cannot leave a pool thread, so bad indices are skipped, flagged and reported afterwards.
  std::atomic<bool> bad_index{false};
  parallel_for(p.N * p.C, static_cast<double>(HW + PQ), [&](Index begin, Index end) {
    for (Index plane = begin; plane < end; ++plane) {
      T* dxp = dx + plane * HW;
      std::fill(dxp, dxp + HW, T(0));
      for (Index o = plane * PQ; o < (plane + 1) * PQ; ++o) {
        const Index i = indices[o];
        if (i < 0 || i >= HW) {
          bad_index.store(true, std::memory_order_relaxed);
          continue;
        }
        dxp[i] += dy[o];
      }
    }
  });
  MINIDL_CHECK(!bad_index.load(), IndexError, "max_pool2d_backward: indices must lie in [0, H*W = ", HW,
               "), found a value outside (indices not produced by max_pool2d_forward with these parameters?)");
}

template <class T>
void avg_pool2d_forward(const Pool2dParams& p, const T* x, T* y) {
  check_finalized(p, "avg_pool2d_forward");
  // count_include_pad: with floor-mode output sizes every window lies inside the padded plane, so the divisor
  // is always the full window.
  const T inv_area = T(1) / static_cast<T>(p.kh * p.kw);
  for_each_output(p, [&](const Pool2dParams& q, Index plane, Index oh, Index ow, const Window& b) {
    const T* xp = x + plane * q.H * q.W;
    T sum = 0;
    for (Index h = b.h0; h < b.h1; ++h)
      for (Index w = b.w0; w < b.w1; ++w) sum += xp[h * q.W + w];
    y[(plane * q.P + oh) * q.Q + ow] = sum * inv_area;
  });
}

template <class T>
void avg_pool2d_backward(const Pool2dParams& p, const T* dy, T* dx) {
  check_finalized(p, "avg_pool2d_backward");
  const Index HW = p.H * p.W;
  const T inv_area = T(1) / static_cast<T>(p.kh * p.kw);
  const double cost = static_cast<double>(HW + p.P * p.Q * p.kh * p.kw);
  parallel_for(p.N * p.C, cost, [&](Index begin, Index end) {
    for (Index plane = begin; plane < end; ++plane) {
      T* dxp = dx + plane * HW;
      std::fill(dxp, dxp + HW, T(0));
      for (Index oh = 0; oh < p.P; ++oh) {
        for (Index ow = 0; ow < p.Q; ++ow) {
          const Window b = window(p, oh, ow);
          const T g = dy[(plane * p.P + oh) * p.Q + ow] * inv_area;
          for (Index h = b.h0; h < b.h1; ++h)
            for (Index w = b.w0; w < b.w1; ++w) dxp[h * p.W + w] += g;
        }
      }
    }
  });
}

#define MINIDL_INSTANTIATE_POOL2D(T)                                                                 \
  template void max_pool2d_forward<T>(const Pool2dParams&, const T*, T*, std::int64_t*);             \
  template void max_pool2d_backward<T>(const Pool2dParams&, const T*, const std::int64_t*, T*);      \
  template void avg_pool2d_forward<T>(const Pool2dParams&, const T*, T*);                            \
  template void avg_pool2d_backward<T>(const Pool2dParams&, const T*, T*);
MINIDL_INSTANTIATE_POOL2D(float)
MINIDL_INSTANTIATE_POOL2D(double)
#undef MINIDL_INSTANTIATE_POOL2D

}  // namespace cpu
}  // namespace minidl
