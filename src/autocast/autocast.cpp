// Autocast's state (per thread, per device type), its guard, the cast cache, and the policy table's lookups.
#include <map>
#include <memory>
#include <tuple>

#include "autocast/policy.h"
#include "core/tensor_impl.h"
#include "minidl/autograd.h"
#include "minidl/cuda.h"

namespace minidl {
namespace autocast {
namespace {

constexpr int kDeviceTypes = 2;  // DeviceType::CPU, DeviceType::CUDA

/// A cached cast: the source, held weakly so that a freed source's address reused by a new tensor is not a hit.
struct CacheEntry {
  std::weak_ptr<TensorImpl> source;
  Tensor cast;
};
/// Keyed by source, target dtype and grad mode: a cast made under no_grad has no graph edge to reuse with grad on.
using CacheKey = std::tuple<const TensorImpl*, DType, bool>;

struct State {
  bool enabled[kDeviceTypes] = {false, false};
  DType dtype[kDeviceTypes] = {kBFloat16, kFloat16};  // PyTorch's defaults: CPU bfloat16, CUDA float16
  bool cache_enabled = true;
  int nesting = 0;
  int suspended = 0;
  std::map<CacheKey, CacheEntry> cache;
};

State& state() {
  thread_local State s;
  return s;
}

const char* type_name(DeviceType d) { return d == kCUDA ? "cuda" : "cpu"; }

int index_of(DeviceType d, const char* where) {
  const int i = static_cast<int>(d);
  MINIDL_CHECK(d == kCPU || d == kCUDA, ValueError, where, ": device_type must be kCPU or kCUDA (the device types "
               "with autocast), found DeviceType ", i);
  return i;
}

DeviceType parse_device_type(const std::string& name) {
  MINIDL_CHECK(name == "cpu" || name == "cuda", ValueError, "AutocastGuard: device_type must be \"cpu\" or \"cuda\" "
               "(the device types with autocast), found \"", name, "\"");
  return name == "cuda" ? kCUDA : kCPU;
}

/// Whether every visible CUDA device runs bfloat16 natively (compute capability 8.0 or newer); true without one,
/// where CUDA autocast has no tensors to act on.
bool cuda_bf16_supported() {
  static const bool supported = [] {
    if (!cuda::is_available()) return true;
    for (const auto& d : cuda::devices()) {
      if (d.major < 8) return false;
    }
    return true;
  }();
  return supported;
}

void check_dtype(DeviceType d, DType dtype, const char* where) {
  MINIDL_CHECK(dtype == kBFloat16 || dtype == kFloat16, TypeError, where, ": dtype must be a lower-precision "
               "floating dtype for device_type ", type_name(d), ", bfloat16 or float16 (as PyTorch: CPU bfloat16 or "
               "float16; CUDA float16, or bfloat16 on compute capability 8.0+), found ", dtype);
  MINIDL_CHECK(!(d == kCUDA && dtype == kBFloat16) || cuda_bf16_supported(), TypeError, where,
               ": dtype bfloat16 needs a CUDA device of compute capability 8.0 or newer, which this one is not; use "
               "float16");
}

}  // namespace

bool is_autocast_enabled(DeviceType device_type) {
  return state().enabled[index_of(device_type, "is_autocast_enabled")];
}

void set_autocast_enabled(DeviceType device_type, bool enabled) {
  state().enabled[index_of(device_type, "set_autocast_enabled")] = enabled;
}

DType get_autocast_dtype(DeviceType device_type) { return state().dtype[index_of(device_type, "get_autocast_dtype")]; }

void set_autocast_dtype(DeviceType device_type, DType dtype) {
  const int i = index_of(device_type, "set_autocast_dtype");
  check_dtype(device_type, dtype, "set_autocast_dtype");
  state().dtype[i] = dtype;
}

bool is_autocast_cache_enabled() { return state().cache_enabled; }
void set_autocast_cache_enabled(bool enabled) { state().cache_enabled = enabled; }
void clear_cache() { state().cache.clear(); }
int increment_nesting() { return ++state().nesting; }
int decrement_nesting() { return --state().nesting; }

Tensor cached_cast(DType to_type, const Tensor& arg, DeviceType device_type) {
  const int d = index_of(device_type, "cached_cast");
  if (!arg.defined() || arg.device().type() != device_type || !is_floating_point(arg.dtype()) ||
      arg.dtype() == kFloat64 || arg.dtype() == to_type) {
    return arg;
  }
  State& s = state();
  const bool cacheable = to_type == s.dtype[d] && arg.dtype() == kFloat32 && arg.requires_grad() && arg.is_leaf() &&
                         !arg.is_view() && s.cache_enabled;
  if (!cacheable) return arg.to(to_type);
  const CacheKey key{arg.unsafe_impl(), to_type, autograd::grad_mode_enabled()};
  auto it = s.cache.find(key);
  if (it != s.cache.end() && !it->second.source.expired()) return it->second.cast;
  Tensor cast = arg.to(to_type);
  s.cache[key] = CacheEntry{arg.impl_ptr(), cast};
  return cast;
}

AutocastGuard::AutocastGuard(DeviceType device_type, std::optional<DType> dtype, bool enabled,
                             std::optional<bool> cache_enabled)
    : device_type_(device_type),
      prev_enabled_(is_autocast_enabled(device_type)),
      prev_dtype_(get_autocast_dtype(device_type)),
      prev_cache_enabled_(is_autocast_cache_enabled()) {
  const DType target = dtype ? *dtype : prev_dtype_;
  if (enabled) check_dtype(device_type, target, "AutocastGuard");
  State& s = state();
  s.enabled[static_cast<int>(device_type)] = enabled;
  if (enabled) s.dtype[static_cast<int>(device_type)] = target;
  s.cache_enabled = cache_enabled ? *cache_enabled : prev_cache_enabled_;
  ++s.nesting;
}

AutocastGuard::AutocastGuard(const std::string& device_type, std::optional<DType> dtype, bool enabled,
                             std::optional<bool> cache_enabled)
    : AutocastGuard(parse_device_type(device_type), dtype, enabled, cache_enabled) {}

AutocastGuard::~AutocastGuard() {
  State& s = state();
  if (--s.nesting == 0) s.cache.clear();
  s.enabled[static_cast<int>(device_type_)] = prev_enabled_;
  s.dtype[static_cast<int>(device_type_)] = prev_dtype_;
  s.cache_enabled = prev_cache_enabled_;
}

namespace policy {
namespace {
struct Row {
  const char* name;
  Cast cuda, cpu;
};
constexpr Row kRows[] = {
#define MINIDL_AUTOCAST_ROW(op, cuda, cpu) {#op, Cast::cuda, Cast::cpu},
    MINIDL_AUTOCAST_OPS(MINIDL_AUTOCAST_ROW)
#undef MINIDL_AUTOCAST_ROW
};
}  // namespace

Cast cast_of(Op op, DeviceType device_type) {
  const Row& r = kRows[static_cast<int>(op)];
  return device_type == kCUDA ? r.cuda : r.cpu;
}

const char* name_of(Op op) { return kRows[static_cast<int>(op)].name; }

unsigned active_devices() {
  const State& s = state();
  if (s.suspended > 0) return 0;
  return (s.enabled[0] ? 1U : 0U) | (s.enabled[1] ? 2U : 0U);
}

Suspend::Suspend() { ++state().suspended; }
Suspend::~Suspend() { --state().suspended; }

DType prioritize(Op op, DType current, DeviceType d, const Tensor& t) {
  if (!t.defined() || t.device().type() != d || !is_floating_point(t.dtype()) || t.dtype() == kFloat64) return current;
  const DType next = t.dtype();
  if (current == kFloat32 || next == kFloat32) return kFloat32;
  MINIDL_CHECK(next == current, TypeError, name_of(op), ": under ", type_name(d), " autocast to ", current,
               " a ", next, " input cannot be promoted (as PyTorch); convert it to ", current, " or float32 first");
  return current;
}

void throw_banned(Op op, DeviceType d) {
  throw TypeError(detail::str(name_of(op), ": unsafe to autocast on ", type_name(d), " (as in PyTorch): a sigmoid "
                              "before binary cross entropy loses precision in ", get_autocast_dtype(d),
                              "; use binary_cross_entropy_with_logits (BCEWithLogitsLoss), which is safe to autocast, "
                              "or call it outside the autocast region"));
}

}  // namespace policy
}  // namespace autocast
}  // namespace minidl
