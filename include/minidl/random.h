#pragma once
// Snapshot and restore of every random number generator, so a resumed run draws the same numbers as an
// uninterrupted one (manual_seed, in factories.h, resets them instead).
#include <cstdint>
#include <map>
#include <string>

namespace minidl {

struct RngState {
  /// The CPU mt19937_64 engine written with operator<< (decimal words separated by spaces). The layout is the
  /// standard library's: a state saved by one implementation (libstdc++, libc++) loads only into the same one.
  std::string cpu;
  /// The Philox seed shared by all CUDA devices, and the next unused offset of each device that drew numbers.
  std::uint64_t philox_seed = 0;
  std::map<int, std::uint64_t> philox_offsets;
};

/// The current state of every generator, taken atomically with respect to other generator users.
RngState get_rng_state();
/// Replaces the state of every generator. Throws ValueError (leaving the generators unchanged) when `cpu` is
/// not a state this build's engine wrote, or an offset's device index is negative.
void set_rng_state(const RngState& state);

}  // namespace minidl
