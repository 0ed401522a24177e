#include <cctype>
#include <string>

#include "minidl/device.h"
#include "minidl/dtype.h"
#include "minidl/errors.h"

namespace minidl {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
  }
  return "unknown";
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
