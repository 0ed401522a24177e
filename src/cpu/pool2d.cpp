// Pooling, one NCHW plane per parallel_for item. Plain loops: Eigen has no windowed max with an argmax (let
// alone PyTorch's tie and NaN rules), and a window sum over a padded plane is an index walk, not an algebraic
// expression Eigen could vectorise.
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include "kernels/backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_clones.h"
#include "cpu/scratch.h"
#include "cpu/window_span.h"

namespace minidl {
namespace cpu {
namespace {

using kernels::Pool2dParams;
using Index = std::int64_t;

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
  const bool take = kernels::replaces_max(v, best);
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

/// max_pool_planes for 2x2 tiling windows (a trailing odd input row or column belongs to no window), in three
/// loops per plane that the vectoriser runs on whole vectors: (1) per output row, the winner of each column's pair
/// of input rows and which row it came from; (2) over the whole plane at once, the winner of each window's two
/// column winners; (3) the indices, from a table of the windows' corners (int64 apart from the floats: with both
/// in one loop GCC vectorised nothing). Per output row instead, the 12 outputs of a 24-wide input's row were too
/// few for a 16-lane loop and the epilogue did everything: the forward took three times the backward's time.
///
/// Visiting a window in row-major order (a b / c d) and taking each element that is larger than the best so far
/// or NaN leaves the last NaN if there is one, else the first maximum. So do the columns' winners (a or c at
/// position 0 or 2, b or d at 1 or 3), and the right column's winner wins the window if it is the later NaN or,
/// without NaNs, if it is larger, or equal and earlier.
template <class T>
MINIDL_CPU_CLONES void max_pool_2x2_planes(const Pool2dParams& p, const T* x, T* y, std::int64_t* indices,
                                           const std::int64_t* corners, Index begin, Index end) {
  using Pos = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;  // as wide as T: shared lanes
  const Index P = p.P, Q = p.Q, W = p.W, PQ = P * Q;
  T* __restrict col = scratch<T, Scratch::PoolColumns>(2 * PQ);
  Pos* __restrict low = scratch<Pos, Scratch::PoolRows>(2 * PQ);
  Pos* __restrict pos = scratch<Pos, Scratch::PoolPositions>(PQ);
  for (Index plane = begin; plane < end; ++plane) {
    for (Index oh = 0; oh < P; ++oh) {
      const T* __restrict r0 = x + plane * p.H * W + 2 * oh * W;
      const T* __restrict r1 = r0 + W;
      T* __restrict v = col + 2 * oh * Q;
      Pos* __restrict r = low + 2 * oh * Q;
      for (Index c = 0; c < 2 * Q; ++c) {
        const bool take = kernels::replaces_max(r1[c], r0[c]);
        v[c] = take ? r1[c] : r0[c];
        r[c] = take ? Pos(2) : Pos(0);
      }
    }
    T* __restrict best = y + plane * PQ;
    for (Index j = 0; j < PQ; ++j) {
      const T left = col[2 * j], right = col[2 * j + 1];
      const Pos at_left = low[2 * j], at_right = low[2 * j + 1] + 1;
      const bool nan_left = std::isnan(left), nan_right = std::isnan(right);
      const bool take = nan_right ? !nan_left || at_right > at_left
                                  : !nan_left && (right > left || (right == left && at_right < at_left));
      best[j] = take ? right : left;
      pos[j] = take ? at_right : at_left;
    }
    std::int64_t* __restrict arg = indices + plane * PQ;
    for (Index j = 0; j < PQ; ++j) arg[j] = corners[j] + (pos[j] & 1) + (pos[j] >> 1) * W;
  }
}

}  // namespace

template <class T>
void max_pool2d_forward(const Pool2dParams& params, const T* x, T* y, std::int64_t* indices) {
  params.check_finalized("max_pool2d_forward");
  const double cost = static_cast<double>(params.P * params.Q * params.kh * params.kw);
  std::vector<Span> cols;
  for (Index j = 0; j < params.kw; ++j) cols.push_back(inside(params.Q, params.W, params.sw, params.pw, j));
  const bool tiling = is_2x2_tiling(params);
  std::vector<std::int64_t> corners;  // tiling: the window of output j (in a plane) starts at corners[j]
  if (tiling) {
    for (Index oh = 0; oh < params.P; ++oh)
      for (Index ow = 0; ow < params.Q; ++ow) corners.push_back(2 * oh * params.W + 2 * ow);
  }
  parallel_for(params.N * params.C, cost, [&](Index begin, Index end) {
    const Pool2dParams p = params;  // a local copy: stores to y may alias the caller's as far as the compiler knows
    if (tiling) {
      max_pool_2x2_planes(p, x, y, indices, corners.data(), begin, end);
    } else {
      max_pool_planes(p, x, y, indices, cols.data(), begin, end);
    }
  });
}

template <class T>
void max_pool2d_backward(const Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx) {
  p.check_finalized("max_pool2d_backward");
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
  p.check_finalized("avg_pool2d_forward");
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
  p.check_finalized("avg_pool2d_backward");
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
