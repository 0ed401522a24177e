#pragma once
// The CPU's uniform random numbers: two draws from the CPU generator key a Philox stream, and element i of a call
// is made from the 64 bits at position i of that stream. Only the two draws are serial (a Mersenne twister cannot
// skip ahead), so a call scales with the threads and its values depend on the generator state, not on the split.
// uniform() and the fused dropout (cpu/dropout.cpp) share this code, so dropout draws what uniform() would.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/cpu_clones.h"
#include "kernels/philox.h"

namespace minidl {
namespace cpu {

struct UniformStream {
  kernels::Philox4x32 philox;
  std::uint64_t counter_high;
};

/// The next stream: two draws from the CPU generator, under its lock.
UniformStream next_uniform_stream();

/// store(i, u) for the elements i in [2 * begin, 2 * end) (clipped to n) of a call's n values, u uniform in
/// [low, high) as T: Philox blocks [begin, end) of counter (block, counter_high), two elements per block. Compiled
/// per instruction set: the rounds' 32-bit multiplies vectorise.
template <class T, class Store>
MINIDL_CPU_CLONES void uniform_blocks(const UniformStream& s, double low, double high, std::int64_t n,
                                      std::int64_t begin, std::int64_t end, Store store) {
  const kernels::Philox4x32 philox = s.philox;
  // Rounding to T can carry a draw just below `high` up to `high`; capping at the largest T below it keeps
  // the interval half-open (rand in float32 would otherwise return 1.0 about once in 2^25 draws).
  const T top = std::max(static_cast<T>(low), std::nextafter(static_cast<T>(high), static_cast<T>(low)));
  const auto value = [&](std::uint32_t hi, std::uint32_t lo) {
    // 52 random bits as the mantissa of a double in [1, 2), minus 1: uniform in [0, 1).
    const std::uint64_t bits = ((static_cast<std::uint64_t>(hi) << 32 | lo) >> 12) | 0x3FF0000000000000ull;
    double u;
    std::memcpy(&u, &bits, sizeof u);
    return std::min(static_cast<T>(low + (high - low) * (u - 1.0)), top);
  };
  const auto c2 = static_cast<std::uint32_t>(s.counter_high), c3 = static_cast<std::uint32_t>(s.counter_high >> 32);
  const std::int64_t full = std::min(end, n / 2);  // blocks whose two elements both exist
  std::uint32_t r[4];
  for (std::int64_t block = begin; block < full; ++block) {
    philox(static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), c2, c3, r);
    store(2 * block, value(r[0], r[1]));
    store(2 * block + 1, value(r[2], r[3]));
  }
  if (full < end) {  // odd n: the last block's first element
    philox(static_cast<std::uint32_t>(full), static_cast<std::uint32_t>(full >> 32), c2, c3, r);
    store(2 * full, value(r[0], r[1]));
  }
}

}  // namespace cpu
}  // namespace minidl
