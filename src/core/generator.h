#pragma once
// Random number state per device. The CPU generator is a 64-bit Mersenne twister turned into floats by bit
// arithmetic (not std:: distributions, whose output differs between standard libraries). CUDA kernels use
// cuRAND's Philox counter-based generator: (seed, offset) identify a stream, and each launch reserves a range
// of offsets, so results do not depend on launch configuration.
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>

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

/// The engine whose operator<< text is `text`, or nullopt unless `text` is exactly what operator<< writes for
/// some engine state (no extra spaces, signs, leading zeros or trailing characters).
std::optional<std::mt19937_64> parse_cpu_engine_state(const std::string& text);
/// "expected <the format>, found <text, shortened>": the message for a text parse_cpu_engine_state refused.
std::string cpu_engine_state_mismatch(const std::string& text);

/// Philox state for one CUDA launch. Kernels use offset + *device_base when device_base is set: inside a
/// captured CUDA graph the offsets are baked into the graph, and a counter on the device that the graph
/// advances at the end of every replay makes each replay draw fresh numbers.
struct PhiloxState {
  std::uint64_t seed = 5489u;
  std::uint64_t offset = 0;
  const std::uint64_t* device_base = nullptr;
};
/// Reserves `increment` Philox offsets on `device` and returns the state to launch with.
PhiloxState philox_reserve(int device, std::uint64_t increment);
/// From now until philox_end_capture, reservations on `device` carry `device_base`.
void philox_begin_capture(int device, const std::uint64_t* device_base);
/// Ends the capture and returns how many offsets it reserved (what one replay must advance the base by).
std::uint64_t philox_end_capture(int device);

}  // namespace minidl
