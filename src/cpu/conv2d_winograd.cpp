// Winograd F(2x2, 3x3) convolution (cpu/conv2d_winograd.h). With d a 4x4 input patch, g a 3x3 filter and
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1],
// the 2x2 output block is Y = A^T [sum over channels (G g G^T) .* (B^T d B)] A: the filters are transformed
// once per call (U), the patches once per image (V), and the sum over channels of the elementwise products is,
// for each of the 16 transformed positions xi, one matrix product M_xi = U_xi * V_xi of (out channels x in
// channels) by (in channels x tiles), run by cpu/gemm.h. Each (image, group) is one parallel_for item: its V
// and M (32 in and 64 out channels on a 26x26 image: 327 KB and 655 KB) stay in the thread's L2 between the
// three steps.
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include "cpu/conv2d_winograd.h"

#include <algorithm>
#include <vector>

#include "core/env_switch.h"
#include "cpu/cpu_clones.h"
#include "cpu/gemm.h"
#include "cpu/scratch.h"

namespace minidl {
namespace cpu {
namespace {

using kernels::Activation;
using kernels::Conv2dParams;
using Index = std::int64_t;

bool shape_ok(const Conv2dParams& p) {
  return p.R == 3 && p.S == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1 && p.groups > 0 &&
         p.C / p.groups >= kWinogradMinChannels && p.K / p.groups >= kWinogradMinChannels;
}

bool backward_shape_ok(const Conv2dParams& p) { return shape_ok(p) && p.pad_h <= 2 && p.pad_w <= 2; }

/// The 4x4 transform G g G^T of the 3x3 filter whose element (r, s) is g(r, s), into u[xi * xi_stride],
/// xi = 4 * row + column.
template <class T, class F>
void transform_filter(F&& g, T* u, Index xi_stride) {
  T gg[4][3];  // G g
  for (int s = 0; s < 3; ++s) {
    const T a = g(0, s), b = g(1, s), c = g(2, s);
    gg[0][s] = a;
    gg[1][s] = (a + b + c) / 2;
    gg[2][s] = (a - b + c) / 2;
    gg[3][s] = c;
  }
  for (int r = 0; r < 4; ++r) {  // (G g) G^T
    const T a = gg[r][0], b = gg[r][1], c = gg[r][2];
    u[(4 * r + 0) * xi_stride] = a;
    u[(4 * r + 1) * xi_stride] = (a + b + c) / 2;
    u[(4 * r + 2) * xi_stride] = (a - b + c) / 2;
    u[(4 * r + 3) * xi_stride] = c;
  }
}

/// The filters' transforms for the convolution `q` (its K outputs from its C inputs), per group the 16 matrices
/// U_xi (Kg x Cg, row-major) one after the other. `filter(o, i, r, s)` reads tap (r, s) of output o's filter
/// over input i (indices across groups for o, within the group for i).
template <class T, class F>
void transform_filters(const Conv2dParams& q, F&& filter, T* u) {
  const Index Kg = q.K / q.groups, Cg = q.C / q.groups;
  parallel_for(q.K, static_cast<double>(Cg * 64), [&](Index begin, Index end) {
    for (Index o = begin; o < end; ++o) {
      const Index grp = o / Kg, ko = o % Kg;
      for (Index i = 0; i < Cg; ++i)
        transform_filter<T>([&](int r, int s) { return filter(o, i, r, s); },
                            u + (grp * 16 * Kg + ko) * Cg + i, Kg * Cg);
    }
  });
}

// The transforms run as passes over whole planes, so that every loop is long and runs on whole vectors (per
// tile, or per row of 12 tiles, nothing vectorised or the epilogues did all the work); the output transform is
// one such pass per output channel. B^T's rows applied to the four values (d0, d1, d2, d3) give (d0 - d2,
// d1 + d2, d2 - d1, d1 - d3); A^T's give (m0 + m1 + m2, m1 - m2 - m3). Tiles step by two rows and two columns,
// which no linear loop can follow, so:
//   - the input plane is stored with its even rows first, then its odd rows ("parity-split"): the patch rows
//     2th .. 2th + 3 of tile row th are then rows th, th + 1 of each half;
//   - along a row, patch columns 2tw .. 2tw + 3 are read at every other element (vectorised with permutes);
//   - tiles are numbered u = th * n + tw with n = Tq + 1: one junk tile per tile row (it reads across the end
//     of a row), so that u runs linearly over whole planes. The products compute the junk tiles too (1/Tq more
//     work) and the output transform drops them.

/// out_j[i] = (B^T d)_j for d = (d0[i], d1[i], d2[i], d3[i]), i in [0, n).
template <class T>
inline void apply_bt(const T* __restrict d0, const T* __restrict d1, const T* __restrict d2, const T* __restrict d3,
                     T* __restrict out0, T* __restrict out1, T* __restrict out2, T* __restrict out3, Index n) {
  for (Index i = 0; i < n; ++i) {
    out0[i] = d0[i] - d2[i];
    out1[i] = d1[i] + d2[i];
    out2[i] = d2[i] - d1[i];
    out3[i] = d1[i] - d3[i];
  }
}

/// out_j[i] = (B^T d)_j for d = (x[2i], x[2i + 1], x[2i + 2], x[2i + 3]), i in [0, n): B^T along rows whose
/// patches start at every other element.
template <class T>
inline void apply_bt_pairs(const T* __restrict x, T* __restrict out0, T* __restrict out1, T* __restrict out2,
                           T* __restrict out3, Index n) {
  for (Index i = 0; i < n; ++i) {
    const T d0 = x[2 * i], d1 = x[2 * i + 1], d2 = x[2 * i + 2], d3 = x[2 * i + 3];
    out0[i] = d0 - d2;
    out1[i] = d1 + d2;
    out2[i] = d2 - d1;
    out3[i] = d1 - d3;
  }
}

/// The products' columns are a multiple of this: of every GEMM build's panel width (cpu/gemm_kernel.inc).
constexpr Index kLdAlign = 32;

/// Sizes of the transforms of P x Q outputs (one (image, group)'s, or a band of its rows).
struct Tiling {
  Index Tp, Tq;  // tile rows and columns: 2x2 output blocks covering P x Q
  Index n;       // tiles per tile row, with the junk one: Tq + 1
  Index Hs, Ws;  // the parity-split input plane, 2 Tp + 2 x 2 n, covering every patch
  Index tiles;   // Tp * n: the products' columns
  Index ld;      // the products' columns rounded up to a multiple of kLdAlign
};

Tiling tiling(Index P, Index Q) {
  Tiling t;
  t.Tp = (P + 1) / 2;
  t.Tq = (Q + 1) / 2;
  t.n = t.Tq + 1;
  t.Hs = 2 * t.Tp + 2;
  t.Ws = 2 * t.n;
  t.tiles = t.Tp * t.n;
  t.ld = (t.tiles + kLdAlign - 1) / kLdAlign * kLdAlign;
  return t;
}

/// Where the patches of a band of output rows come from: per channel (`plane` elements apart) `rows` input rows
/// of `W`, the first of them `pad_h` rows below the band's first patch row (the rows above are padding: zeros),
/// each padded by `pad_w` columns on the left.
struct InputWindow {
  Index plane, rows, W, pad_h, pad_w;
};

/// V_xi[c][u] = (B^T d B)[xi] for the patch d of tile u of channel c of xb (the Cg input channels as `in`
/// says), into v[xi * xi_stride + c * t.ld + u]; finite junk for u in [tiles, ld). Each channel is first copied
/// into a parity-split plane of Hs x Ws (zero where padding), all of which stays in L1.
template <class T>
MINIDL_CPU_CLONES void transform_inputs(const Tiling& t, const InputWindow& in, const T* xb, Index Cg,
                                        Index xi_stride, T* v) {
  const Index len = t.Hs * t.n;  // split columns of a plane
  const Index half = len / 2;    // where the odd rows start
  const Index h_end = std::min(in.rows, t.Hs - in.pad_h), w_end = std::max<Index>(0, std::min(in.W, t.Ws - in.pad_w));
  // The plane, then two zeros that the last junk tile reads past its end.
  T* const plane = scratch<T, Scratch::ConvPadded>(t.Hs * t.Ws + 2);
  // rows_bt: B^T along the patch rows, result j at rows_bt + j * len, then kLdAlign zeros. Down the patch
  // columns, tiles [tiles, ld) are computed too, from values past the end of their rows (the next rows', then
  // those zeros): finite junk in columns the products compute and the output transform drops, instead of a fill
  // of every row's tail.
  T* const rows_bt = scratch<T, Scratch::WinogradRows>(4 * len + kLdAlign);
  std::fill(rows_bt + 4 * len, rows_bt + 4 * len + kLdAlign, T(0));
  std::fill(plane, plane + t.Hs * t.Ws + 2, T(0));  // every channel writes the same elements: the padding stays zero
  for (Index c = 0; c < Cg; ++c) {
    for (Index ih = 0; ih < h_end; ++ih) {
      const Index h = ih + in.pad_h;
      const T* __restrict src = xb + c * in.plane + ih * in.W;
      T* __restrict dst = plane + (h % 2 * (t.Hs / 2) + h / 2) * t.Ws + in.pad_w;
      for (Index w = 0; w < w_end; ++w) dst[w] = src[w];  // short rows: inline, not a call to memmove
    }
    apply_bt_pairs(plane, rows_bt, rows_bt + len, rows_bt + 2 * len, rows_bt + 3 * len, len);
    for (int j = 0; j < 4; ++j) {  // B^T down the patch columns, for column j of B^T d
      const T* ev = rows_bt + j * len;
      const T* od = ev + half;
      T* out = v + j * xi_stride + c * t.ld;
      apply_bt(ev, od, ev + t.n, od + t.n, out, out + 4 * xi_stride, out + 8 * xi_stride, out + 12 * xi_stride, t.ld);
    }
  }
}

/// The outputs of tiles [0, n), each tile's 2x2 block act(A^T M A + b) with M[xi] at m[xi * xi_stride + u]:
/// row 0 as pairs of columns into top[2u], top[2u + 1], row 1 likewise into bottom. One pass: A^T down the
/// columns and along the rows in registers.
template <class T, class Act>
inline void output_pairs(const T* __restrict m, Index xi_stride, T b, Act act, T* __restrict top,
                         T* __restrict bottom, Index n) {
  for (Index u = 0; u < n; ++u) {
    T s0[4], s1[4];  // A^T M: rows 0 and 1, columns j
    for (int j = 0; j < 4; ++j) {
      const T m0 = m[j * xi_stride + u], m1 = m[(4 + j) * xi_stride + u];
      const T m2 = m[(8 + j) * xi_stride + u], m3 = m[(12 + j) * xi_stride + u];
      s0[j] = m0 + m1 + m2;
      s1[j] = m1 - m2 - m3;
    }
    top[2 * u] = act(s0[0] + s0[1] + s0[2] + b);
    top[2 * u + 1] = act(s0[1] - s0[2] - s0[3] + b);
    bottom[2 * u] = act(s1[0] + s1[1] + s1[2] + b);
    bottom[2 * u + 1] = act(s1[1] - s1[2] - s1[3] + b);
  }
}

/// The P x Q outputs of the Kg output channels (`y_plane` elements apart from y), y[k] = act(A^T M A + bias[k]),
/// M_xi[k][u] at m[xi * xi_stride + k * t.ld + u]. The 2x2 blocks go to a parity-split output plane first (row r
/// of half i is output row 2r + i, 2n long), from which each output row is copied.
template <class T, class Act>
MINIDL_CPU_CLONES void transform_outputs(const T* m, const Tiling& t, Index Kg, Index xi_stride, Index P, Index Q,
                                         Index y_plane, const T* bias, Act act, T* y) {
  const Index tiles = t.tiles;
  T* const split = scratch<T, Scratch::WinogradRows>(4 * tiles);
  for (Index k = 0; k < Kg; ++k) {
    output_pairs(m + k * t.ld, xi_stride, bias ? bias[k] : T(0), act, split, split + 2 * tiles, tiles);
    for (Index h = 0; h < P; ++h) {
      const T* __restrict src = split + (h % 2 * t.Tp + h / 2) * 2 * t.n;
      T* __restrict dst = y + k * y_plane + h * Q;
      for (Index w = 0; w < Q; ++w) dst[w] = src[w];
    }
  }
}

/// The Winograd convolution `q` (forward geometry) of x with the transformed filters u (transform_filters).
template <class T>
void winograd_conv(const Conv2dParams& q, const T* x, const T* u, const T* bias, Activation act, T* y) {
  const Index Cg = q.C / q.groups, Kg = q.K / q.groups, images = q.N * q.groups;
  // With few (image, group) items per thread (parts_per_item; batch 16 on 16 threads: four), each is cut into
  // bands of tile rows, each band a parallel_for item with its own transforms (its input rows plus the two rows
  // of overlap; no tile twice). Every tile is computed as without bands, so the output is the same.
  constexpr Index kMinBandTileRows = 3;
  const Index tile_rows = (q.P + 1) / 2;
  const Index bands_wanted = parts_per_item(images, tile_rows / kMinBandTileRows);
  const Index band_tile_rows = (tile_rows + bands_wanted - 1) / bands_wanted;
  const Index bands = (tile_rows + band_tile_rows - 1) / band_tile_rows;
  // The products run over ld columns, a multiple of every GEMM build's panel width (at most 32 floats): all
  // panels are then full and read in place, where a last partial one was packed and its tiles went through a
  // copy (a tenth of the time). The 16 matrices of V and of M are a cache line more than their rows apart: the
  // transforms read or write all 16 at once, and at a multiple of 4 KB apart (64 rows of 176 floats, say) they
  // fall into one L1 set, more than its ways, and the input transform ran several times slower. A band's
  // sizes are those of the first (the largest) or of the last.
  const Tiling first = tiling(std::min(q.P, 2 * band_tile_rows), q.Q);
  const Tiling last = tiling(q.P - 2 * band_tile_rows * (bands - 1), q.Q);
  const Index line = 64 / static_cast<Index>(sizeof(T));
  const Index v_stride = Cg * first.ld + line, m_stride = Kg * first.ld + line;
  // V_xi's rows, for the GEMM's in-place reads, at the first band's and the last band's ld.
  std::vector<Index> rows(static_cast<std::size_t>(2 * Cg));
  for (Index c = 0; c < Cg; ++c) {
    rows[static_cast<std::size_t>(c)] = c * first.ld;
    rows[static_cast<std::size_t>(Cg + c)] = c * last.ld;
  }
  const double cost = static_cast<double>(first.tiles) * static_cast<double>(16 * Kg * Cg + 32 * (Kg + Cg));
  parallel_for(images * bands, cost, [&](Index begin, Index end) {
    T* v = scratch<T, Scratch::WinogradInputs>(16 * v_stride);
    T* m = scratch<T, Scratch::WinogradProducts>(16 * m_stride);
    for (Index i = begin; i < end; ++i) {
      const Index n = i / bands / q.groups, grp = i / bands % q.groups, band = i % bands;
      const bool is_last = band == bands - 1;
      const Tiling& t = is_last ? last : first;
      // Output rows [r0, r0 + 2 Tp) (fewer in the last band) read input rows from r0 - pad_h.
      const Index r0 = 2 * band_tile_rows * band, in_row0 = std::max<Index>(0, r0 - q.pad_h);
      const InputWindow in{q.H * q.W, q.H - in_row0, q.W, std::max<Index>(0, q.pad_h - r0), q.pad_w};
      transform_inputs(t, in, x + (n * q.C + grp * Cg) * q.H * q.W + in_row0 * q.W, Cg, v_stride, v);
      const T* ug = u + grp * 16 * Kg * Cg;
      for (int xi = 0; xi < 16; ++xi) {
        gemm<T>({Kg, t.ld, Cg, {ug + xi * Kg * Cg, Cg, 1}, {v + xi * v_stride, 0, 1, rows.data() + (is_last ? Cg : 0)},
                 {m + xi * m_stride, t.ld, 1}, false});
      }
      const Index P = is_last ? q.P - r0 : 2 * band_tile_rows;
      T* yb = y + (n * q.K + grp * Kg) * q.P * q.Q + r0 * q.Q;
      const T* bg = bias ? bias + grp * Kg : nullptr;
      if (act == Activation::Relu) {
        transform_outputs(m, t, Kg, m_stride, P, q.Q, q.P * q.Q, bg, kernels::Relu<T>{T(0)}, yb);
      } else {
        transform_outputs(m, t, Kg, m_stride, P, q.Q, q.P * q.Q, bg, [](T value) { return value; }, yb);
      }
    }
  });
}

}  // namespace

bool winograd_forward_applies(const Conv2dParams& p) {
  return shape_ok(p) && env_switch("MINIDL_CPU_WINOGRAD", true);
}

bool winograd_backward_input_applies(const Conv2dParams& p) {
  return backward_shape_ok(p) && env_switch("MINIDL_CPU_WINOGRAD", true);
}

template <class T>
void winograd_conv2d_forward(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y, Activation act) {
  p.check_finalized("winograd_conv2d_forward");
  MINIDL_CHECK(shape_ok(p), ValueError,
               "winograd_conv2d_forward: needs a 3x3 kernel, stride 1, dilation 1 and at least ", kWinogradMinChannels,
               " channels per group, found ", p.R, "x", p.S, ", stride ", p.stride_h, "x", p.stride_w, ", dilation ",
               p.dil_h, "x", p.dil_w, ", ", p.C / p.groups, " -> ", p.K / p.groups);
  const Index Cg = p.C / p.groups;
  T* u = scratch<T, Scratch::WinogradFilters>(16 * p.K * Cg);
  transform_filters<T>(p, [&](Index o, Index i, int r, int s) { return w[((o * Cg + i) * 3 + r) * 3 + s]; }, u);
  winograd_conv(p, x, u, bias, act, y);
}

template <class T>
void winograd_conv2d_backward_input(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  p.check_finalized("winograd_conv2d_backward_input");
  MINIDL_CHECK(backward_shape_ok(p), ValueError,
               "winograd_conv2d_backward_input: needs a 3x3 kernel, stride 1, dilation 1, padding at most 2 and at "
               "least ", kWinogradMinChannels, " channels per group, found ", p.R, "x", p.S, ", stride ", p.stride_h,
               "x", p.stride_w, ", dilation ", p.dil_h, "x", p.dil_w, ", padding ", p.pad_h, "x", p.pad_w, ", ",
               p.C / p.groups, " -> ", p.K / p.groups);
  // dx is the convolution of dy, padded by 2 - padding, with each filter turned by 180 degrees and the roles of
  // input and output channels swapped (within each group).
  Conv2dParams q;
  q.N = p.N, q.C = p.K, q.H = p.P, q.W = p.Q, q.K = p.C, q.R = 3, q.S = 3;
  q.pad_h = 2 - p.pad_h, q.pad_w = 2 - p.pad_w, q.groups = p.groups;
  q.finalize("winograd_conv2d_backward_input");
  const Index Cg = p.C / p.groups, Kg = p.K / p.groups;
  T* u = scratch<T, Scratch::WinogradFilters>(16 * p.C * Kg);
  transform_filters<T>(q, [&](Index o, Index i, int r, int s) {
    const Index grp = o / Cg, k = grp * Kg + i, c = o % Cg;
    return w[((k * Cg + c) * 3 + 2 - r) * 3 + 2 - s];
  }, u);
  winograd_conv(q, dy, u, static_cast<const T*>(nullptr), Activation::None, dx);
}

#define MINIDL_INSTANTIATE_WINOGRAD(T)                                                                        \
  template void winograd_conv2d_forward<T>(const Conv2dParams&, const T*, const T*, const T*, T*, Activation); \
  template void winograd_conv2d_backward_input<T>(const Conv2dParams&, const T*, const T*, T*);
MINIDL_INSTANTIATE_WINOGRAD(float)
MINIDL_INSTANTIATE_WINOGRAD(double)
#undef MINIDL_INSTANTIATE_WINOGRAD

}  // namespace cpu
}  // namespace minidl
