#pragma once
// Draws that are the same with every standard library, for data that must not depend on a running generator:
// splitmix64 turns a seed (and the indices mixed into it) into a generator's seed, and uniform_below draws from
// [0, n) without modulo bias.
#include <cstdint>
#include <random>

namespace examples {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A uniform draw from [0, n) by rejection (std::uniform_int_distribution differs between libraries).
inline std::uint64_t uniform_below(std::mt19937_64& g, std::uint64_t n) {
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  for (;;) {
    const std::uint64_t r = g();
    if (r < limit) return r % n;
  }
}

}  // namespace examples
