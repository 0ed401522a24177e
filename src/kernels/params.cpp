#include "kernels/params.h"

namespace minidl {
namespace kernels {

namespace {
void require_positive(std::int64_t v, const char* op, const char* field) {
  MINIDL_CHECK(v > 0, ValueError, op, ": ", field, " must be positive, found ", v);
}
void require_non_negative(std::int64_t v, const char* op, const char* field) {
  MINIDL_CHECK(v >= 0, ValueError, op, ": ", field, " must be >= 0, found ", v);
}
void require_output_size(std::int64_t P, std::int64_t Q, const char* op, const char* params) {
  MINIDL_CHECK(P > 0 && Q > 0, ValueError, op, ": ", params, " were not finalized (output size ", P, "x", Q, ")");
}
}  // namespace

void Conv2dParams::check_finalized(const char* op) const { require_output_size(P, Q, op, "Conv2dParams"); }
void Pool2dParams::check_finalized(const char* op) const { require_output_size(P, Q, op, "Pool2dParams"); }

void Conv2dParams::finalize(const char* op) {
  require_positive(N, op, "batch size");
  require_positive(C, op, "input channels");
  require_positive(H, op, "input height");
  require_positive(W, op, "input width");
  require_positive(K, op, "out_channels");
  require_positive(R, op, "kernel height");
  require_positive(S, op, "kernel width");
  require_positive(stride_h, op, "stride");
  require_positive(stride_w, op, "stride");
  require_non_negative(pad_h, op, "padding");
  require_non_negative(pad_w, op, "padding");
  require_positive(dil_h, op, "dilation");
  require_positive(dil_w, op, "dilation");
  require_positive(groups, op, "groups");
  MINIDL_CHECK(K % groups == 0, ValueError, op, ": out_channels (", K, ") must be divisible by groups (", groups, ")");
  const std::int64_t eff_h = dil_h * (R - 1) + 1, eff_w = dil_w * (S - 1) + 1;
  MINIDL_CHECK(H + 2 * pad_h >= eff_h && W + 2 * pad_w >= eff_w, ValueError, op, ": kernel ", R, "x", S,
               " (dilation ", dil_h, "x", dil_w, ") is larger than the padded input ", H + 2 * pad_h, "x",
               W + 2 * pad_w);
  P = (H + 2 * pad_h - eff_h) / stride_h + 1;
  Q = (W + 2 * pad_w - eff_w) / stride_w + 1;
}

void Pool2dParams::finalize(const char* op) {
  require_positive(N, op, "batch size");
  require_positive(C, op, "channels");
  require_positive(H, op, "input height");
  require_positive(W, op, "input width");
  require_positive(kh, op, "kernel_size");
  require_positive(kw, op, "kernel_size");
  require_positive(sh, op, "stride");
  require_positive(sw, op, "stride");
  require_non_negative(ph, op, "padding");
  require_non_negative(pw, op, "padding");
  MINIDL_CHECK(2 * ph <= kh && 2 * pw <= kw, ValueError, op, ": padding (", ph, ",", pw,
               ") must be at most half of kernel_size (", kh, ",", kw, ")");
  MINIDL_CHECK(H + 2 * ph >= kh && W + 2 * pw >= kw, ValueError, op, ": kernel ", kh, "x", kw,
               " is larger than the padded input ", H + 2 * ph, "x", W + 2 * pw);
  P = (H + 2 * ph - kh) / sh + 1;
  Q = (W + 2 * pw - kw) / sw + 1;
}

}  // namespace kernels
}  // namespace minidl
