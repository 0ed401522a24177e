#pragma once
// Shape parameters of the layer kernels. Both backends (src/cpu, src/cuda) take the same structs, so the op
// layer computes them once and the two implementations cannot disagree on output sizes.
#include <cstdint>

#include "minidl/errors.h"

namespace minidl {
namespace kernels {

/// NCHW input, KCRS weight (C = input channels per group), NKPQ output.
struct Conv2dParams {
  std::int64_t N = 0, C = 0, H = 0, W = 0;  // input
  std::int64_t K = 0, R = 0, S = 0;         // output channels, kernel height, kernel width
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 1;
  std::int64_t P = 0, Q = 0;                // output height, width (filled by finalize())

  /// Computes P and Q and validates every field; throws ValueError naming the field.
  void finalize(const char* op);
  /// Throws ValueError unless finalize() has run (P == 0 means it never did).
  void check_finalized(const char* op) const;
};

/// NCHW pooling window. Output size uses floor (ceil_mode=false), as PyTorch's default.
struct Pool2dParams {
  std::int64_t N = 0, C = 0, H = 0, W = 0;
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  std::int64_t P = 0, Q = 0;  // filled by finalize()
  void finalize(const char* op);
  void check_finalized(const char* op) const;  // as Conv2dParams'
};

/// Batch norm over (N, C, HW): statistics per channel C across N and HW.
struct BatchNormParams {
  std::int64_t N = 0, C = 0, HW = 1;
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch (unbiased var), as PyTorch
};

}  // namespace kernels
}  // namespace minidl
