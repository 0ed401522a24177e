#pragma once
// The CUDA backend's device guard, declared without any CUDA header so that the routing of backend calls
// (kernels/backend.h's MINIDL_ON_BACKEND) keeps CUDA, cuBLAS, cuDNN and cuRAND headers out of every op's compile
// unit. Implemented in context.cu; the rest of the per-device state is in cuda/context.h.

namespace minidl {
namespace gpu {

/// Device of the current thread (as set by DeviceGuard).
int current_device();
/// Makes `index` current for the lifetime of the guard.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_;
};

}  // namespace gpu
}  // namespace minidl
