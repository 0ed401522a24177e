// Tensor basics: factories, shapes, conversions, views, in-place ops, printing, errors.
#include <sstream>

#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

TEST(Tensor, FactoriesFillEveryElement) {
  const Tensor z = zeros({2, 3});
  EXPECT_EQ(z.sizes(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), kFloat32);
  for (float v : z.to_vector<float>()) EXPECT_EQ(v, 0.f);
  for (double v : ones({4}, kFloat64).to_vector<double>()) EXPECT_EQ(v, 1.0);
  for (float v : full({3, 1}, 2.5).to_vector<float>()) EXPECT_EQ(v, 2.5f);
  const auto r = arange(5, kInt64).to_vector<std::int64_t>();
  EXPECT_EQ(r, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  const auto r2 = arange(1.0, 2.0, 0.25, kFloat64).to_vector<double>();
  EXPECT_EQ(r2, (std::vector<double>{1.0, 1.25, 1.5, 1.75}));
}

TEST(Tensor, ShapeOverflowAndNegativeSizesAreErrors) {
  EXPECT_THROW(zeros({-1, 2}), ValueError);
  EXPECT_THROW(shape_numel({1LL << 40, 1LL << 40}), ValueError);
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({3, 0, 5}), 0);
}

TEST(Tensor, RandomIsSeededAndInRange) {
  manual_seed(7);
  const auto a = rand({1000}).to_vector<float>();
  manual_seed(7);
  const auto b = rand({1000}).to_vector<float>();
  EXPECT_EQ(a, b);
  double mean = 0;
  for (float v : a) {
    EXPECT_GE(v, 0.f);
    EXPECT_LT(v, 1.f);
    mean += v;
  }
  EXPECT_NEAR(mean / 1000, 0.5, 0.05);
  const auto n = randn({20000}, kFloat64).to_vector<double>();
  double m = 0, s = 0;
  for (double v : n) m += v;
  m /= n.size();
  for (double v : n) s += (v - m) * (v - m);
  EXPECT_NEAR(m, 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(s / n.size()), 1.0, 0.03);
}

TEST(Tensor, FromVectorRoundTripsAndChecksSize) {
  const std::vector<float> v{1.f, -2.f, 3.5f, 4.f, 5.f, 6.f};
  const Tensor t = from_vector(v, {2, 3});
  EXPECT_EQ(t.to_vector<float>(), v);
  EXPECT_THROW(from_vector(v, {4, 2}), ValueError);
  EXPECT_THROW(t.to_vector<double>(), TypeError);
  EXPECT_EQ(from_vector(v, {2, 3}, kFloat64).to_vector<double>()[2], 3.5);
}

TEST(Tensor, ReshapeIsAViewAndInfersMinusOne) {
  Tensor t = random_tensor({2, 3, 4});
  Tensor v = t.reshape({6, -1});
  EXPECT_EQ(v.sizes(), (Shape{6, 4}));
  EXPECT_EQ(v.data_ptr(), t.data_ptr());
  EXPECT_EQ(t.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(t.unsqueeze(0).sizes(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(t.unsqueeze(0).squeeze(0).sizes(), (Shape{2, 3, 4}));
  EXPECT_THROW(t.reshape({5, -1}), ValueError);
  EXPECT_THROW(t.reshape({-1, -1}), ValueError);
  v.fill_(3.0);
  for (double x : t.to_vector<double>()) EXPECT_EQ(x, 3.0);
}

// Views can start anywhere in their storage (a DDP bucket's gradient views, a batch's rows): fill, copy and cast
// must not assume the alignment of a fresh allocation (Eigen's aligned maps crashed on such a view).
TEST(Tensor, FillCopyAndCastThroughAViewOneElementIntoItsStorage) {
  for (DType dt : {kFloat32, kFloat64}) {
    const std::int64_t n = 1027;
    Tensor base = random_tensor({n + 2}, dt);
    const std::vector<double> before = base.to(kFloat64).to_vector<double>();
    Tensor view = minidl::testing::storage_view(base, 1, {n});
    view.fill_(2.5);
    std::vector<double> after = base.to(kFloat64).to_vector<double>();
    EXPECT_EQ(after.front(), before.front());
    EXPECT_EQ(after.back(), before.back());
    for (std::int64_t i = 1; i <= n; ++i) ASSERT_EQ(after[i], 2.5) << "element " << i;
    const Tensor src = random_tensor({n}, dt == kFloat32 ? kFloat64 : kFloat32);  // a cast on the way
    view.copy_(src);
    after = base.to(kFloat64).to_vector<double>();
    const std::vector<double> expected = src.to(dt).to(kFloat64).to_vector<double>();
    EXPECT_EQ(after.front(), before.front());
    EXPECT_EQ(after.back(), before.back());
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(after[i + 1], expected[i]) << "element " << i;
  }
}

TEST(Tensor, TransposeMovesEveryElement) {
  const Tensor t = random_tensor({2, 3, 4});
  const Tensor u = t.transpose(0, 2);
  ASSERT_EQ(u.sizes(), (Shape{4, 3, 2}));
  const auto a = t.to_vector<double>(), b = u.to_vector<double>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(a[(i * 3 + j) * 4 + k], b[(k * 3 + j) * 2 + i]);
}

TEST(Tensor, DtypeConversionAndItem) {
  const Tensor t = from_vector(std::vector<double>{1.75, -2.25}, {2});
  EXPECT_EQ(t.to(kFloat32).to_vector<float>(), (std::vector<float>{1.75f, -2.25f}));
  EXPECT_EQ(t.to(kInt64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, -2}));
  EXPECT_EQ(full({1}, 4.0).item<float>(), 4.f);
  EXPECT_THROW(t.item<double>(), ValueError);
}

TEST(Tensor, InPlaceOpsBumpVersion) {
  Tensor t = random_tensor({3});
  const auto before = t.to_vector<double>();
  const auto v0 = t.version();
  t.mul_(2.0);
  EXPECT_GT(t.version(), v0);
  const auto after = t.to_vector<double>();
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(after[i], 2 * before[i]);
  Tensor o = random_tensor({3});
  t.add_(o, 0.5);
  const auto ov = o.to_vector<double>(), tv = t.to_vector<double>();
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(tv[i], after[i] + 0.5 * ov[i]);
  t.copy_(o);
  EXPECT_EQ(t.to_vector<double>(), ov);
}

TEST(Tensor, PrintingShowsValuesShapeAndDtype) {
  std::ostringstream os;
  os << from_vector(std::vector<float>{1.f, 2.f, 3.f, 4.f}, {2, 2});
  EXPECT_NE(os.str().find("[[1., 2.]"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("CPUFloatType{2,2}"), std::string::npos) << os.str();
}

TEST(Tensor, DeviceParsing) {
  EXPECT_TRUE(Device("cpu").is_cpu());
  EXPECT_EQ(Device("cuda:1").index(), 1);
  EXPECT_TRUE(Device("cuda").is_cuda());
  EXPECT_THROW(Device("gpu"), ValueError);
  EXPECT_THROW(Device("cuda:x"), ValueError);
}

TEST(Tensor, MixingDtypesPromotesToTheWiderOne) {
  const Tensor a = random_tensor({2}, kFloat32), b = random_tensor({2}, kFloat64);
  const Tensor c = a + b;
  EXPECT_EQ(c.dtype(), kFloat64);
  const auto va = a.to(kFloat64).to_vector<double>(), vb = b.to_vector<double>(), vc = c.to_vector<double>();
  for (std::size_t i = 0; i < vc.size(); ++i) EXPECT_EQ(vc[i], va[i] + vb[i]);
}
