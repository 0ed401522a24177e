#include "amp_mode.h"

#include <cstdio>
#include <cstdlib>

namespace examples {

std::optional<minidl::DType> parse_amp(const std::string& mode) {
  if (mode == "bf16") return minidl::kBFloat16;
  if (mode == "fp16") return minidl::kFloat16;
  if (mode == "off") return std::nullopt;
  throw minidl::ValueError("--amp \"" + mode + "\": expected bf16, fp16 or off");
}

std::string amp_name(const std::optional<minidl::DType>& dtype) {
  if (!dtype) return "off";
  return *dtype == minidl::kBFloat16 ? "bf16" : "fp16";
}

namespace {
constexpr const char* kScalerPrefix = "grad_scaler.";
}  // namespace

void save_grad_scaler(const minidl::amp::GradScaler& scaler, std::map<std::string, std::string>& extra) {
  for (const auto& [key, value] : scaler.state_dict()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value.to(minidl::kFloat64).item<double>());  // reads back exactly
    extra[kScalerPrefix + key] = text;
  }
}

void load_grad_scaler(minidl::amp::GradScaler& scaler, const std::map<std::string, std::string>& extra) {
  std::map<std::string, minidl::Tensor> state;
  for (const auto& [key, text] : extra) {
    if (key.rfind(kScalerPrefix, 0) != 0) continue;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    MINIDL_CHECK(!text.empty() && *end == '\0', minidl::FormatError, "training state key extra.", key, ": \"", text,
                 "\" is not a number");
    const std::string name = key.substr(std::char_traits<char>::length(kScalerPrefix));
    // PyTorch's types: the counts int64, the factors and the scale float64.
    const bool count = name == "growth_interval" || name == "_growth_tracker";
    state[name] = minidl::full({}, value, minidl::TensorOptions(count ? minidl::kInt64 : minidl::kFloat64));
  }
  if (!state.empty()) scaler.load_state_dict(state);
}

}  // namespace examples
