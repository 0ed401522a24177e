// Philox4x32-10 (src/kernels/philox.h) against the known-answer vectors of Random123 (kat_vectors), and the CPU
// uniform() built on it: same values whatever the thread count, reproducible from the generator state, in
// range, and statistically uniform; the CPU dropout's single pass against uniform() and the mask rule.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/philox.h"
#include "kernels/backend.h"
#include "kernels/elementwise.h"
#include "minidl/minidl.h"

namespace {

TEST(CpuPhilox, MatchesRandom123KnownAnswers) {
  struct Kat {
    std::array<std::uint32_t, 4> counter;
    std::array<std::uint32_t, 2> key;
    std::array<std::uint32_t, 4> expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    std::uint32_t out[4];
    minidl::kernels::Philox4x32{k.key[0], k.key[1]}(k.counter[0], k.counter[1], k.counter[2], k.counter[3], out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], k.expected[i]) << "word " << i;
  }
}

TEST(CpuUniform, SameValuesForAnyThreadCount) {
  const int threads = minidl::get_num_threads();
  std::vector<std::vector<float>> runs;
  for (int t : {1, 2, 3}) {
    minidl::set_num_threads(t);
    minidl::manual_seed(11);
    runs.push_back(minidl::rand({100001}).to_vector<float>());  // odd: the last Philox block is half used
  }
  minidl::set_num_threads(threads);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(CpuUniform, ReproducibleFromSeedAndDifferentAcrossCalls) {
  minidl::manual_seed(5);
  const std::vector<double> a = minidl::uniform({4097}, -2.0, 3.0, minidl::kFloat64).to_vector<double>();
  const std::vector<double> b = minidl::uniform({4097}, -2.0, 3.0, minidl::kFloat64).to_vector<double>();
  minidl::manual_seed(5);
  const std::vector<double> a2 = minidl::uniform({4097}, -2.0, 3.0, minidl::kFloat64).to_vector<double>();
  EXPECT_EQ(a, a2);
  EXPECT_NE(a, b);
}

TEST(CpuUniform, InRangeAndUniform) {
  minidl::manual_seed(3);
  const std::int64_t n = 1 << 20;
  const std::vector<float> u = minidl::uniform({n}, -1.0, 1.0, minidl::kFloat32).to_vector<float>();
  constexpr int kBins = 16;
  std::vector<double> counts(kBins, 0.0);
  double sum = 0.0;
  for (float v : u) {
    ASSERT_GE(v, -1.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
    counts[static_cast<int>((v + 1.0f) * 0.5f * kBins)] += 1.0;
  }
  EXPECT_NEAR(sum / static_cast<double>(n), 0.0, 5.0 / std::sqrt(3.0 * static_cast<double>(n)));  // 5 sigma
  // Chi-square with 15 degrees of freedom: 37.7 is its 0.999 quantile.
  const double expected = static_cast<double>(n) / kBins;
  double chi2 = 0.0;
  for (double c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 37.7);
}

}  // namespace

// The CPU dropout draws, in one pass, what uniform() would draw, applies the DropoutMask rule and multiplies:
// the same values bitwise as the three separate passes, for any thread count.
template <class T>
void expect_dropout_matches_three_passes(minidl::DType dtype) {
  const int threads = minidl::get_num_threads();
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{4097}, std::int64_t{100001}}) {
    for (const double p : {0.25, 0.5}) {
      minidl::manual_seed(17);
      const minidl::Tensor x = minidl::uniform({n}, -2.0, 2.0, dtype);
      minidl::manual_seed(23);
      const std::vector<T> u = minidl::uniform({n}, 0.0, 1.0, dtype).to_vector<T>();
      const std::vector<T> xv = x.to_vector<T>();
      const minidl::kernels::DropoutMask<T> rule{static_cast<T>(p)};
      for (int t : {1, 2, 3}) {
        minidl::set_num_threads(t);
        minidl::manual_seed(23);
        minidl::Tensor out = minidl::empty({n}, dtype), mask = minidl::empty({n}, dtype);
        minidl::cpu::dropout(x, p, out, mask);
        const std::vector<T> o = out.to_vector<T>(), m = mask.to_vector<T>();
        int dropped = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(m[i], rule(u[i])) << "n=" << n << " p=" << p << " threads=" << t << " element " << i;
          ASSERT_EQ(o[i], xv[i] * m[i]) << "n=" << n << " p=" << p << " threads=" << t << " element " << i;
          dropped += m[i] == T(0);
        }
        if (n > 1000) EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.02) << "n=" << n << " p=" << p;
      }
    }
  }
  minidl::set_num_threads(threads);
}

TEST(CpuDropout, OnePassGivesTheThreePassesValues) {
  expect_dropout_matches_three_passes<float>(minidl::kFloat32);
  expect_dropout_matches_three_passes<double>(minidl::kFloat64);
}
