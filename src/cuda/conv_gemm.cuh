#pragma once
// A convolution's forward pass and its stride-1 input gradient as one GEMM shape, shared by the kernels that
// compute them that way (conv2d_igemm.cu, conv2d_staged.cu):
//   C[m][col] = sum_k A(m, k) B(k, col),
// m over the output pixels (image, row, column), col over the output channels, k over (channel, r, s) of the
// gathered operand. A is read straight from the NCHW source: the address of A(m, k) splits into a part of m
// (image, top-left corner of the window) and a part of k (channel plane, tap offset), so a table of the k parts
// plus bounds checks replace im2col. The input gradient with stride 1 is the same gather over dy with the taps
// mirrored (row offset -r·dil instead of +r·dil) and the weight read transposed.
#include <climits>

#include "kernels/elementwise.h"
#include "kernels/params.h"

namespace minidl {
namespace gpu {

// A tap table entry: offset of the tap in the gathered tensor, its row and column offsets (for the bounds
// check) and the offset of its weight. A k beyond the reduction length gets a row offset that fails every
// bounds check and a weight offset of -1, so the padded part of the last tile multiplies zeros.
struct Tap {
  int offset, dr, ds, weight;
};
constexpr int kOutOfRange = INT_MIN / 2;

/// How the gathered operand is addressed: element (m, k) of A is src[base(m) + tap(k).offset] when
/// 0 <= top(m) + tap.dr < src_h and 0 <= left(m) + tap.ds < src_w, else 0.
struct Gather {
  const float* src;
  int src_image, src_h, src_w;  // elements per image, plane height and width
  int plane, out_w;             // output plane size and width: m = image * plane + row * out_w + column
  int row_mul, row_off, col_mul, col_off;  // top = row * row_mul + row_off, left likewise
  int RS, S, channel, r_step, s_step;      // k = (ci, r, s): offset ci * channel + r * r_step * src_w + s * s_step
  int w_channel;                           // weight offset of k: ci * w_channel + r * S + s

  __device__ Tap tap(int k, int k_total) const {
    if (k >= k_total) return {0, kOutOfRange, kOutOfRange, -1};
    const int ci = k / RS, rs = k - ci * RS, r = rs / S, s = rs - r * S;
    const int dr = r * r_step, ds = s * s_step;
    return {ci * channel + dr * src_w + ds, dr, ds, ci * w_channel + rs};
  }
  /// Splits m into the base offset and the window corner; `image` and `pixel` are returned for the output.
  __device__ void locate(int m, int& image, int& pixel, int& base, int& top, int& left) const {
    image = m / plane;
    pixel = m - image * plane;
    const int row = pixel / out_w, column = pixel - row * out_w;
    top = row * row_mul + row_off;
    left = column * col_mul + col_off;
    base = image * src_image + top * src_w + left;
  }
  /// Whether element (m, k) lies inside the source; `ptr` receives its address, or a valid dummy address.
  __device__ bool at(int base, int top, int left, const Tap& t, const float*& ptr) const {
    const bool inside = static_cast<unsigned>(top + t.dr) < static_cast<unsigned>(src_h) &&
                        static_cast<unsigned>(left + t.ds) < static_cast<unsigned>(src_w);
    ptr = inside ? src + base + t.offset : src;
    return inside;
  }
};

/// One pass as a GEMM: A gathered by `a`, B(k, col) = w[tap(k).weight + col * w_col], and act(C(m, col) + bias[col])
/// written to out[image * out_image + col * a.plane + pixel].
struct ConvGemm {
  Gather a;
  const float* w;
  const float* bias;  // may be null
  kernels::Activation act;
  float* out;
  int M, N, K;  // output pixels, output channels, reduction length
  int w_col;
  int out_image;
};

/// The input of the convolution as the gathered operand, m over the output pixels (forward and weight gradient).
inline Gather input_gather(const kernels::Conv2dParams& p, const float* x) {
  Gather a;
  a.src = x;
  a.src_image = static_cast<int>(p.C * p.H * p.W);
  a.src_h = static_cast<int>(p.H), a.src_w = static_cast<int>(p.W);
  a.plane = static_cast<int>(p.P * p.Q), a.out_w = static_cast<int>(p.Q);
  a.row_mul = static_cast<int>(p.stride_h), a.row_off = static_cast<int>(-p.pad_h);
  a.col_mul = static_cast<int>(p.stride_w), a.col_off = static_cast<int>(-p.pad_w);
  a.RS = static_cast<int>(p.R * p.S), a.S = static_cast<int>(p.S);
  a.channel = static_cast<int>(p.H * p.W);
  a.r_step = static_cast<int>(p.dil_h), a.s_step = static_cast<int>(p.dil_w);
  a.w_channel = a.RS;
  return a;
}

/// y = act(conv(x, w) + bias).
inline ConvGemm forward_gemm(const kernels::Conv2dParams& p, const float* x, const float* w, const float* bias, float* y,
                             kernels::Activation act) {
  ConvGemm g;
  g.a = input_gather(p, x);
  g.w = w, g.bias = bias, g.act = act, g.out = y;
  g.M = static_cast<int>(p.N * p.P * p.Q), g.N = static_cast<int>(p.K), g.K = static_cast<int>(p.C * p.R * p.S);
  g.w_col = g.K;
  g.out_image = static_cast<int>(p.K * p.P * p.Q);
  return g;
}

/// dx = gradient w.r.t. x for stride 1: dx(n, c, h, w) = sum over (k, r, s) of
/// dy(n, k, h + pad - r·dil, w + pad - s·dil) · w(k, c, r, s).
inline ConvGemm backward_input_gemm(const kernels::Conv2dParams& p, const float* dy, const float* w, float* dx) {
  ConvGemm g;
  Gather& a = g.a;
  a.src = dy;
  a.src_image = static_cast<int>(p.K * p.P * p.Q);
  a.src_h = static_cast<int>(p.P), a.src_w = static_cast<int>(p.Q);
  a.plane = static_cast<int>(p.H * p.W), a.out_w = static_cast<int>(p.W);
  a.row_mul = 1, a.row_off = static_cast<int>(p.pad_h), a.col_mul = 1, a.col_off = static_cast<int>(p.pad_w);
  a.RS = static_cast<int>(p.R * p.S), a.S = static_cast<int>(p.S);
  a.channel = static_cast<int>(p.P * p.Q);
  a.r_step = static_cast<int>(-p.dil_h), a.s_step = static_cast<int>(-p.dil_w);
  a.w_channel = static_cast<int>(p.C * p.R * p.S);  // k's weight (k, ., r, s); channel c adds c * RS
  g.w = w, g.bias = nullptr, g.act = kernels::Activation::None, g.out = dx;
  g.M = static_cast<int>(p.N * p.H * p.W), g.N = static_cast<int>(p.C), g.K = static_cast<int>(p.K * p.R * p.S);
  g.w_col = a.RS;
  g.out_image = static_cast<int>(p.C * p.H * p.W);
  return g;
}

// cp.async (compute capability 8.0 on): global-to-shared copies that skip the registers, so loads stay in flight
// while the tensor cores work. A copy whose predicate is false reads nothing and writes zeros (source size 0):
// that is how padding, tile tails and out-of-range taps become zeros.
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace gpu
}  // namespace minidl
