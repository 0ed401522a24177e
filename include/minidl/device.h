#pragma once
#include <cstdint>
#include <ostream>
#include <string>

namespace minidl {

enum class DeviceType : std::uint8_t { CPU, CUDA };
constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;

/// Where a tensor lives: the CPU or one CUDA device.
class Device {
 public:
  Device(DeviceType type = DeviceType::CPU, int index = 0) : type_(type), index_(type == DeviceType::CPU ? 0 : index) {}
  /// Parses "cpu", "cuda" or "cuda:N"; throws ValueError on anything else.
  explicit Device(const std::string& spec);
  Device(const char* spec) : Device(std::string(spec)) {}

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  std::string str() const;

  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }

 private:
  DeviceType type_;
  int index_;
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace minidl
