// Convolution as GEMMs (cpu/gemm.h), one (image, group) pair at a time. 3x3 stride-1 convolutions with enough
// channels take Winograd's F(2x2, 3x3) for the forward pass and the input gradient instead
// (cpu/conv2d_winograd.h: 2.25x fewer multiplications).
//
// Per image and group, with the group's weights as the row-major (K/groups, C/groups*R*S) matrix `W` and the
// output block as the row-major (K/groups, P*Q) matrix `Y` (NCHW as it is), the column matrix `Col`
// (C/groups*R*S, P*Q) turns the three kernels into plain GEMMs:
//   forward  Y = W * Col,   backward-input  dCol = W^T * dY (then col2im),   backward-weight  dW^T += Col * dY^T.
//
// Stride 1 need not build `Col`. Read with the input's row length instead of the output's, output (oh, ow) is
// column j = oh * Wp + ow of a "wide" output (Wp = the padded input width), and column j of Col's row (c, r, s)
// is then the input element at tap(c, r, s) + j, with tap(c, r, s) = (c * Hp + r * dil_h) * Wp + s * dil_w:
// every row of Col is a contiguous run of the (padded) input. The GEMMs read that through an offset table
// (MatrixView::row_offsets / col_offsets), so the packing copies straight from the image. The wide output's
// (P - 1) * Wp + Q columns include Wp - Q junk columns per output row (taps that wrap into the next input row):
// about 8% extra work for the MNIST shapes, against two im2col passes saved. Forward copies the valid columns
// out, adding the bias on the way (the im2col path needs a pass to broadcast the bias, and im2col besides).
// Backward-weight sums over the P*Q valid output positions only, which a second table places in the wide
// layout (position (oh, ow) at oh * Wp + ow): it reads dY as it is, with no widened copy and no junk columns
// (the copy took an eighth of its time), and the GEMM reads Col's rows in place through both tables. Padding
// is copied in once per image (a zero-bordered plane). Other convolutions use an explicit im2col (none for 1x1,
// stride 1, no padding: the input block is `Col`), and backward-input, outside Winograd's shapes, GEMM + col2im.
//
// Threading: (image, group) pairs, or fixed chunks of images for the weight gradient, are spread over
// cpu::parallel_for and every GEMM runs single-threaded inside its task: the per-image GEMMs of the MNIST
// shapes (at most 288x576x64) are too small to split well, and the data movement around them parallelises for
// free this way. With few images per thread (cpu::parts_per_item) the weight gradient's chunks are also cut by
// weight rows, and Winograd's items by tile rows.
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include "kernels/backend.h"

#include <algorithm>
#include <vector>

#include "cpu/conv2d_winograd.h"
#include "cpu/gemm.h"
#include "cpu/lane_sum.h"
#include "cpu/scratch.h"
#include "cpu/transpose_blocked.h"
#include "cpu/window_span.h"

namespace minidl {
namespace cpu {
namespace {

using kernels::Activation;
using kernels::Conv2dParams;
using Index = std::int64_t;

/// Sizes of one group's GEMMs, and the tap table of the stride-1 path.
struct Geometry {
  Index Cg, Kg;    // input and output channels per group
  Index HW, PQ;    // input and output plane sizes
  Index CRS;       // rows of the column matrix = weights per output channel
  bool direct;     // 1x1, stride 1, no padding: the input block is its own column matrix
  bool implicit;   // stride 1, not direct: Col can be read from the (padded) input through `taps`
  bool padded;     // implicit with padding: the input is first copied into a zero-bordered plane
  Index Hp, Wp;    // the (padded) input plane the taps index
  Index wide;      // columns of the wide output: (P - 1) * Wp + Q
  std::vector<Index> taps;  // CRS offsets into the (padded) input block
  std::vector<Index> positions;  // PQ offsets of the output positions in the wide layout: oh * Wp + ow
  double cost;     // rough cycles of one (image, group) GEMM, for parallel_for's splitting
};

Geometry geometry(const Conv2dParams& p, const char* op) {
  p.check_finalized(op);
  MINIDL_CHECK(p.C % p.groups == 0, ValueError, op, ": input channels (", p.C, ") must be divisible by groups (",
               p.groups, ")");
  Geometry g;
  g.Cg = p.C / p.groups;
  g.Kg = p.K / p.groups;
  g.HW = p.H * p.W;
  g.PQ = p.P * p.Q;
  g.CRS = g.Cg * p.R * p.S;
  g.direct = p.R == 1 && p.S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
  g.implicit = p.stride_h == 1 && p.stride_w == 1 && !g.direct;
  g.padded = g.implicit && (p.pad_h > 0 || p.pad_w > 0);
  g.Hp = p.H + 2 * p.pad_h;
  g.Wp = p.W + 2 * p.pad_w;
  g.wide = (p.P - 1) * g.Wp + p.Q;
  if (g.implicit) {
    g.taps.reserve(static_cast<std::size_t>(g.CRS));
    for (Index c = 0; c < g.Cg; ++c)
      for (Index r = 0; r < p.R; ++r)
        for (Index s = 0; s < p.S; ++s) g.taps.push_back((c * g.Hp + r * p.dil_h) * g.Wp + s * p.dil_w);
    g.positions.reserve(static_cast<std::size_t>(g.PQ));
    for (Index oh = 0; oh < p.P; ++oh)
      for (Index ow = 0; ow < p.Q; ++ow) g.positions.push_back(oh * g.Wp + ow);
  }
  g.cost = static_cast<double>(g.PQ) * static_cast<double>(g.CRS) * static_cast<double>(g.Kg + 1);
  return g;
}

/// The input block the taps index: the block itself, or (with padding) its copy into a zero-bordered
/// Cg x Hp x Wp plane in this thread's scratch.
template <class T>
const T* tap_source(const Conv2dParams& p, const Geometry& g, const T* xb) {
  if (!g.padded) return xb;
  T* out = scratch<T, Scratch::ConvPadded>(g.Cg * g.Hp * g.Wp);
  std::fill(out, out + g.Cg * g.Hp * g.Wp, T(0));
  for (Index c = 0; c < g.Cg; ++c)
    for (Index h = 0; h < p.H; ++h)
      std::copy(xb + (c * p.H + h) * p.W, xb + (c * p.H + h + 1) * p.W,
                out + (c * g.Hp + h + p.pad_h) * g.Wp + p.pad_w);
  return out;
}

/// Visits the rows (c, r, s, output row) of one image-group's column matrix, each Q entries long:
/// row(col_offset, in_h, x_offset, span). When in_h is false the whole row reads padding; otherwise entry q in
/// `span` reads input element x_offset + q * stride_w and the entries outside `span` read padding.
/// The parameters are copied first: read through the caller's reference, every field would be reloaded after
/// each store to the column matrix, which may alias it as far as the compiler knows.
template <class F>
void for_each_col_row(const Conv2dParams& params, Index Cg, F&& row) {
  const Conv2dParams p = params;
  for (Index c = 0; c < Cg; ++c) {
    for (Index r = 0; r < p.R; ++r) {
      const Span hs = inside(p.P, p.H, p.stride_h, p.pad_h, r * p.dil_h);
      for (Index s = 0; s < p.S; ++s) {
        const Span ws = inside(p.Q, p.W, p.stride_w, p.pad_w, s * p.dil_w);
        const Index col_base = ((c * p.R + r) * p.S + s) * p.P * p.Q;
        for (Index oh = 0; oh < p.P; ++oh) {
          const Index ih = oh * p.stride_h - p.pad_h + r * p.dil_h;
          row(col_base + oh * p.Q, oh >= hs.lo && oh < hs.hi, (c * p.H + ih) * p.W - p.pad_w + s * p.dil_w, ws);
        }
      }
    }
  }
}

/// dst[i] = src[i * stride] for i in [0, n). The pointers are declared apart, so the loop vectorises without
/// a run-time overlap check on every (short) row.
template <class T>
void gather_row(const T* __restrict src, Index stride, T* __restrict dst, Index n) {
  if (stride == 1) {
    for (Index i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  for (Index i = 0; i < n; ++i) dst[i] = src[i * stride];
}

template <class T>
void im2col(const Conv2dParams& p, Index Cg, const T* x, T* col) {
  const Index Q = p.Q, sw = p.stride_w;
  for_each_col_row(p, Cg, [&](Index co, bool in_h, Index xo, Span ws) {
    T* out = col + co;
    if (!in_h) {
      std::fill(out, out + Q, T(0));
      return;
    }
    std::fill(out, out + ws.lo, T(0));
    gather_row(x + xo + ws.lo * sw, sw, out + ws.lo, ws.hi - ws.lo);
    std::fill(out + ws.hi, out + Q, T(0));
  });
}

/// dst[i * stride] += src[i] for i in [0, n), likewise.
template <class T>
void add_row(const T* __restrict src, Index n, T* __restrict dst, Index stride) {
  if (stride == 1) {
    for (Index i = 0; i < n; ++i) dst[i] += src[i];
    return;
  }
  for (Index i = 0; i < n; ++i) dst[i * stride] += src[i];
}

/// Adds every column-matrix entry back onto the input element it was read from (padding entries are dropped).
template <class T>
void col2im_add(const Conv2dParams& p, Index Cg, const T* col, T* x) {
  const Index sw = p.stride_w;
  for_each_col_row(p, Cg, [&](Index co, bool in_h, Index xo, Span ws) {
    if (in_h) add_row(col + co + ws.lo, ws.hi - ws.lo, x + xo + ws.lo * sw, sw);
  });
}

/// Y = act(the valid columns of the wide output (row k, output row oh at k * wide + oh * Wp) plus the bias).
template <class T>
void copy_out(const Conv2dParams& p, const Geometry& g, const T* __restrict wide, const T* bias, Activation act,
              T* __restrict y) {
  for (Index k = 0; k < g.Kg; ++k) {
    const T b = bias ? bias[k] : T(0);
    for (Index oh = 0; oh < p.P; ++oh) {
      const T* src = wide + k * g.wide + oh * g.Wp;
      T* dst = y + k * g.PQ + oh * p.Q;
      if (act == Activation::Relu) {
        for (Index ow = 0; ow < p.Q; ++ow) dst[ow] = kernels::Relu<T>{T(0)}(src[ow] + b);
      } else {
        for (Index ow = 0; ow < p.Q; ++ow) dst[ow] = src[ow] + b;
      }
    }
  }
}

}  // namespace

template <class T>
void conv2d_forward(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y, Activation act) {
  if (winograd_forward_applies(p)) return winograd_conv2d_forward(p, x, w, bias, y, act);
  const Geometry g = geometry(p, "conv2d_forward");
  parallel_for(p.N * p.groups, g.cost, [&](Index begin, Index end) {
    // Implicit: the GEMM writes the wide output, whose valid columns are copied out with the bias added.
    // Otherwise it writes Y directly, starting from the broadcast bias.
    T* out = g.implicit ? scratch<T, Scratch::ConvWide>(g.Kg * g.wide) : nullptr;
    T* col = g.implicit || g.direct ? nullptr : scratch<T, Scratch::ConvColumns>(g.CRS * g.PQ);
    for (Index i = begin; i < end; ++i) {
      const Index n = i / p.groups, grp = i % p.groups;
      const T* xb = x + (n * p.C + grp * g.Cg) * g.HW;
      const T* wg = w + grp * g.Kg * g.CRS;
      const T* bg = bias ? bias + grp * g.Kg : nullptr;
      T* yb = y + (n * p.K + grp * g.Kg) * g.PQ;
      if (g.implicit) {
        const MatrixView<const T> taps{tap_source(p, g, xb), 0, 1, g.taps.data()};
        gemm<T>({g.Kg, g.wide, g.CRS, {wg, g.CRS, 1}, taps, {out, g.wide, 1}, false});
        copy_out(p, g, out, bg, act, yb);
        continue;
      }
      if (!g.direct) im2col(p, g.Cg, xb, col);
      if (bg) {
        for (Index k = 0; k < g.Kg; ++k) std::fill(yb + k * g.PQ, yb + (k + 1) * g.PQ, bg[k]);
      }
      gemm<T>({g.Kg, g.PQ, g.CRS, {wg, g.CRS, 1}, {g.direct ? xb : col, g.PQ, 1}, {yb, g.PQ, 1}, bg != nullptr});
      // The image's outputs are still in cache: the activation is a cheap second pass over them.
      if (act == Activation::Relu) {
        Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> out_block(yb, g.Kg * g.PQ);
        out_block = out_block.unaryExpr(kernels::Relu<T>{T(0)});
      }
    }
  });
}

template <class T>
void conv2d_backward_input(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  if (winograd_backward_input_applies(p)) return winograd_conv2d_backward_input(p, dy, w, dx);
  const Geometry g = geometry(p, "conv2d_backward_input");
  parallel_for(p.N * p.groups, g.cost, [&](Index begin, Index end) {
    T* dcol = g.direct ? nullptr : scratch<T, Scratch::ConvColumns>(g.CRS * g.PQ);
    for (Index i = begin; i < end; ++i) {
      const Index n = i / p.groups, grp = i % p.groups;
      T* dxb = dx + (n * p.C + grp * g.Cg) * g.HW;
      gemm<T>({g.CRS, g.PQ, g.Kg, {w + grp * g.Kg * g.CRS, 1, g.CRS}, {dy + (n * p.K + grp * g.Kg) * g.PQ, g.PQ, 1},
               {g.direct ? dxb : dcol, g.PQ, 1}, false});
      if (g.direct) continue;
      std::fill(dxb, dxb + g.Cg * g.HW, T(0));
      col2im_add(p, g.Cg, dcol, dxb);
    }
  });
}

template <class T>
void conv2d_backward_weight(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* dbias) {
  const Geometry g = geometry(p, "conv2d_backward_weight");
  const Index wsize = p.K * g.CRS;
  const Index acc_size = wsize + (dbias ? p.K : 0);  // one accumulator: [dw | dbias]
  // Each chunk of consecutive images sums into its own accumulator (chunk 0 directly into dw/dbias) and the
  // accumulators are added in chunk order afterwards, so the result does not depend on scheduling. Up to four
  // chunks per thread, as parallel_for cuts its blocks, so that a thread held up elsewhere hands its images to
  // the others (with one chunk per thread the whole pass waited for the slowest core); the extra accumulators
  // cost a few MB of adds.
  // Every chunk also transposes and adds a whole dW: where one image's product is small beside it (few output
  // positions, many weights: ResNet's last stage, 4x4 outputs of 512x512x3x3), a chunk takes enough images for
  // kMinChunkPositions output positions, down to one chunk per thread.
  constexpr Index kMinChunkPositions = 256;
  const Index threads = device().numThreads();
  const Index by_work = std::max<Index>(1, p.N * p.P * p.Q / kMinChunkPositions);
  const Index chunks =
      std::min<Index>(p.N, std::max<Index>(threads, std::min<Index>(kBlocksPerThread * threads, by_work)));
  // With few images per thread (parts_per_item), each chunk's products are also cut into ranges of Col's rows
  // (the weights' (c, r, s) positions; each range packs dY again; batch 16 on 16 threads: four). The ranges
  // change no sum: every element is summed over the same images in the same order.
  constexpr Index kMinRangeRows = 48;
  const Index splits = g.implicit || g.direct ? parts_per_item(p.N, g.CRS / kMinRangeRows) : 1;
  T* partials = chunks > 1 ? scratch<T, Scratch::ConvPartials>((chunks - 1) * acc_size) : nullptr;
  const double item_cost =
      g.cost * static_cast<double>(p.groups * ((p.N + chunks - 1) / chunks)) / static_cast<double>(splits);
  parallel_for(chunks * splits, item_cost, [&](Index begin, Index end) {
    // Per group, dW^T = Col * dY^T: Col's rows run along the output positions, the product's sum, so the
    // GEMM reads them in place and packs (transposes) only dY, Kg / CRS of Col's size (the other order,
    // dW = dY * Col^T, transposed all of Col into packed panels and was slower). Implicit: Col is the input read
    // through the taps and the output positions; otherwise the column matrix. Rows [r0, r1) of dW^T are summed over the
    // chunk's images in this thread's scratch and transposed into the chunk's accumulator at the end.
    T* col = g.implicit || g.direct ? nullptr : scratch<T, Scratch::ConvColumns>(g.CRS * g.PQ);
    T* dw_t = scratch<T, Scratch::ConvWeightT>(wsize);  // groups x CRS x Kg
    for (Index item = begin; item < end; ++item) {
      const Index chunk = item / splits, range = item % splits;
      const Index r0 = range * g.CRS / splits, r1 = (range + 1) * g.CRS / splits;
      T* dw_acc = chunk == 0 ? dw : partials + (chunk - 1) * acc_size;
      T* db_acc = chunk == 0 ? dbias : dw_acc + wsize;
      const Index first = chunk * p.N / chunks, last = (chunk + 1) * p.N / chunks;
      for (Index n = first; n < last; ++n) {
        for (Index grp = 0; grp < p.groups; ++grp) {
          const T* xb = x + (n * p.C + grp * g.Cg) * g.HW;
          const T* dyb = dy + (n * p.K + grp * g.Kg) * g.PQ;
          // Rows [r0, r1) of Col. Implicit: element (crs, j) is the input at taps[crs] + positions[j]; direct:
          // the input block itself; otherwise the column matrix (one range: r0 = 0).
          MatrixView<const T> col_v{col, g.PQ, 1};
          if (g.implicit) {
            col_v = {tap_source(p, g, xb), 0, 0, g.taps.data() + r0, g.positions.data()};
          } else if (g.direct) {
            col_v = {xb + r0 * g.PQ, g.PQ, 1};
          } else {
            im2col(p, g.Cg, xb, col);
          }
          gemm<T>({r1 - r0, g.Kg, g.PQ, col_v, {dyb, 1, g.PQ}, {dw_t + (grp * g.CRS + r0) * g.Kg, g.Kg, 1}, n > first});
          if (!dbias || range > 0) continue;
          for (Index k = 0; k < g.Kg; ++k) {
            const T sum = lane_sum(dyb + k * g.PQ, g.PQ);
            db_acc[grp * g.Kg + k] = n > first ? db_acc[grp * g.Kg + k] + sum : sum;
          }
        }
      }
      for (Index grp = 0; grp < p.groups; ++grp) {
        transpose_blocked(dw_t + (grp * g.CRS + r0) * g.Kg, g.Kg, r1 - r0, g.Kg, dw_acc + grp * g.Kg * g.CRS + r0,
                          g.CRS);
      }
    }
  });
  if (chunks == 1) return;
  // Element ranges of [dw | dbias] are spread over the pool; each element adds its partials in chunk order.
  // total[i] += the partials' element offset + i, for i in [begin, end).
  const auto add_partials = [&](T* total, Index offset, Index begin, Index end) {
    for (Index chunk = 1; chunk < chunks; ++chunk) {
      const T* part = partials + (chunk - 1) * acc_size + offset;
      for (Index i = begin; i < end; ++i) total[i] += part[i];
    }
  };
  parallel_for(acc_size, kRemotePartialCost * static_cast<double>(chunks - 1), [&](Index begin, Index end) {
    if (begin < wsize) add_partials(dw, 0, begin, std::min(end, wsize));
    if (end > wsize) add_partials(dbias, wsize, std::max(begin, wsize) - wsize, end - wsize);
  });
}

#define MINIDL_INSTANTIATE_CONV2D(T)                                                                          \
  template void conv2d_forward<T>(const Conv2dParams&, const T*, const T*, const T*, T*, Activation);         \
  template void conv2d_backward_input<T>(const Conv2dParams&, const T*, const T*, T*);                        \
  template void conv2d_backward_weight<T>(const Conv2dParams&, const T*, const T*, T*, T*);
MINIDL_INSTANTIATE_CONV2D(float)
MINIDL_INSTANTIATE_CONV2D(double)
#undef MINIDL_INSTANTIATE_CONV2D

}  // namespace cpu
}  // namespace minidl
