// 64-bit indexing on the GPU: an elementwise op, reductions and copies on a float tensor of more than 2^31
// elements (about 8.9 GB; the test needs about 30 GB of free device memory and 10 GB of host memory).
// Values are x[i] = float(i), so an element read from a wrapped or truncated 32-bit index shows up as a value
// off by about 2^31. The expected values are computed on the host from the index alone.
#include "minidl/config.h"
#include "test_util.h"

#if MINIDL_CUDA_ENABLED
#include <cstdint>
#include <vector>

#include "minidl/indexing.h"

namespace {

using namespace minidl;
using i64 = std::int64_t;

const Device kGpu("cuda");
constexpr i64 kCols = 1024;
constexpr i64 kRows = (i64{1} << 21) + (i64{1} << 16);  // kRows * kCols = 2^31 + 2^26 elements
constexpr i64 kNumel = kRows * kCols;
constexpr i64 k2e31 = i64{1} << 31;

/// What arange stores at index i of a float32 tensor.
float value_at(i64 i) { return static_cast<float>(static_cast<double>(i)); }

/// Flat indices worth checking one by one: both ends, and both sides of 2^31.
std::vector<i64> boundary_indices() {
  return {0, 1, 2, 4095, k2e31 - 2, k2e31 - 1, k2e31, k2e31 + 1, k2e31 + 4097, kNumel - 2, kNumel - 1};
}

class LargeTensorGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    MINIDL_REQUIRE_GPU();
    // x, two same-sized results and some headroom (reductions, the float64 copy) must fit at once.
    const std::size_t need = 3 * static_cast<std::size_t>(kNumel) * sizeof(float) + (std::size_t{4} << 30);
    const std::size_t free_b = cuda::devices().at(0).free_memory;
    if (free_b < need) {
      GTEST_SKIP() << "needs " << need / (1 << 20) << " MiB of free device memory for a tensor of " << kNumel
                   << " elements, the device has " << free_b / (1 << 20) << " MiB free";
    }
    x_ = arange(static_cast<double>(kNumel), TensorOptions(kFloat32).device(kGpu));
    ASSERT_EQ(x_.numel(), kNumel);
  }
  void TearDown() override {
    x_ = Tensor();
    if (cuda::is_available()) cuda::empty_cache();  // give the ~9 GB back for the next test
  }
  Tensor x_;
};

TEST_F(LargeTensorGpu, ElementwiseOpsCoverEveryElement) {
  Tensor z;
  {
    const Tensor y = x_ * 0.5;  // unary (scalar) kernel
    z = x_ + y;                 // binary kernel
  }
  const Tensor host = z.cpu();  // a device-to-host copy of all 8.9 GB
  z = Tensor();
  const float* v = host.data_ptr<float>();
  i64 wrong = 0, first_wrong = -1;
  for (i64 i = 0; i < kNumel; ++i) {
    const float xi = value_at(i);
    if (v[i] != xi + xi * 0.5f) {
      if (first_wrong < 0) first_wrong = i;
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << "first wrong element " << first_wrong << " is "
                      << (first_wrong >= 0 ? v[first_wrong] : 0.f) << ", expected "
                      << (first_wrong >= 0 ? value_at(first_wrong) * 1.5f : 0.f);
}

TEST_F(LargeTensorGpu, FullSumMatchesTheExactSum) {
  // Exact sum of the stored values (integers below 2^32: the total stays below 2^63).
  i64 exact = 0;
  for (i64 i = 0; i < kNumel; ++i) exact += static_cast<i64>(value_at(i));
  // float32: chunked reduction, chains of about 400 additions, so |error| <= 400 * 2^-24 * sum. A missing or
  // repeated element would be off by up to 2^31; the tail above 2^31 alone is 6% of the sum.
  const double s32 = x_.sum().item<float>();
  EXPECT_NEAR(s32, static_cast<double>(exact), 400 * 0x1p-24 * static_cast<double>(exact));
  // float64 (also a dtype-converting copy of all elements): tight enough that one element read from the wrong
  // index (an error of at least 256) shows.
  const double s64 = x_.to(kFloat64).sum().item<double>();
  EXPECT_NEAR(s64, static_cast<double>(exact), 400 * 0x1p-53 * static_cast<double>(exact) + 1.0);
}

TEST_F(LargeTensorGpu, SumAlongADim) {
  const Tensor x2 = x_.reshape({kRows, kCols});
  {  // rows (contiguous reduction, one block per row); rows near the end sit above 2^31
    const Tensor host = x2.sum({1}).cpu();
    ASSERT_EQ(host.sizes(), (Shape{kRows}));
    const float* v = host.data_ptr<float>();
    int failures = 0;
    for (i64 r = 0; r < kRows && failures < 10; ++r) {
      double e = 0;
      for (i64 c = 0; c < kCols; ++c) e += value_at(r * kCols + c);
      if (std::fabs(v[r] - e) > 1e-5 * e) {
        ADD_FAILURE() << "row sum " << r << " is " << v[r] << ", expected " << e;
        ++failures;
      }
    }
  }
  {  // strided reduction over 4 rows of a (4, numel / 4) view: outputs read elements up to the end
    const i64 q = kNumel / 4;
    const Tensor host = x_.reshape({4, q}).sum({0}).cpu();
    const float* v = host.data_ptr<float>();
    int failures = 0;
    for (i64 j = 0; j < q && failures < 10; ++j) {
      const double e = static_cast<double>(value_at(j)) + value_at(j + q) + value_at(j + 2 * q) + value_at(j + 3 * q);
      if (std::fabs(v[j] - e) > 4 * 0x1p-24 * e) {
        ADD_FAILURE() << "column sum " << j << " is " << v[j] << ", expected " << e;
        ++failures;
      }
    }
  }
  {  // strided reduction over all rows (chunked: each column sums 2^21 + 2^16 values); a sample of columns
    const Tensor host = x2.sum({0}).cpu();
    const float* v = host.data_ptr<float>();
    for (i64 c : {i64{0}, i64{1}, i64{511}, kCols - 2, kCols - 1}) {
      double e = 0;
      for (i64 r = 0; r < kRows; ++r) e += value_at(r * kCols + c);
      // chains of at most 1024 + 1024 + 3 additions
      EXPECT_NEAR(v[c], e, 2100 * 0x1p-24 * e) << "column " << c;
    }
  }
}

TEST_F(LargeTensorGpu, CopiesReachEveryElement) {
  {  // same-device copy (clone): equal everywhere, counted exactly by a float sum of 0/1 (chunk sums are
     // multiples of 2^16 below 2^32, all exact in float)
    const Tensor c = x_.clone();
    EXPECT_EQ(eq(c, x_).sum().item<float>(), static_cast<float>(kNumel));
  }
  {  // gathers (64-bit source offsets) followed by device-to-host copies of the slices near 2^31 and the end
    const std::vector<i64> flat = boundary_indices();
    const Tensor idx = from_vector<i64>(flat, {static_cast<i64>(flat.size())}).to(kGpu);
    const std::vector<float> picked = index_select(x_, 0, idx).cpu().to_vector<float>();
    for (std::size_t k = 0; k < flat.size(); ++k) EXPECT_EQ(picked[k], value_at(flat[k])) << "element " << flat[k];
    const std::vector<i64> rows = {0, (k2e31 / kCols) - 1, k2e31 / kCols, kRows - 2, kRows - 1};
    const Tensor ridx = from_vector<i64>(rows, {static_cast<i64>(rows.size())}).to(kGpu);
    const Tensor slice = index_select(x_.reshape({kRows, kCols}), 0, ridx).cpu();
    const float* v = slice.data_ptr<float>();
    for (std::size_t k = 0; k < rows.size(); ++k) {
      for (i64 c = 0; c < kCols; ++c) {
        ASSERT_EQ(v[static_cast<i64>(k) * kCols + c], value_at(rows[k] * kCols + c)) << "row " << rows[k] << " col " << c;
      }
    }
  }
  {  // transpose materialises a strided copy: (rows, cols) -> (cols, rows), every element checked on the host
    Tensor t = x_.reshape({kRows, kCols}).t();
    const Tensor host = t.cpu();
    t = Tensor();
    const float* v = host.data_ptr<float>();
    i64 wrong = 0, first_wrong = -1;
    for (i64 c = 0; c < kCols; ++c) {
      for (i64 r = 0; r < kRows; ++r) {
        if (v[c * kRows + r] != value_at(r * kCols + c)) {
          if (first_wrong < 0) first_wrong = c * kRows + r;
          ++wrong;
        }
      }
    }
    EXPECT_EQ(wrong, 0) << "first wrong element of the transpose at flat index " << first_wrong;
  }
}

}  // namespace
#endif  // MINIDL_CUDA_ENABLED
