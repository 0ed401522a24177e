#pragma once
// Random number state per device. The CPU generator is a 64-bit Mersenne twister turned into floats by bit
// arithmetic (not std:: distributions, whose output differs between standard libraries). CUDA kernels use
// cuRAND's Philox counter-based generator: (seed, offset) identify a stream, and each launch reserves a range
// of offsets, so results do not depend on launch configuration.
#include <cstdint>
#include <mutex>
#include <random>

namespace minidl {

class CpuGenerator {
 public:
  void seed(std::uint64_t s) { engine_.seed(s); }
  /// Uniform in [0, 1) with 53 random bits.
  double next_double() { return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0); }
  std::mt19937_64& engine() { return engine_; }
  std::mutex& mutex() { return mutex_; }

 private:
  std::mt19937_64 engine_{5489u};
  std::mutex mutex_;
};

CpuGenerator& cpu_generator();

/// Philox state for one CUDA device.
struct PhiloxState {
  std::uint64_t seed = 5489u;
  std::uint64_t offset = 0;
};
/// Reserves `increment` Philox offsets on `device` and returns the state to launch with.
PhiloxState philox_reserve(int device, std::uint64_t increment);

}  // namespace minidl
