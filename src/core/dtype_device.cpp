#include <cctype>
#include <string>

#include "minidl/device.h"
#include "minidl/dtype.h"
#include "minidl/errors.h"

namespace minidl {

const char* dtype_name(DType t) {
  switch (t) {
#define MINIDL_DTYPE_NAME(T, name, str, cat, rank, file) \
  case DType::name: return str;
    MINIDL_FORALL_DTYPES(MINIDL_DTYPE_NAME)
#undef MINIDL_DTYPE_NAME
  }
  return "unknown";
}

const char* safetensors_name(DType t) {
  switch (t) {
#define MINIDL_DTYPE_FILE_NAME(T, name, str, cat, rank, file) \
  case DType::name: return file;
    MINIDL_FORALL_DTYPES(MINIDL_DTYPE_FILE_NAME)
#undef MINIDL_DTYPE_FILE_NAME
  }
  return "unknown";
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_reduced_floating_point(a) && is_reduced_floating_point(b)) return kFloat32;
  return promotion_rank(a) >= promotion_rank(b) ? a : b;
}

Device::Device(const std::string& spec) : type_(DeviceType::CPU), index_(0) {
  if (spec == "cpu") return;
  const std::string prefix = "cuda";
  if (spec.compare(0, prefix.size(), prefix) == 0) {
    type_ = DeviceType::CUDA;
    if (spec.size() == prefix.size()) return;
    const std::string rest = spec.substr(prefix.size());
    bool digits = rest.size() >= 2 && rest[0] == ':' && rest.size() <= 6;
    for (std::size_t i = 1; digits && i < rest.size(); ++i) digits = std::isdigit(static_cast<unsigned char>(rest[i]));
    if (digits) {
      index_ = std::stoi(rest.substr(1));
      return;
    }
  }
  throw ValueError("Device: expected \"cpu\", \"cuda\" or \"cuda:N\", found \"" + spec + "\"");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index_); }

}  // namespace minidl
