#pragma once
// Automatic mixed precision, as torch.autocast (which LibTorch's C++ frontend lacks, pytorch/pytorch#44710).
// Inside an AutocastGuard's scope the ops of PyTorch's autocast lists run in the dtype those lists give: matmuls,
// linear layers, convolutions and attention in the lower-precision dtype (bfloat16 or float16), ops that need range
// or precision (softmax, the norms, losses, exp/log/pow, sums) in float32, and ops of several inputs in the widest
// of their dtypes. Each op casts its own inputs at its entry, through the differentiable to(dtype), so parameters
// stay float32 and their gradients arrive in float32. A float32 leaf that requires grad (a parameter) is cast once
// per outermost region and the copy reused. The backward pass runs with autocast off: every backward rule computes
// in the dtypes its forward chose. CPU and CUDA have separate settings, per thread, as in PyTorch.
//
//   {
//     minidl::autocast::AutocastGuard guard(minidl::kCUDA, minidl::kBFloat16);
//     loss = criterion(model->forward(x), y);   // linear/conv in bf16, the loss in float32
//   }
//   loss.backward();                            // outside the guard, as PyTorch recommends
#include <optional>
#include <string>

#include "minidl/device.h"
#include "minidl/dtype.h"
#include "minidl/tensor.h"

namespace minidl {
namespace autocast {

/// Whether autocast is on for `device_type` on this thread (torch.is_autocast_enabled(device_type)).
bool is_autocast_enabled(DeviceType device_type);
void set_autocast_enabled(DeviceType device_type, bool enabled);

/// The lower-precision dtype autocast uses on `device_type`: by default bfloat16 on the CPU and float16 on CUDA, as
/// PyTorch. set_autocast_dtype accepts bfloat16 and float16 (CUDA bfloat16 needs compute capability 8.0 or newer)
/// and throws TypeError on any other dtype.
DType get_autocast_dtype(DeviceType device_type);
void set_autocast_dtype(DeviceType device_type, DType dtype);

/// Whether casts of parameters are cached inside a region (on by default).
bool is_autocast_cache_enabled();
void set_autocast_cache_enabled(bool enabled);

/// Drops every cached cast of this thread. The outermost AutocastGuard calls it when it exits.
void clear_cache();
/// The depth of nested autocast regions on this thread; AutocastGuard counts itself in and out with these.
int increment_nesting();
int decrement_nesting();

/// `arg` converted to `to_type` when it is eligible for autocast on `device_type` (defined, floating point, not
/// float64, on that device type), else `arg` itself. A float32 leaf that requires grad cast to the autocast dtype
/// is cached until clear_cache(): a parameter used by several ops is converted once (PyTorch's cached_cast).
Tensor cached_cast(DType to_type, const Tensor& arg, DeviceType device_type = kCUDA);

/// An autocast region (torch.autocast): sets the device type's enabled flag, dtype and cache switch for its scope
/// and restores them when it ends; leaving the outermost region clears the cast cache. `dtype` defaults to the
/// device type's current autocast dtype; `enabled = false` turns autocast off inside an enclosing region.
/// Throws ValueError for an unknown device type and TypeError for a dtype the device type cannot autocast to.
class AutocastGuard {
 public:
  explicit AutocastGuard(DeviceType device_type, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                         std::optional<bool> cache_enabled = std::nullopt);
  AutocastGuard(DeviceType device_type, bool enabled) : AutocastGuard(device_type, std::nullopt, enabled) {}
  /// The device type by name, as torch.autocast(device_type="cuda"): "cpu" or "cuda".
  explicit AutocastGuard(const std::string& device_type, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                         std::optional<bool> cache_enabled = std::nullopt);
  AutocastGuard(const std::string& device_type, bool enabled) : AutocastGuard(device_type, std::nullopt, enabled) {}
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_type_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_enabled_;
};

}  // namespace autocast
}  // namespace minidl
