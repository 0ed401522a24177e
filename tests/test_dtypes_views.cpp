// The core's dtypes, type promotion and strided views: conversions bitwise as PyTorch's, result_type's table,
// views sharing storage (writes through them seen by the base), kernels on non-contiguous operands agreeing
// with the same op on contiguous copies, and gradients through views.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "minidl/minidl.h"
#include "test_util.h"

using namespace minidl;

namespace {
std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

TEST(DTypes, ElementSizesAndNames) {
  EXPECT_EQ(element_size(kFloat32), 4u);
  EXPECT_EQ(element_size(kFloat64), 8u);
  EXPECT_EQ(element_size(kBFloat16), 2u);
  EXPECT_EQ(element_size(kHalf), 2u);
  EXPECT_EQ(element_size(kInt64), 8u);
  EXPECT_EQ(element_size(kInt32), 4u);
  EXPECT_EQ(element_size(kUInt8), 1u);
  EXPECT_EQ(element_size(kBool), 1u);
  EXPECT_STREQ(dtype_name(kBFloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(kHalf), "float16");
  EXPECT_EQ(zeros({3}, kInt32).element_size(), 4u);
}

// Round to nearest, ties to even, at the boundaries where it matters (values PyTorch gives for these floats).
TEST(DTypes, BFloat16AndHalfRoundToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(BFloat16(from_bits(0x3F808000)).bits, 0x3F80);  // tie, even stays
  EXPECT_EQ(BFloat16(from_bits(0x3F818000)).bits, 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(BFloat16(from_bits(0x3F808001)).bits, 0x3F81);  // above the tie
  EXPECT_EQ(BFloat16(from_bits(0x7F7FFFFF)).bits, 0x7F80);  // rounds to infinity
  EXPECT_EQ(BFloat16(std::nanf("")).bits, 0x7FC0);
  EXPECT_EQ(Half(1.0f).bits, 0x3C00);
  EXPECT_EQ(Half(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(Half(65519.0f).bits, 0x7BFF);
  EXPECT_EQ(Half(65520.0f).bits, 0x7C00);  // the tie between 65504 and infinity goes to infinity (even)
  EXPECT_EQ(Half(from_bits(0x33000000)).bits, 0x0000);  // 2^-25: tie between 0 and the smallest subnormal
  EXPECT_EQ(Half(from_bits(0x33000001)).bits, 0x0001);
  EXPECT_EQ(Half(6.103515625e-05f).bits, 0x0400);  // the smallest normal
  EXPECT_EQ(Half(-2.0f).bits, 0xC000);
  EXPECT_EQ(Half(1.0f + 1.0f / 2048).bits, 0x3C00);  // tie, even
  EXPECT_EQ(Half(1.0f + 3.0f / 2048).bits, 0x3C02);  // tie, odd rounds up
  // Every half converts to float and back unchanged.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const Half x = Half::from_bits(static_cast<std::uint16_t>(h));
    const float f = static_cast<float>(x);
    if (std::isnan(f)) continue;
    ASSERT_EQ(Half(f).bits, h) << std::hex << h;
  }
  EXPECT_EQ(bits(static_cast<float>(BFloat16::from_bits(0x4049))), 0x40490000u);
}

TEST(DTypes, CastsBetweenAllDtypesOnTheCpu) {
  const Tensor x = from_vector(std::vector<double>{-2.75, -1.0, 0.0, 0.5, 1.5, 300.25}, {6});
  EXPECT_EQ(x.to(kInt64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-2, -1, 0, 0, 1, 300}));
  EXPECT_EQ(x.to(kInt32).to_vector<std::int32_t>(), (std::vector<std::int32_t>{-2, -1, 0, 0, 1, 300}));
  // uint8 through int64, as PyTorch: -2 wraps to 254, 300 to 44.
  EXPECT_EQ(x.to(kUInt8).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{254, 255, 0, 0, 1, 44}));
  EXPECT_EQ(x.to(kBool).to_vector<bool>(), (std::vector<bool>{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(x.to(kBFloat16).to(kFloat64).to_vector<double>(), (std::vector<double>{-2.75, -1, 0, 0.5, 1.5, 300}));
  EXPECT_EQ(x.to(kHalf).to(kFloat64).to_vector<double>(), (std::vector<double>{-2.75, -1, 0, 0.5, 1.5, 300.25}));
  for (DType d : {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8, kBool}) {
    const Tensor t = ones({2, 3}, d);
    EXPECT_EQ(t.dtype(), d);
    EXPECT_EQ(t.to(kFloat64).to_vector<double>(), std::vector<double>(6, 1.0)) << d;
  }
}

TEST(TypePromotion, FollowsPyTorchsResultType) {
  const Tensor f32 = zeros({2}, kFloat32), f64 = zeros({2}, kFloat64), i64 = zeros({2}, kInt64),
               i32 = zeros({2}, kInt32), u8 = zeros({2}, kUInt8), b = zeros({2}, kBool), bf = zeros({2}, kBFloat16),
               h = zeros({2}, kHalf);
  EXPECT_EQ(result_type(f32, f64), kFloat64);
  EXPECT_EQ(result_type(i64, f32), kFloat32);
  EXPECT_EQ(result_type(i32, i64), kInt64);
  EXPECT_EQ(result_type(u8, i32), kInt32);
  EXPECT_EQ(result_type(b, u8), kUInt8);
  EXPECT_EQ(result_type(bf, h), kFloat32);
  EXPECT_EQ(result_type(bf, i64), kBFloat16);
  // 0-d tensors and scalars raise the category, never the width.
  EXPECT_EQ(result_type(f32, zeros({}, kFloat64)), kFloat32);
  EXPECT_EQ(result_type(i32, zeros({}, kInt64)), kInt32);
  EXPECT_EQ(result_type(i64, zeros({}, kFloat64)), kFloat64);
  EXPECT_EQ(result_type(i64, 2.5), kFloat32);
  EXPECT_EQ(result_type(i64, 1), kInt64);
  EXPECT_EQ(result_type(u8, 1), kUInt8);
  EXPECT_EQ(result_type(b, 1), kInt64);
  EXPECT_EQ(result_type(h, 1.5), kHalf);
  EXPECT_TRUE(can_cast(kInt64, kFloat32));
  EXPECT_FALSE(can_cast(kFloat32, kInt64));
  EXPECT_FALSE(can_cast(kInt64, kBool));
}

TEST(TypePromotion, IntegerArithmeticComparisonsAndSums) {
  const Tensor a = from_vector(std::vector<std::int64_t>{7, -7, 5, 0}, {4});
  const Tensor b = from_vector(std::vector<std::int64_t>{2, 2, -3, 4}, {4});
  EXPECT_EQ((a + 1).dtype(), kInt64);
  EXPECT_EQ((a + 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{8, -6, 6, 1}));
  EXPECT_EQ((a * b).to_vector<std::int64_t>(), (std::vector<std::int64_t>{14, -14, -15, 0}));
  EXPECT_EQ(floor_divide(a, b).to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, -4, -2, 0}));
  EXPECT_EQ(remainder(a, b).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 1, -1, 0}));
  EXPECT_EQ(div(a, b).dtype(), kFloat32);
  EXPECT_EQ((a + 2.5).dtype(), kFloat32);
  EXPECT_THROW(floor_divide(a, zeros({4}, kInt64)), ValueError);
  const Tensor gt2 = a > 2;
  EXPECT_EQ(gt2.dtype(), kBool);
  EXPECT_EQ(gt2.to_vector<bool>(), (std::vector<bool>{1, 0, 1, 0}));
  EXPECT_EQ(logical_and(gt2, b > 0).to_vector<bool>(), (std::vector<bool>{1, 0, 0, 0}));
  EXPECT_EQ(logical_not(a).to_vector<bool>(), (std::vector<bool>{0, 0, 0, 1}));
  EXPECT_EQ(gt2.sum().dtype(), kInt64);
  EXPECT_EQ(gt2.sum().item<std::int64_t>(), 2);
  EXPECT_EQ(a.sum().item<std::int64_t>(), 5);
  EXPECT_EQ(from_vector(std::vector<std::int32_t>{1, 2}, {2}).sum().dtype(), kInt64);
  EXPECT_THROW(a.mean(), TypeError);
  EXPECT_EQ(argmax(a, 0).item<std::int64_t>(), 0);
  // eq(argmax(logits, 1), target): the accuracy idiom.
  const Tensor logits = from_vector(std::vector<float>{0.1f, 0.9f, 0.8f, 0.2f}, {2, 2});
  const Tensor target = from_vector(std::vector<std::int64_t>{1, 1}, {2});
  EXPECT_EQ(eq(argmax(logits, 1), target).sum().item<std::int64_t>(), 1);
}

TEST(Views, ShareStorageAndWritesReachTheBase) {
  const Tensor base = arange(12.0, kFloat64).reshape({3, 4});
  const Tensor t = base.t();
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (Shape{1, 4}));
  EXPECT_EQ(t.data_ptr(), base.data_ptr());
  Tensor row = base.select(0, 1);
  EXPECT_EQ(row.storage_offset(), 4);
  row.fill_(-1.0);
  EXPECT_EQ(base.to_vector<double>()[5], -1.0);
  Tensor col = base.narrow(1, 2, 1);
  col.copy_(from_vector(std::vector<double>{10, 20, 30}, {3, 1}));
  EXPECT_EQ(base.to_vector<double>(), (std::vector<double>{0, 1, 10, 3, -1, -1, 20, -1, 8, 9, 30, 11}));
  EXPECT_EQ(t.contiguous().to_vector<double>(), (std::vector<double>{0, -1, 8, 1, -1, 9, 10, 20, 30, 3, -1, 11}));
  const Tensor e = from_vector(std::vector<double>{1, 2, 3}, {3, 1}).expand({3, 4});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_EQ(e.sum().item<double>(), 24.0);
  EXPECT_EQ(base.slice(1, 0, 4, 2).sizes(), (Shape{3, 2}));
  EXPECT_EQ(base.permute({1, 0}).sizes(), (Shape{4, 3}));
  // view needs compatible strides; reshape copies instead.
  EXPECT_THROW(t.view({12}), ValueError);
  EXPECT_EQ(t.reshape({12}).to_vector<double>(), t.contiguous().to_vector<double>());
  EXPECT_THROW(base.select(0, 3), IndexError);
  EXPECT_THROW(base.narrow(1, 3, 2), IndexError);
  EXPECT_THROW(base.permute({0, 0}), ValueError);
  EXPECT_THROW(base.as_strided({4, 4}, {4, 1}, 0), ValueError);
  EXPECT_EQ(zeros({0, 3}).t().sizes(), (Shape{3, 0}));
}

TEST(Views, ElementwiseOnStridedOperandsMatchesContiguousCopies) {
  const Tensor a = randn({5, 6}, kFloat64), b = randn({6, 5}, kFloat64);
  const Tensor at = a.t(), sl = b.slice(0, 1, 6, 2);  // a transposed view, a strided slice
  const Tensor want = add(at.contiguous(), b.contiguous(), 0.5);
  EXPECT_EQ(add(at, b, 0.5).to_vector<double>(), want.to_vector<double>());
  EXPECT_EQ(mul(sl, at.slice(0, 0, 3)).to_vector<double>(),
            mul(sl.contiguous(), at.slice(0, 0, 3).contiguous()).to_vector<double>());
  EXPECT_EQ(exp(at).to_vector<double>(), exp(at.contiguous()).to_vector<double>());
  EXPECT_EQ(sum(at, {1}).to_vector<double>(), sum(at.contiguous(), {1}).to_vector<double>());
  EXPECT_EQ(matmul(at, a).to_vector<double>(), matmul(at.contiguous(), a).to_vector<double>());
  // In place through a view writes only the viewed elements.
  Tensor c = a.clone();
  Tensor v = c.t();
  v.mul_(2.0);
  EXPECT_EQ(c.to_vector<double>(), mul(a, 2.0).to_vector<double>());
  // bf16 elementwise computes in float and rounds once.
  const Tensor x = randn({7}, kFloat32);
  const Tensor y = add(x.to(kBFloat16), x.to(kBFloat16));
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(y.to(kFloat32).to_vector<float>(), add(x.to(kBFloat16).to(kFloat32), x.to(kBFloat16).to(kFloat32))
                                                   .to(kBFloat16).to(kFloat32).to_vector<float>());
}

TEST(Views, GradcheckThroughViews) {
  const Tensor x = randn({3, 4}, TensorOptions(kFloat64).requires_grad());
  const auto f = [](const std::vector<Tensor>& in) {
    const Tensor& t = in[0];
    return (t.t().narrow(0, 1, 2) * t.select(1, 2).unsqueeze(0).expand({2, 3})).sum() +
           (t.permute({1, 0}).slice(0, 0, 4, 2) * 3.0).pow(2.0).sum();
  };
  EXPECT_TRUE(autograd::gradcheck(f, {x}));
}

TEST(Views, InPlaceOnAViewOfALeafThatRequiresGradRaises) {
  Tensor x = randn({3}, TensorOptions().requires_grad());
  Tensor v = x.narrow(0, 0, 2);
  EXPECT_THROW(v.mul_(2.0), AutogradError);
}

// ---- the same on the GPU, against the CPU -------------------------------------------------------------------

namespace {
/// Values of any tensor as float64 on the host (exact for every dtype but int64 beyond 2^53).
std::vector<double> host_values(const Tensor& t) { return t.detach().cpu().to(kFloat64).to_vector<double>(); }
}  // namespace

TEST(ViewsGpu, CastsBetweenAllDtypesMatchTheCpu) {
  MINIDL_REQUIRE_GPU();
  const std::vector<DType> all = {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8, kBool};
  const Tensor src = mul(randn({257}, kFloat64), 100.0);
  for (DType from : all) {
    const Tensor x = src.to(from);
    for (DType to : all) {
      EXPECT_EQ(host_values(x.cuda().to(to)), host_values(x.to(to))) << from << " -> " << to;
      // From a strided view on the device (every other element, read backwards through a transpose).
      const Tensor v = x.reshape({257, 1}).expand({257, 3}).t().slice(1, 1, 257, 2);
      EXPECT_EQ(host_values(x.cuda().reshape({257, 1}).expand({257, 3}).t().slice(1, 1, 257, 2).to(to)),
                host_values(v.to(to)))
          << from << " -> " << to << " (strided)";
    }
  }
}

TEST(ViewsGpu, ElementwiseOnStridedOperandsMatchesTheCpu) {
  MINIDL_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32}) {
    const Tensor a = mul(randn({6, 5}, kFloat64), 10.0).to(dt), b = mul(randn({5, 6}, kFloat64), 10.0).to(dt);
    const Tensor ga = a.cuda(), gb = b.cuda();
    EXPECT_EQ(host_values(add(ga.t(), gb, 2)), host_values(add(a.t(), b, 2))) << dt;
    // (2, 6) rows of a transposed view times a strided column of b broadcast over them.
    EXPECT_EQ(host_values(mul(ga.t().slice(0, 1, 5, 2), gb.t().select(1, 3).unsqueeze(0))),
              host_values(mul(a.t().slice(0, 1, 5, 2), b.t().select(1, 3).unsqueeze(0))))
        << dt;
    EXPECT_EQ(host_values(gt(ga.t(), gb)), host_values(gt(a.t(), b))) << dt;
    EXPECT_EQ(host_values(maximum(ga.t(), gb)), host_values(maximum(a.t(), b))) << dt;
    EXPECT_EQ(host_values(abs(ga.t())), host_values(abs(a.t()))) << dt;
    if (is_integral(dt, false)) {
      const Tensor nz = add(abs(b), 1);
      EXPECT_EQ(host_values(floor_divide(ga.t(), nz.cuda())), host_values(floor_divide(a.t(), nz))) << dt;
      EXPECT_EQ(host_values(remainder(ga.t(), nz.cuda())), host_values(remainder(a.t(), nz))) << dt;
    }
    // Sums add in another order on the device: integral sums agree exactly, floating ones to their precision.
    const double got_sum = host_values(ga.t().sum())[0], want_sum = host_values(a.t().sum())[0];
    if (is_integral(dt, false)) {
      EXPECT_EQ(got_sum, want_sum) << dt;
    } else {
      EXPECT_NEAR(got_sum, want_sum, (is_reduced_floating_point(dt) ? 1e-2 : 1e-5) * (1 + std::abs(want_sum))) << dt;
    }
    Tensor c = ga.clone(), h = a.clone();
    c.t().narrow(0, 1, 2).fill_(7);
    h.t().narrow(0, 1, 2).fill_(7);
    EXPECT_EQ(host_values(c), host_values(h)) << dt;
  }
}

TEST(ViewsGpu, MatmulOfTransposedViewsMatchesTheCpu) {
  MINIDL_REQUIRE_GPU();
  const bool tf32_conv = cuda::allow_tf32_conv(), tf32_matmul = cuda::allow_tf32_matmul();
  cuda::set_allow_tf32(false, false);
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor m = randn({3, 4, 6}, dt), w = randn({3, 5, 6}, dt);
    const Tensor got = matmul(m.cuda(), w.cuda().transpose(-1, -2)), want = matmul(m, w.transpose(-1, -2));
    const auto g = host_values(got), e = host_values(want);
    ASSERT_EQ(g.size(), e.size());
    for (std::size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-5 * (1 + std::abs(e[i]))) << dt << " " << i;
  }
  cuda::set_allow_tf32(tf32_conv, tf32_matmul);
}

// Transposed operands go to the GEMM with its transpose flag: same values and gradients as contiguous copies.
TEST(Views, MatmulOfTransposedViewsAndItsGradients) {
  for (const bool batched : {false, true}) {
    const Shape sx = batched ? Shape{2, 4, 3} : Shape{4, 3}, sy = batched ? Shape{2, 5, 3} : Shape{5, 3};
    const Tensor x = randn(sx, TensorOptions(kFloat64).requires_grad());
    const Tensor y = randn(sy, TensorOptions(kFloat64).requires_grad());
    const auto f = [](const std::vector<Tensor>& in) {
      const Tensor& x = in[0];
      const Tensor yt = in[1].transpose(-1, -2);  // b read transposed; x.transpose: a read transposed
      return (matmul(x, yt) * matmul(x, yt.contiguous())).sum() + matmul(x.transpose(-1, -2), x).pow(2.0).sum();
    };
    EXPECT_TRUE(autograd::gradcheck(f, {x, y})) << batched;
    const auto got = matmul(x, y.transpose(-1, -2)).detach().to_vector<double>();
    const auto want = matmul(x, y.transpose(-1, -2).contiguous()).detach().to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i])));
  }
}

// Writing through a view while autograd records: the base's history gains the op for the view's region
// (PyTorch's CopySlices), so gradients through the base and through the view are right.
TEST(Views, InPlaceThroughAViewOfANonLeafGivesTheRightGradients) {
  const Tensor x = randn({4, 3}, TensorOptions(kFloat64).requires_grad());
  const Tensor w = randn({3}, TensorOptions(kFloat64).requires_grad());
  const auto scaled_rows = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 2.0;
    Tensor rows = y.narrow(0, 1, 2);
    rows.mul_(3.0);
    return (y * y).sum() + rows.sum();
  };
  EXPECT_TRUE(autograd::gradcheck(scaled_rows, {x}));
  // A buffer that needs no gradient becomes part of the graph by what is written into its slices.
  const auto assembled = [](const std::vector<Tensor>& in) {
    Tensor buf = zeros({5, 3}, kFloat64);
    buf.narrow(0, 0, 4).copy_(in[0]);
    buf.select(0, 4).add_(in[1]);
    buf.select(1, 1).mul_(-0.5);  // a strided column
    return (buf * buf).sum();
  };
  EXPECT_TRUE(autograd::gradcheck(assembled, {x, w}));
  // The values written are the ones a copy-based computation gives.
  Tensor y = x.detach() * 2.0;
  y.narrow(0, 1, 2).mul_(3.0);
  const auto v = y.to_vector<double>(), xs = x.detach().to_vector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], xs[i] * 2.0 * (i >= 3 && i < 9 ? 3.0 : 1.0));
}

TEST(Views, InPlaceThroughOneOfTwoViewsWhileRecordingIsRefused) {
  const Tensor x = randn({4}, TensorOptions(kFloat64).requires_grad());
  Tensor y = x * 2.0;
  const Tensor a = y.narrow(0, 0, 2), b = y.narrow(0, 2, 2);
  Tensor a2 = a;
  EXPECT_THROW(a2.mul_(3.0), AutogradError);  // b's history would not see the write
}

TEST(DTypes, RandomFactoriesInTheSixteenBitTypesStayInRange) {
  for (DType dt : {kBFloat16, kHalf}) {
    const Tensor u = rand({20000}, dt);
    EXPECT_EQ(u.dtype(), dt);
    const auto v = u.to(kFloat64).to_vector<double>();
    for (double x : v) ASSERT_TRUE(x >= 0.0 && x < 1.0) << dt << " " << x;
    const Tensor n = randn({20000}, dt);
    const double mean = n.to(kFloat64).mean().item<double>();
    EXPECT_NEAR(mean, 0.0, 0.05) << dt;
    EXPECT_TRUE(randn({3}, TensorOptions(dt).requires_grad()).requires_grad());
  }
  EXPECT_THROW(randn({3}, kInt64), TypeError);
}
