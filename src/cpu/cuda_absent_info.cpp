// cuda.h's device queries in a build without the CUDA backend: no devices, and versions() says why.
#include "minidl/config.h"

#if !MINIDL_CUDA_ENABLED
#include "minidl/cuda.h"
#include "minidl/errors.h"

namespace minidl {
namespace cuda {

bool is_available() { return false; }

int device_count() { return 0; }

std::string device_name(int index) {
  throw ValueError(detail::str("cuda::device_name(", index,
                               "): this minidl was built without CUDA (rebuild with -DMINIDL_WITH_CUDA=ON)"));
}

VersionInfo versions() {
  VersionInfo v;
  v.built_with_cuda = false;
  v.error = "minidl was built without CUDA";
  return v;
}

std::vector<DeviceProperties> devices() { return {}; }

}  // namespace cuda
}  // namespace minidl
#endif  // !MINIDL_CUDA_ENABLED
