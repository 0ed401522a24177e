// Version-code formatting for cuda.h; pure, so it is the same in CUDA and CPU-only builds.
#include "minidl/cuda.h"
#include "minidl/errors.h"

namespace minidl {
namespace cuda {

std::string format_cuda_version(int v) {
  MINIDL_CHECK(v >= 0, ValueError, "cuda::format_cuda_version: version code must be >= 0, found ", v);
  if (v == 0) return "n/a";
  return detail::str(v / 1000, ".", (v % 1000) / 10);  // major*1000 + minor*10
}

std::string format_cudnn_version(int v) {
  MINIDL_CHECK(v >= 0, ValueError, "cuda::format_cudnn_version: version code must be >= 0, found ", v);
  if (v == 0) return "n/a";
  // cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN <= 8 used major*1000 + minor*100 + patch.
  const int major_unit = v >= 10000 ? 10000 : 1000;
  return detail::str(v / major_unit, ".", (v % major_unit) / 100, ".", v % 100);
}

}  // namespace cuda
}  // namespace minidl
