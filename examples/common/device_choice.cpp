#include "device_choice.h"

#include <minidl/cuda.h>
#include <minidl/diagnose.h>
#include <minidl/errors.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <optional>

namespace examples {

std::string no_gpu_reason() {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  for (const auto& d : minidl::diagnose(minidl::cuda::versions(), minidl::cuda::devices(),
                                        cvd ? std::optional<std::string>(cvd) : std::nullopt)) {
    if (d.severity != "ok") return d.problem;
  }
  return "no usable GPU";
}

minidl::Device pick_device(const std::string& name, const std::string& flag) {
  if (name == "cpu") return minidl::Device(minidl::kCPU);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!minidl::cuda::is_available()) {
      throw minidl::ValueError(flag + " " + name + ": no usable GPU: " + no_gpu_reason() +
                               " (run `minidl info` for the full diagnosis and the fix)");
    }
    return minidl::Device(name);
  }
  if (minidl::cuda::is_available()) return minidl::Device(minidl::kCUDA, 0);
  spdlog::info("{} auto: training on the CPU ({})", flag, no_gpu_reason());
  return minidl::Device(minidl::kCPU);
}

std::vector<minidl::Device> training_devices(const std::string& device, bool compare) {
  if (!compare) return {pick_device(device)};
  if (minidl::cuda::is_available()) return {minidl::Device(minidl::kCPU), minidl::Device(minidl::kCUDA, 0)};
  spdlog::warn("--compare: no usable GPU ({}; see `minidl info`); training on the CPU only", no_gpu_reason());
  return {minidl::Device(minidl::kCPU)};
}

}  // namespace examples
