// Convolution as im2col + GEMM, one (image, group) pair at a time.
//
// The column matrix of one image and group is row-major (C/groups*R*S, P*Q) in memory, which is the
// column-major (P*Q, C/groups*R*S) matrix `Col` that Eigen maps without a copy. With the output block of that
// image and group mapped as the column-major (P*Q, K/groups) matrix `Y` and the group's weights as the
// column-major (C/groups*R*S, K/groups) matrix `W`, the three kernels are plain GEMMs:
//   forward  Y = Col * W,   backward-input  dCol = dY * W^T (then col2im),   backward-weight  dW += Col^T * dY.
// A 1x1 kernel with stride 1 and no padding needs no im2col: the input block already is `Col`.
//
// Threading: (image, group) pairs, or fixed chunks of images for the weight gradient, are spread over
// cpu::parallel_for and every GEMM runs single-threaded inside its task (Eigen's GEMM only threads under
// OpenMP, which minidl does not use). On the 2-core development machine, for the MNIST shapes at batch 64, this
// was 1.8x (SSE2 build) to 4x (-march=native) faster than one multithreaded Eigen TensorContraction per image on
// cpu::device(): the per-image GEMMs (at most 576x288x64) are too small to split well, and im2col/col2im
// parallelise for free this way. A batch smaller than the thread count leaves threads idle.
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include "cpu/conv2d.h"

#include <Eigen/Core>
#include <algorithm>
#include <vector>

namespace minidl {
namespace cpu {
namespace {

using kernels::Conv2dParams;
using Index = std::int64_t;
template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;  // column-major
template <class T>
using MatMap = Eigen::Map<Mat<T>>;
template <class T>
using ConstMatMap = Eigen::Map<const Mat<T>>;
template <class T>
using VecMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstVecMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRowMap = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>;

/// Sizes of one group's GEMMs.
struct Geometry {
  Index Cg, Kg;    // input and output channels per group
  Index HW, PQ;    // input and output plane sizes
  Index CRS;       // rows of the column matrix = weights per output channel
  bool direct;     // 1x1, stride 1, no padding: the input block is its own column matrix
  double cost;     // rough cycles of one (image, group) GEMM, for parallel_for's splitting
};

Geometry geometry(const Conv2dParams& p, const char* op) {
  // finalize() validates the fields; P == 0 means it was never called.
  MINIDL_CHECK(p.P > 0 && p.Q > 0, ValueError, op, ": Conv2dParams were not finalized (output size ", p.P, "x", p.Q,
               ")");
  MINIDL_CHECK(p.C % p.groups == 0, ValueError, op, ": input channels (", p.C, ") must be divisible by groups (",
               p.groups, ")");
  Geometry g;
  g.Cg = p.C / p.groups;
  g.Kg = p.K / p.groups;
  g.HW = p.H * p.W;
  g.PQ = p.P * p.Q;
  g.CRS = g.Cg * p.R * p.S;
  g.direct = p.R == 1 && p.S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
  g.cost = static_cast<double>(g.PQ) * static_cast<double>(g.CRS) * static_cast<double>(g.Kg + 1);
  return g;
}

/// A per-thread buffer that only grows, so steady-state training steps do not allocate. `Slot` keeps apart
/// buffers that are live on one thread at the same time.
template <class T, int Slot>
T* scratch(Index n) {
  thread_local std::vector<T> buffer;
  if (static_cast<Index>(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

/// The outputs o in [lo, hi) of one axis whose tap o * stride - pad + offset lands inside [0, in); the other
/// outputs read padding.
struct Span {
  Index lo, hi;
};
Span inside(Index out, Index in, Index stride, Index pad, Index offset) {
  const Index first = pad - offset;        // smallest o * stride that lands inside
  const Index last = in - 1 + pad - offset;  // largest o * stride that lands inside
  if (last < 0) return {0, 0};
  const Index lo = std::min(out, first <= 0 ? Index{0} : (first + stride - 1) / stride);
  const Index hi = std::min(out, last / stride + 1);
  return {lo, std::max(lo, hi)};
}

/// Visits the rows (c, r, s, output row) of one image-group's column matrix, each Q entries long:
/// row(col_offset, in_h, x_offset, span). When in_h is false the whole row reads padding; otherwise entry q in
/// `span` reads input element x_offset + q * stride_w and the entries outside `span` read padding.
/// Plain loops: this index arithmetic is the one part of the convolution Eigen has no expression for.
template <class F>
void for_each_col_row(const Conv2dParams& p, Index Cg, F&& row) {
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
    for (Index q = ws.lo; q < ws.hi; ++q) out[q] = x[xo + q * sw];
    std::fill(out + ws.hi, out + Q, T(0));
  });
}

/// Adds every column-matrix entry back onto the input element it was read from (padding entries are dropped).
template <class T>
void col2im_add(const Conv2dParams& p, Index Cg, const T* col, T* x) {
  const Index sw = p.stride_w;
  for_each_col_row(p, Cg, [&](Index co, bool in_h, Index xo, Span ws) {
    if (!in_h) return;
    const T* in = col + co;
    for (Index q = ws.lo; q < ws.hi; ++q) x[xo + q * sw] += in[q];
  });
}

}  // namespace

template <class T>
void conv2d_forward(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y) {
  const Geometry g = geometry(p, "conv2d_forward");
  parallel_for(p.N * p.groups, g.cost, [&](Index begin, Index end) {
    T* col = g.direct ? nullptr : scratch<T, 0>(g.CRS * g.PQ);
    for (Index i = begin; i < end; ++i) {
      const Index n = i / p.groups, grp = i % p.groups;
      const T* xb = x + (n * p.C + grp * g.Cg) * g.HW;
      if (!g.direct) im2col(p, g.Cg, xb, col);
      const ConstMatMap<T> Col(g.direct ? xb : col, g.PQ, g.CRS);
      const ConstMatMap<T> W(w + grp * g.Kg * g.CRS, g.CRS, g.Kg);
      MatMap<T> Y(y + (n * p.K + grp * g.Kg) * g.PQ, g.PQ, g.Kg);
      // The GEMM accumulates anyway, so starting from the broadcast bias costs no extra pass.
      if (bias)
        Y.rowwise() = ConstRowMap<T>(bias + grp * g.Kg, g.Kg);
      else
        Y.setZero();
      Y.noalias() += Col * W;
    }
  });
}

template <class T>
void conv2d_backward_input(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  const Geometry g = geometry(p, "conv2d_backward_input");
  parallel_for(p.N * p.groups, g.cost, [&](Index begin, Index end) {
    T* dcol = g.direct ? nullptr : scratch<T, 0>(g.CRS * g.PQ);
    for (Index i = begin; i < end; ++i) {
      const Index n = i / p.groups, grp = i % p.groups;
      T* dxb = dx + (n * p.C + grp * g.Cg) * g.HW;
      const ConstMatMap<T> dY(dy + (n * p.K + grp * g.Kg) * g.PQ, g.PQ, g.Kg);
      const ConstMatMap<T> W(w + grp * g.Kg * g.CRS, g.CRS, g.Kg);
      MatMap<T> dCol(g.direct ? dxb : dcol, g.PQ, g.CRS);
      dCol.noalias() = dY * W.transpose();
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
  // accumulators are added in chunk order afterwards, so the result does not depend on scheduling.
  const Index chunks = std::min<Index>(p.N, std::max(1, device().numThreads()));
  T* partials = chunks > 1 ? scratch<T, 1>((chunks - 1) * acc_size) : nullptr;
  const double chunk_cost = g.cost * static_cast<double>(p.groups * ((p.N + chunks - 1) / chunks));
  parallel_for(chunks, chunk_cost, [&](Index begin, Index end) {
    T* col = g.direct ? nullptr : scratch<T, 0>(g.CRS * g.PQ);
    for (Index chunk = begin; chunk < end; ++chunk) {
      T* dw_acc = chunk == 0 ? dw : partials + (chunk - 1) * acc_size;
      T* db_acc = chunk == 0 ? dbias : dw_acc + wsize;
      VecMap<T>(dw_acc, wsize).setZero();
      if (dbias) VecMap<T>(db_acc, p.K).setZero();
      for (Index n = chunk * p.N / chunks; n < (chunk + 1) * p.N / chunks; ++n) {
        for (Index grp = 0; grp < p.groups; ++grp) {
          const T* xb = x + (n * p.C + grp * g.Cg) * g.HW;
          if (!g.direct) im2col(p, g.Cg, xb, col);
          const ConstMatMap<T> Col(g.direct ? xb : col, g.PQ, g.CRS);
          const ConstMatMap<T> dY(dy + (n * p.K + grp * g.Kg) * g.PQ, g.PQ, g.Kg);
          MatMap<T>(dw_acc + grp * g.Kg * g.CRS, g.CRS, g.Kg).noalias() += Col.transpose() * dY;
          if (dbias) VecMap<T>(db_acc + grp * g.Kg, g.Kg) += dY.colwise().sum().transpose();
        }
      }
    }
  });
  for (Index chunk = 1; chunk < chunks; ++chunk) {
    const T* part = partials + (chunk - 1) * acc_size;
    VecMap<T>(dw, wsize) += ConstVecMap<T>(part, wsize);
    if (dbias) VecMap<T>(dbias, p.K) += ConstVecMap<T>(part + wsize, p.K);
  }
}

#define MINIDL_INSTANTIATE_CONV2D(T)                                                                          \
  template void conv2d_forward<T>(const Conv2dParams&, const T*, const T*, const T*, T*);                     \
  template void conv2d_backward_input<T>(const Conv2dParams&, const T*, const T*, T*);                        \
  template void conv2d_backward_weight<T>(const Conv2dParams&, const T*, const T*, T*, T*);
MINIDL_INSTANTIATE_CONV2D(float)
MINIDL_INSTANTIATE_CONV2D(double)
#undef MINIDL_INSTANTIATE_CONV2D

}  // namespace cpu
}  // namespace minidl
