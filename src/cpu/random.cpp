// CPU random kernels (see kernels/backend.h): uniform draws from the generator's Philox stream
// (cpu/uniform_stream.h, shared with dropout.cpp) and normal draws by Box-Muller.
#include <cmath>

#include "core/generator.h"
#include "cpu/parallel.h"
#include "cpu/uniform_stream.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {

UniformStream next_uniform_stream() {
  auto& gen = cpu_generator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const std::uint64_t key = gen.engine()();
  const std::uint64_t counter_high = gen.engine()();
  return {Philox4x32{static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32)}, counter_high};
}

void uniform(Tensor& out, double low, double high) {
  const UniformStream stream = next_uniform_stream();
  kernels::dispatch_floating(out.dtype(), "uniform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::int64_t n = out.numel();
    T* const p = out.data_ptr<T>();
    // One Philox block gives two elements; parallel_for splits the blocks.
    parallel_for((n + 1) / 2, 40.0, [&](std::int64_t begin, std::int64_t end) {
      uniform_blocks<T>(stream, low, high, n, begin, end, [p](std::int64_t i, T u) { p[i] = u; });
    });
  });
}

void normal(Tensor& out, double mean, double stddev) {
  auto& gen = cpu_generator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  kernels::dispatch_floating(out.dtype(), "normal", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data_ptr<T>();
    const std::int64_t n = out.numel();
    // Box-Muller: two uniforms give two independent normals.
    for (std::int64_t i = 0; i < n; i += 2) {
      const double u1 = 1.0 - gen.next_double();  // (0, 1]: log is finite
      const double u2 = gen.next_double();
      const double r = std::sqrt(-2.0 * std::log(u1));
      p[i] = static_cast<T>(mean + stddev * r * std::cos(2.0 * M_PI * u2));
      if (i + 1 < n) p[i + 1] = static_cast<T>(mean + stddev * r * std::sin(2.0 * M_PI * u2));
    }
  });
}

}  // namespace cpu
}  // namespace minidl
