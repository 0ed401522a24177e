// The CPU layer kernels against the plain references in reference_kernels.h: random inputs, float and double,
// every element of every output compared. Outputs start filled with NaN so a kernel that fails to overwrite
// an element is caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/conv2d_winograd.h"
#include "kernels/backend.h"
#include "minidl/errors.h"
#include "pool_case.h"
#include "minidl/threads.h"
#include "reference_kernels.h"

namespace minidl {
namespace {

template <class T>
struct Tolerance;
template <>
struct Tolerance<float> {
  static constexpr double rtol = 1e-4, atol = 1e-5;
};
template <>
struct Tolerance<double> {
  static constexpr double rtol = 1e-10, atol = 1e-10;
};

template <class T>
std::vector<T> uniform(std::int64_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& e : v) e = static_cast<T>(dist(rng));
  return v;
}

template <class T>
std::vector<T> nans(std::int64_t n) {
  return std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN());
}

/// |got - want| <= atol * scale + rtol * |want| for every element, where scale = max(1, RMS of want): an element
/// that cancels to near zero in a long sum still carries the rounding error of the sum's large partial terms,
/// which is proportional to the typical magnitude of the output, not to the element.
template <class T>
void expect_all_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double sum_sq = 0;
  for (T w : want) sum_sq += static_cast<double>(w) * static_cast<double>(w);
  const double scale = std::max(1.0, std::sqrt(sum_sq / static_cast<double>(std::max<std::size_t>(1, want.size()))));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!(std::abs(g - w) <= Tolerance<T>::atol * scale + Tolerance<T>::rtol * std::abs(w))) {  // NaN fails too
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: got " << g << ", expected " << w;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ";
}

template <class T>
class CpuKernels : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CpuKernels, FloatTypes);

// ---- convolution -------------------------------------------------------------------------------------------

struct ConvCase {
  const char* name;
  std::int64_t N, C, H, W, K, R, S;
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool bias = true;
};

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cases;
  auto add = [&](ConvCase c) { cases.push_back(c); };
  add({"odd_7x5_batch1", 1, 1, 7, 5, 2, 3, 3});
  add({"batch3_stride2_pad1", 3, 3, 7, 5, 4, 3, 3, 2, 2, 1, 1});
  add({"dilation2_pad1_nonsquare", 3, 2, 7, 5, 3, 3, 2, 1, 1, 1, 1, 2, 2});
  add({"groups2_pad1", 3, 4, 7, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2});
  add({"depthwise_stride2", 2, 3, 6, 7, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, false});
  add({"1x1_direct", 3, 5, 7, 5, 4, 1, 1});
  add({"1x1_direct_groups2_nobias", 2, 4, 5, 3, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2, false});
  add({"1x1_stride2", 3, 4, 7, 5, 3, 1, 1, 2, 2});
  add({"1x1_pad1", 2, 3, 5, 5, 2, 1, 1, 1, 1, 1, 1});
  add({"asymmetric_everything", 3, 3, 9, 6, 5, 2, 4, 2, 1, 1, 2, 1, 2});
  add({"taps_entirely_in_padding", 2, 2, 1, 2, 3, 5, 3, 1, 1, 2, 1});
  add({"taps_entirely_in_padding_stride2", 2, 2, 1, 2, 3, 4, 3, 2, 1, 2, 1});
  add({"batch5_groups2_stride2_dilation2", 5, 4, 9, 8, 4, 3, 3, 2, 2, 2, 2, 2, 2, 2});
  add({"mnist_conv1", 2, 1, 28, 28, 32, 3, 3});
  add({"mnist_conv2", 2, 32, 26, 26, 64, 3, 3});
  add({"batch19_pad1", 19, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1});
  // Winograd's path (3x3, stride 1, >= 8 channels per group): odd and even output sizes (a last tile half
  // outside), every padding its input gradient takes (0-2), asymmetric padding, groups, padding 3 (forward
  // only: the input gradient takes the GEMM path).
  add({"winograd_odd_sizes_pad1", 3, 8, 7, 9, 8, 3, 3, 1, 1, 1, 1});
  add({"winograd_even_sizes", 2, 9, 10, 12, 12, 3, 3});
  add({"winograd_pad2_groups2_nobias", 2, 16, 6, 5, 18, 3, 3, 1, 1, 2, 2, 1, 1, 2, false});
  add({"winograd_pad_0x1", 5, 8, 5, 6, 8, 3, 3, 1, 1, 0, 1});
  add({"winograd_forward_pad3", 1, 8, 4, 5, 8, 3, 3, 1, 1, 3, 3});
  return cases;
}

/// The cases whose forward and input gradient take Winograd's path.
bool takes_winograd(const kernels::Conv2dParams& p) {
  return cpu::winograd_forward_applies(p);
}

kernels::Conv2dParams conv_params(const ConvCase& c) {
  kernels::Conv2dParams p;
  p.N = c.N, p.C = c.C, p.H = c.H, p.W = c.W, p.K = c.K, p.R = c.R, p.S = c.S;
  p.stride_h = c.sh, p.stride_w = c.sw, p.pad_h = c.ph, p.pad_w = c.pw, p.dil_h = c.dh, p.dil_w = c.dw;
  p.groups = c.groups;
  p.finalize("test conv");
  return p;
}

/// Every output of the three convolution kernels against the reference, for one case.
template <class T>
void expect_conv_matches_reference(const ConvCase& c, std::mt19937& rng) {
  SCOPED_TRACE(c.name);
  const kernels::Conv2dParams p = conv_params(c);
  const std::int64_t xs = p.N * p.C * p.H * p.W, ws = p.K * (p.C / p.groups) * p.R * p.S,
                     ys = p.N * p.K * p.P * p.Q;
  const auto x = uniform<T>(xs, rng), w = uniform<T>(ws, rng), b = uniform<T>(p.K, rng), dy = uniform<T>(ys, rng);
  const T* bias = c.bias ? b.data() : nullptr;

  auto y = nans<T>(ys), y_ref = nans<T>(ys), y_relu = nans<T>(ys);
  cpu::conv2d_forward(p, x.data(), w.data(), bias, y.data(), kernels::Activation::None);
  ref::conv2d_forward(p, x.data(), w.data(), bias, y_ref.data());
  expect_all_close(y, y_ref, "y");
  // The fused ReLU: the same sums, so exactly Relu of each plain output (and some outputs are negative).
  cpu::conv2d_forward(p, x.data(), w.data(), bias, y_relu.data(), kernels::Activation::Relu);
  int negatives = 0;
  for (std::int64_t i = 0; i < ys; ++i) {
    negatives += y[i] < 0;
    ASSERT_EQ(y_relu[i], kernels::Relu<T>{T(0)}(y[i])) << "element " << i;
  }
  EXPECT_GT(negatives, 0);

  auto dx = nans<T>(xs), dx_ref = nans<T>(xs);
  cpu::conv2d_backward_input(p, dy.data(), w.data(), dx.data());
  ref::conv2d_backward_input(p, dy.data(), w.data(), dx_ref.data());
  expect_all_close(dx, dx_ref, "dx");

  auto dw = nans<T>(ws), dw_ref = nans<T>(ws), db = nans<T>(p.K), db_ref = nans<T>(p.K);
  T* dbias = c.bias ? db.data() : nullptr;
  cpu::conv2d_backward_weight(p, x.data(), dy.data(), dw.data(), dbias);
  ref::conv2d_backward_weight(p, x.data(), dy.data(), dw_ref.data(), c.bias ? db_ref.data() : nullptr);
  expect_all_close(dw, dw_ref, "dw");
  if (c.bias) expect_all_close(db, db_ref, "dbias");

  // A second call from stale outputs must give bitwise the same result (fixed reduction order).
  auto dw2 = nans<T>(ws), db2 = nans<T>(p.K);
  cpu::conv2d_backward_weight(p, x.data(), dy.data(), dw2.data(), c.bias ? db2.data() : nullptr);
  EXPECT_EQ(dw2, dw);
}

TYPED_TEST(CpuKernels, Conv2dMatchesReference) {
  std::mt19937 rng(1234);
  int winograd = 0;
  for (const ConvCase& c : conv_cases()) {
    winograd += takes_winograd(conv_params(c));
    expect_conv_matches_reference<TypeParam>(c, rng);
  }
  EXPECT_EQ(winograd, 6) << "cases that take Winograd's path (mnist_conv2 and the winograd_* ones)";
}

// The GEMM path for the shapes Winograd's path takes otherwise (MINIDL_CPU_WINOGRAD=0 turns it off).
TYPED_TEST(CpuKernels, Conv2dGemmPathMatchesReference) {
  std::mt19937 rng(4321);
  std::vector<ConvCase> cases;
  for (const ConvCase& c : conv_cases())
    if (takes_winograd(conv_params(c))) cases.push_back(c);
  ASSERT_EQ(::setenv("MINIDL_CPU_WINOGRAD", "0", 1), 0);
  for (const ConvCase& c : cases) {
    EXPECT_FALSE(takes_winograd(conv_params(c))) << c.name;
    expect_conv_matches_reference<TypeParam>(c, rng);
  }
  ::unsetenv("MINIDL_CPU_WINOGRAD");
}

TEST(CpuConv2d, WinogradRejectsShapesItDoesNotHandle) {
  kernels::Conv2dParams p;
  p.N = 1, p.C = 8, p.H = 6, p.W = 6, p.K = 8, p.R = 3, p.S = 3, p.stride_h = 2;
  p.finalize("test");
  std::vector<float> x(8 * 36, 1.0f), w(8 * 8 * 9, 1.0f), y(8 * 36);
  EXPECT_THROW(cpu::winograd_conv2d_forward<float>(p, x.data(), w.data(), nullptr, y.data(), kernels::Activation::None),
               ValueError);  // stride 2
  p.stride_h = 1, p.C = 4, p.groups = 1;
  p.finalize("test");
  EXPECT_THROW(cpu::winograd_conv2d_forward<float>(p, x.data(), w.data(), nullptr, y.data(), kernels::Activation::None),
               ValueError);  // 4 input channels
  p.C = 8, p.pad_h = 3;
  p.finalize("test");
  EXPECT_TRUE(cpu::winograd_forward_applies(p));
  EXPECT_FALSE(cpu::winograd_backward_input_applies(p));  // padding 3: dy would need padding -1
  EXPECT_THROW(cpu::winograd_conv2d_backward_input<float>(p, y.data(), w.data(), x.data()), ValueError);
}

// The weight gradient sums the batch in chunks of images and adds the chunks up over the pool, and with few
// images per thread cuts each chunk's products into ranges of the weights' (c, r, s) rows (the last two cases:
// 144 and 100 rows, three and two ranges at 3 and 16 threads): correct for every thread count, including
// more threads than images.
TYPED_TEST(CpuKernels, Conv2dBackwardWeightOnAnyThreadCount) {
  using T = TypeParam;
  std::mt19937 rng(3);
  const int threads = get_num_threads();
  for (const ConvCase& c : {ConvCase{"batch19_pad1", 19, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1},
                            ConvCase{"batch5_groups2_stride2", 5, 4, 9, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2},
                            ConvCase{"batch5_c16_pad1_row_ranges", 5, 16, 7, 6, 6, 3, 3, 1, 1, 1, 1},
                            ConvCase{"batch3_1x1_c100_row_ranges", 3, 100, 4, 5, 7, 1, 1, 1, 1, 0, 0}}) {
    const kernels::Conv2dParams p = conv_params(c);
    const std::int64_t xs = p.N * p.C * p.H * p.W, ws = p.K * (p.C / p.groups) * p.R * p.S, ys = p.N * p.K * p.P * p.Q;
    const auto x = uniform<T>(xs, rng), dy = uniform<T>(ys, rng);
    auto dw_ref = nans<T>(ws), db_ref = nans<T>(p.K);
    ref::conv2d_backward_weight(p, x.data(), dy.data(), dw_ref.data(), db_ref.data());
    for (int t : {1, 3, 16}) {
      SCOPED_TRACE(std::string(c.name) + " threads=" + std::to_string(t));
      set_num_threads(t);
      auto dw = nans<T>(ws), db = nans<T>(p.K);
      cpu::conv2d_backward_weight(p, x.data(), dy.data(), dw.data(), db.data());
      expect_all_close(dw, dw_ref, "dw");
      expect_all_close(db, db_ref, "dbias");
    }
  }
  set_num_threads(threads);
}

// With few images per thread Winograd's items are cut into bands of tile rows (cpu::parts_per_item): on 3 and 16
// threads these cases take two or three bands (a last band of odd height; a second band still inside the top
// padding; a band wholly below the input), on one thread none. Every tile is computed as without bands, so the
// outputs are bitwise those of one thread, which match the reference.
TYPED_TEST(CpuKernels, WinogradBandsGiveTheUnbandedOutputs) {
  using T = TypeParam;
  std::mt19937 rng(11);
  const int threads = get_num_threads();
  for (const ConvCase& c : {ConvCase{"bands_odd_last_pad1", 1, 8, 17, 6, 8, 3, 3, 1, 1, 1, 1},
                            ConvCase{"bands_in_padding_pad10", 1, 8, 3, 5, 8, 3, 3, 1, 1, 10, 2},
                            ConvCase{"bands_groups2_pad2", 2, 16, 14, 7, 16, 3, 3, 1, 1, 2, 2, 1, 1, 2}}) {
    SCOPED_TRACE(c.name);
    const kernels::Conv2dParams p = conv_params(c);
    ASSERT_TRUE(takes_winograd(p));
    const std::int64_t xs = p.N * p.C * p.H * p.W, ws = p.K * (p.C / p.groups) * 9, ys = p.N * p.K * p.P * p.Q;
    const auto x = uniform<T>(xs, rng), w = uniform<T>(ws, rng), b = uniform<T>(p.K, rng), dy = uniform<T>(ys, rng);
    const bool backward = cpu::winograd_backward_input_applies(p);
    std::vector<T> y1, dx1;
    for (int t : {1, 3, 16}) {
      SCOPED_TRACE("threads=" + std::to_string(t));
      set_num_threads(t);
      auto y = nans<T>(ys), dx = nans<T>(xs);
      cpu::winograd_conv2d_forward(p, x.data(), w.data(), b.data(), y.data(), kernels::Activation::None);
      if (backward) cpu::winograd_conv2d_backward_input(p, dy.data(), w.data(), dx.data());
      if (t == 1) {
        auto y_ref = nans<T>(ys), dx_ref = nans<T>(xs);
        ref::conv2d_forward(p, x.data(), w.data(), b.data(), y_ref.data());
        expect_all_close(y, y_ref, "y");
        if (backward) {
          ref::conv2d_backward_input(p, dy.data(), w.data(), dx_ref.data());
          expect_all_close(dx, dx_ref, "dx");
        }
        y1 = y, dx1 = dx;
      } else {
        EXPECT_EQ(y, y1);
        if (backward) EXPECT_EQ(dx, dx1);
      }
    }
  }
  set_num_threads(threads);
}

TEST(CpuConv2d, RejectsInvalidParams) {
  kernels::Conv2dParams p;
  p.N = 1, p.C = 3, p.H = 5, p.W = 5, p.K = 4, p.R = 3, p.S = 3;
  std::vector<float> x(75), w(108), y(100);
  EXPECT_THROW(cpu::conv2d_forward<float>(p, x.data(), w.data(), nullptr, y.data(), kernels::Activation::None), ValueError);  // not finalized
  p.groups = 2;  // 4 output channels divide, 3 input channels do not
  p.finalize("test conv");
  EXPECT_THROW(cpu::conv2d_forward<float>(p, x.data(), w.data(), nullptr, y.data(), kernels::Activation::None), ValueError);
  // Not finalized, in Winograd's shape but for groups 0: an error, not a division by zero.
  kernels::Conv2dParams q;
  q.N = 1, q.C = 8, q.H = 5, q.W = 5, q.K = 8, q.R = 3, q.S = 3, q.groups = 0;
  std::vector<float> xq(200), wq(576), yq(200);
  EXPECT_THROW(cpu::conv2d_forward<float>(q, xq.data(), wq.data(), nullptr, yq.data(), kernels::Activation::None),
               ValueError);
  EXPECT_THROW(cpu::conv2d_backward_input<float>(q, yq.data(), wq.data(), xq.data()), ValueError);
}

// ---- pooling -----------------------------------------------------------------------------------------------

using testing::PoolCase;
using testing::pool_params;

std::vector<PoolCase> pool_cases() {
  return {
      {"mnist_k2s2", 2, 3, 24, 24, 2, 2, 2, 2},
      {"odd_7x5_batch1_k2s2", 1, 2, 7, 5, 2, 2, 2, 2},
      {"k2s2_rows_of_145_windows", 1, 2, 5, 291, 2, 2, 2, 2},  // long rows, an odd column and row left over
      {"batch3_k3s2p1", 3, 2, 7, 5, 3, 3, 2, 2, 1, 1},
      {"nonsquare", 3, 2, 7, 6, 3, 2, 1, 2, 1, 0},
      {"overlapping_s1", 2, 1, 5, 5, 3, 3, 1, 1},
      {"k1", 1, 2, 4, 3, 1, 1, 1, 1},
      {"global", 3, 2, 7, 5, 7, 5, 1, 1},
  };
}

// Max pool checked on continuous inputs, on inputs with many ties (integers in [-2, 2]: the first maximum must
// win) and on all-negative inputs (padding must not produce a 0 maximum).
TYPED_TEST(CpuKernels, MaxPool2dMatchesReference) {
  using T = TypeParam;
  std::mt19937 rng(99);
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    const kernels::Pool2dParams p = pool_params(c);
    const std::int64_t xs = p.N * p.C * p.H * p.W, ys = p.N * p.C * p.P * p.Q;
    auto ties = uniform<T>(xs, rng, -2.5, 2.5);
    for (T& v : ties) v = std::round(v);
    for (const auto& x : {uniform<T>(xs, rng), ties, uniform<T>(xs, rng, -3.0, -1.0)}) {
      auto y = nans<T>(ys), y_ref = nans<T>(ys);
      std::vector<std::int64_t> idx(static_cast<std::size_t>(ys), -7), idx_ref(static_cast<std::size_t>(ys), -7);
      cpu::max_pool2d_forward(p, x.data(), y.data(), idx.data());
      ref::max_pool2d_forward(p, x.data(), y_ref.data(), idx_ref.data());
      expect_all_close(y, y_ref, "y");
      EXPECT_EQ(idx, idx_ref);

      const auto dy = uniform<T>(ys, rng);
      auto dx = nans<T>(xs), dx_ref = nans<T>(xs);
      cpu::max_pool2d_backward(p, dy.data(), idx.data(), dx.data());
      ref::max_pool2d_backward(p, dy.data(), idx_ref.data(), dx_ref.data());
      expect_all_close(dx, dx_ref, "dx");
    }
  }
}

TYPED_TEST(CpuKernels, MaxPool2dPropagatesNaN) {
  using T = TypeParam;
  kernels::Pool2dParams p;
  p.N = 1, p.C = 1, p.H = 2, p.W = 2, p.kh = 2, p.kw = 2, p.sh = 2, p.sw = 2;
  p.finalize("test pool");
  const std::vector<T> x = {T(1), std::numeric_limits<T>::quiet_NaN(), T(5), T(2)};
  T y = 0;
  std::int64_t idx = -1;
  cpu::max_pool2d_forward(p, x.data(), &y, &idx);
  EXPECT_TRUE(std::isnan(y));
  EXPECT_EQ(idx, 1);
}

// NaNs and infinities anywhere in 2x2 windows, in rows of 10 windows: NaN wins, the last NaN of a window is the
// one recorded, -inf ties keep the first element.
TYPED_TEST(CpuKernels, MaxPool2dNaNAndInfinitiesInEveryLane) {
  using T = TypeParam;
  kernels::Pool2dParams p;
  p.N = 2, p.C = 3, p.H = 8, p.W = 21, p.kh = 2, p.kw = 2, p.sh = 2, p.sw = 2;
  p.finalize("test pool");
  const std::int64_t xs = p.N * p.C * p.H * p.W, ys = p.N * p.C * p.P * p.Q;
  std::mt19937 rng(5);
  auto x = uniform<T>(xs, rng, -2.5, 2.5);
  const T specials[] = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::infinity()};
  for (T& v : x) {
    const unsigned r = rng() % 8;
    if (r < 3) v = specials[r];
  }
  auto y = nans<T>(ys), y_ref = nans<T>(ys);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(ys), -7), idx_ref(static_cast<std::size_t>(ys), -7);
  cpu::max_pool2d_forward(p, x.data(), y.data(), idx.data());
  ref::max_pool2d_forward(p, x.data(), y_ref.data(), idx_ref.data());
  EXPECT_EQ(idx, idx_ref);
  for (std::int64_t o = 0; o < ys; ++o) {
    if (std::isnan(y_ref[o])) {
      EXPECT_TRUE(std::isnan(y[o])) << o;
    } else {
      EXPECT_EQ(y[o], y_ref[o]) << o;
    }
  }
}

TEST(CpuMaxPool2d, BackwardRejectsIndexOutsidePlane) {
  kernels::Pool2dParams p;
  p.N = 1, p.C = 2, p.H = 2, p.W = 2, p.kh = 2, p.kw = 2, p.sh = 2, p.sw = 2;
  p.finalize("test pool");
  const std::vector<float> dy = {1.f, 2.f};
  const std::vector<std::int64_t> idx = {3, 4};
  std::vector<float> dx(8);
  EXPECT_THROW(cpu::max_pool2d_backward<float>(p, dy.data(), idx.data(), dx.data()), IndexError);
}

TYPED_TEST(CpuKernels, AvgPool2dMatchesReference) {
  using T = TypeParam;
  std::mt19937 rng(7);
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    const kernels::Pool2dParams p = pool_params(c);
    const std::int64_t xs = p.N * p.C * p.H * p.W, ys = p.N * p.C * p.P * p.Q;
    const auto x = uniform<T>(xs, rng), dy = uniform<T>(ys, rng);
    auto y = nans<T>(ys), y_ref = nans<T>(ys), dx = nans<T>(xs), dx_ref = nans<T>(xs);
    cpu::avg_pool2d_forward(p, x.data(), y.data());
    ref::avg_pool2d_forward(p, x.data(), y_ref.data());
    expect_all_close(y, y_ref, "y");
    cpu::avg_pool2d_backward(p, dy.data(), dx.data());
    ref::avg_pool2d_backward(p, dy.data(), dx_ref.data());
    expect_all_close(dx, dx_ref, "dx");
  }
}

// ---- batch norm --------------------------------------------------------------------------------------------

struct BatchNormCase {
  const char* name;
  std::int64_t N, C, HW;
  bool affine, running;
};

TYPED_TEST(CpuKernels, BatchNormMatchesReference) {
  using T = TypeParam;
  std::mt19937 rng(2024);
  const std::vector<BatchNormCase> cases = {
      {"batch1_7x5", 1, 3, 35, true, true},     {"batch3_7x5", 3, 5, 35, true, true},
      {"batch3_no_affine", 3, 5, 35, false, true}, {"hw1_no_running", 4, 2, 1, true, false},
      {"mnist_like", 4, 64, 576, true, true},
  };
  for (const BatchNormCase& c : cases) {
    SCOPED_TRACE(c.name);
    kernels::BatchNormParams p;
    p.N = c.N, p.C = c.C, p.HW = c.HW, p.eps = 1e-5, p.momentum = 0.1;
    const std::int64_t n = p.N * p.C * p.HW;
    // Values around 3 with spread 2: a mean far from 0 exposes cancellation in the variance.
    const auto x = uniform<T>(n, rng, 1.0, 5.0), dy = uniform<T>(n, rng);
    const auto gamma = uniform<T>(p.C, rng, 0.5, 1.5), beta = uniform<T>(p.C, rng);
    const T* g = c.affine ? gamma.data() : nullptr;
    const T* b = c.affine ? beta.data() : nullptr;
    const auto rm0 = uniform<T>(p.C, rng), rv0 = uniform<T>(p.C, rng, 0.5, 2.0);

    auto y = nans<T>(n), y_ref = nans<T>(n);
    auto mean = nans<T>(p.C), mean_ref = nans<T>(p.C), invstd = nans<T>(p.C), invstd_ref = nans<T>(p.C);
    auto rm = rm0, rv = rv0, rm_ref = rm0, rv_ref = rv0;
    cpu::batch_norm_forward_train(p, x.data(), g, b, y.data(), mean.data(), invstd.data(),
                                  c.running ? rm.data() : nullptr, c.running ? rv.data() : nullptr);
    ref::batch_norm_forward_train(p, x.data(), g, b, y_ref.data(), mean_ref.data(), invstd_ref.data(),
                                  c.running ? rm_ref.data() : nullptr, c.running ? rv_ref.data() : nullptr);
    expect_all_close(y, y_ref, "y");
    expect_all_close(mean, mean_ref, "save_mean");
    expect_all_close(invstd, invstd_ref, "save_invstd");
    expect_all_close(rm, rm_ref, "running_mean");
    expect_all_close(rv, rv_ref, "running_var");

    auto dx = nans<T>(n), dx_ref = nans<T>(n);
    auto dgamma = nans<T>(p.C), dgamma_ref = nans<T>(p.C), dbeta = nans<T>(p.C), dbeta_ref = nans<T>(p.C);
    cpu::batch_norm_backward(p, x.data(), dy.data(), g, mean.data(), invstd.data(), dx.data(),
                             c.affine ? dgamma.data() : nullptr, c.affine ? dbeta.data() : nullptr);
    ref::batch_norm_backward(p, x.data(), dy.data(), g, mean_ref.data(), invstd_ref.data(), dx_ref.data(),
                             dgamma_ref.data(), dbeta_ref.data());
    expect_all_close(dx, dx_ref, "dx");
    if (c.affine) {
      expect_all_close(dgamma, dgamma_ref, "dgamma");
      expect_all_close(dbeta, dbeta_ref, "dbeta");
    }

    auto ye = nans<T>(n), ye_ref = nans<T>(n);
    cpu::batch_norm_forward_eval(p, x.data(), g, b, rm0.data(), rv0.data(), ye.data());
    ref::batch_norm_forward_eval(p, x.data(), g, b, rm0.data(), rv0.data(), ye_ref.data());
    expect_all_close(ye, ye_ref, "y (eval)");
  }
}

TEST(CpuBatchNorm, TrainingRejectsOneValuePerChannel) {
  kernels::BatchNormParams p;
  p.N = 1, p.C = 2, p.HW = 1;
  std::vector<float> x = {1.f, 2.f}, y(2), mean(2), invstd(2);
  EXPECT_THROW(cpu::batch_norm_forward_train<float>(p, x.data(), nullptr, nullptr, y.data(), mean.data(),
                                                    invstd.data(), nullptr, nullptr),
               ValueError);
}

}  // namespace
}  // namespace minidl
