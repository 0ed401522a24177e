#pragma once
// A pooling test case (shape, window, stride, padding) and its finalized kernel parameters, for the CPU and GPU
// kernel tests.
#include <cstdint>

#include "kernels/params.h"

namespace minidl {
namespace testing {

struct PoolCase {
  const char* name;
  std::int64_t N, C, H, W, kh, kw, sh, sw, ph = 0, pw = 0;
};

inline kernels::Pool2dParams pool_params(const PoolCase& c) {
  kernels::Pool2dParams p;
  p.N = c.N, p.C = c.C, p.H = c.H, p.W = c.W, p.kh = c.kh, p.kw = c.kw, p.sh = c.sh, p.sw = c.sw, p.ph = c.ph,
  p.pw = c.pw;
  p.finalize("test pool");
  return p;
}

}  // namespace testing
}  // namespace minidl
