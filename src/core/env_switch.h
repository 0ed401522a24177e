// On/off switches read from the environment (MINIDL_CUDA_NO_CACHE, MINIDL_CPU_NO_CACHE, MINIDL_CUDNN_BENCHMARK).
#pragma once

#include <cstdlib>
#include <cstring>

namespace minidl {

/// The switch `name`: `fallback` when unset, off when set to "0", on when set to anything else.
inline bool env_switch(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : std::strcmp(value, "0") != 0;
}

}  // namespace minidl
