#pragma once
// The arithmetic of the random kernels that turn bits into values (randint and random_, bernoulli, randperm,
// multinomial), compiled for host and device so the CPU (src/cpu/random.cpp) and CUDA (src/cuda/random.cu)
// kernels map the same bits to the same values.
//
// Bits: element e of a call takes the 64 bits of half e % 2 of Philox block e / 2, where block g is
// Philox(key)(counter_lo, counter_hi, g_lo, g_hi). That is cuRAND's layout for curand_init(seed = key,
// subsequence = g, offset = 4 * counter): on a CUDA device, where key is the seed and counter the launch's reserved
// offset / 4 (philox_reserve), these draws never overlap those of the cuRAND kernels (uniform, normal, dropout).
// On the CPU, key and counter are two fresh draws from the CPU generator per call.
#include <cmath>
#include <cstdint>

#include "kernels/convert.h"
#include "kernels/philox.h"

#ifdef __CUDACC__
#define MINIDL_RANDOM_HD __host__ __device__ __forceinline__
#else
#define MINIDL_RANDOM_HD inline
#endif

namespace minidl {
namespace kernels {

struct PhiloxStream {
  Philox4x32 philox;
  std::uint64_t counter;

  MINIDL_RANDOM_HD void block(std::uint64_t g, std::uint32_t* r) const {
    philox(static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32),
           static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32), r);
  }
  /// The 64 bits of element e.
  MINIDL_RANDOM_HD std::uint64_t bits(std::uint64_t e) const {
    std::uint32_t r[4];
    block(e >> 1, r);
    return e & 1 ? join(r[2], r[3]) : join(r[0], r[1]);
  }
  static MINIDL_RANDOM_HD std::uint64_t join(std::uint32_t hi, std::uint32_t lo) {
    return static_cast<std::uint64_t>(hi) << 32 | lo;
  }
};

/// Uniform on [0, 1) from the top 53 (double) or 24 (float) of 64 bits: every value a multiple of 2^-53 or 2^-24.
template <class C>
MINIDL_RANDOM_HD C unit(std::uint64_t bits) {
  if constexpr (sizeof(C) == 8) {
    return static_cast<C>(bits >> 11) * C(1.0 / 9007199254740992.0);
  } else {
    return static_cast<C>(bits >> 40) * C(1.0f / 16777216.0f);
  }
}

/// low + (bits mod range): integers uniform on [low, low + range) to within range / 2^64; range 0 stands for
/// 2^64 (every int64). Wraps in unsigned arithmetic, so [INT64_MIN, INT64_MAX] works.
MINIDL_RANDOM_HD std::int64_t uniform_int(std::uint64_t bits, std::int64_t low, std::uint64_t range) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + (range ? bits % range : bits));
}

/// 1 with probability p (53-bit resolution): p <= 0 and NaN never, p >= 1 always.
MINIDL_RANDOM_HD bool bernoulli_draw(std::uint64_t bits, double p) { return unit<double>(bits) < p; }

// The value of element i of out (type T) from its bits: the random_int and bernoulli kernels of both backends.
template <class T>
struct UniformIntValue {
  std::int64_t low;
  std::uint64_t range;
  MINIDL_RANDOM_HD T operator()(std::int64_t, std::uint64_t bits) const {
    return convert<T>(uniform_int(bits, low, range));
  }
};
/// With probability p[i] (p of out's type), or p_scalar where p is null.
template <class T>
struct BernoulliValue {
  const T* p;
  double p_scalar;
  MINIDL_RANDOM_HD T operator()(std::int64_t i, std::uint64_t bits) const {
    return convert<T>(bernoulli_draw(bits, p ? convert<double>(p[i]) : p_scalar));
  }
};

// multinomial. Weights are read in C = opmath_t of their dtype (float for bfloat16 / float16).

/// A weight multinomial refuses: negative, infinite or NaN.
template <class C>
MINIDL_RANDOM_HD bool bad_weight(C w) {
  return !(w >= C(0)) || w == C(INFINITY);
}

/// The key of one category for sampling without replacement: E / w with E exponential (-log(1 - u)); the
/// categories with the k smallest keys are a sample of k without replacement (the exponential-race view of
/// successive sampling, PyTorch's p / E with its order reversed). Weight 0 gives +infinity: such categories come
/// after all others. The smallest key alone is one draw with probability w / sum(w).
template <class C>
MINIDL_RANDOM_HD C exponential_key(std::uint64_t bits, C w) {
  if (!(w > C(0))) return C(INFINITY);
  const C one_minus_u = C(1) - unit<C>(bits);  // in (0, 1]: the logarithm is finite
  if constexpr (sizeof(C) == 8) {
    return -::log(one_minus_u) / w;
  } else {
    return -logf(one_minus_u) / w;
  }
}

/// The category of a draw `target` in [0, total) from a row's inclusive prefix sums cdf[0..n) of the weights
/// w[0..n) (n >= 1, total = cdf[n - 1] > 0): the first i with cdf[i] > target, which skips categories of weight
/// 0. A target that rounding carried to `total` takes the last category of positive weight. A parallel scan sums
/// in another order than a serial one and can end a zero-weight category an ulp above its predecessor; a draw
/// landing there moves to the nearest category of positive weight, so weight 0 is never drawn.
template <class C, class T>
MINIDL_RANDOM_HD std::int64_t sample_cdf(const C* cdf, const T* w, std::int64_t n, C target) {
  const C total = cdf[n - 1];
  if (!(target < total)) target = total;
  std::int64_t lo = 0, hi = n;  // the first index in [lo, hi) whose prefix sum exceeds target (or reaches total)
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (cdf[mid] > target || cdf[mid] >= total) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  std::int64_t i = lo < n ? lo : n - 1;
  if (static_cast<C>(w[i]) > C(0)) return i;
  for (std::int64_t j = i; j-- > 0;) {
    if (static_cast<C>(w[j]) > C(0)) return j;
  }
  for (std::int64_t j = i + 1; j < n; ++j) {
    if (static_cast<C>(w[j]) > C(0)) return j;
  }
  return i;
}

/// multinomial's status word for an invalid row: 2 * row + kind, the smallest over rows wins.
enum MultinomialFault : std::uint64_t { kBadWeight = 0, kZeroSum = 1 };
MINIDL_RANDOM_HD std::uint64_t multinomial_fault(std::int64_t row, bool bad) {
  return 2 * static_cast<std::uint64_t>(row) + (bad ? kBadWeight : kZeroSum);
}

}  // namespace kernels
}  // namespace minidl
