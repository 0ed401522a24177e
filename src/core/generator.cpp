#include "core/generator.h"

#include <map>

#include "minidl/tensor.h"

namespace minidl {
namespace {
std::mutex g_philox_mutex;
std::uint64_t g_seed = 5489u;
std::map<int, std::uint64_t> g_offsets;
}  // namespace

CpuGenerator& cpu_generator() {
  static CpuGenerator gen;
  return gen;
}

PhiloxState philox_reserve(int device, std::uint64_t increment) {
  std::lock_guard<std::mutex> lock(g_philox_mutex);
  PhiloxState s{g_seed, g_offsets[device]};
  g_offsets[device] += increment;
  return s;
}

void manual_seed(std::uint64_t seed) {
  {
    std::lock_guard<std::mutex> lock(cpu_generator().mutex());
    cpu_generator().seed(seed);
  }
  std::lock_guard<std::mutex> lock(g_philox_mutex);
  g_seed = seed;
  g_offsets.clear();
}

}  // namespace minidl
