// Reading and showing a tensor's values from C++: accessor<T, N>() (LibTorch's TensorAccessor), sizes() printed
// with operator<<, tensors printed as PyTorch lays them out (tests/golden/linalg_golden.json) with LibTorch's type
// line, item<T>() and item() for every dtype, and to_vector<T>() of views and CUDA tensors.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "linalg_golden.h"
#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_error;
using minidl::testing::random_tensor;

namespace {

using i64 = std::int64_t;

template <class T>
std::string str(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// LibTorch's type line for a CPU tensor of dtype and shape.
std::string type_line(DType dt, const Shape& s, bool cuda = false) {
  const char* names[] = {"Float", "Double", "BFloat16", "Half", "Long", "Int", "Byte", "Bool"};
  std::string line = std::string("[ ") + (cuda ? "CUDA" : "CPU") + names[static_cast<int>(dt)] + "Type{";
  for (std::size_t i = 0; i < s.size(); ++i) line += (i ? "," : "") + std::to_string(s[i]);
  return line + "} ]";
}

}  // namespace

// ---- accessor -------------------------------------------------------------------------------------------------

TEST(TensorAccess, AccessorReadsAndWritesEveryElementThroughStrides) {
  const Tensor t = random_tensor({3, 4, 5});
  const auto v = t.to_vector<double>();
  auto a = t.accessor<double, 3>();
  EXPECT_EQ(a.sizes(), (Shape{3, 4, 5}));
  EXPECT_EQ(a.strides(), (Shape{20, 5, 1}));
  EXPECT_EQ(a.size(1), 4);
  EXPECT_EQ(a.stride(0), 20);
  EXPECT_EQ(a.data(), t.data_ptr<double>());
  for (i64 i = 0; i < 3; ++i) {
    for (i64 j = 0; j < 4; ++j) {
      for (i64 k = 0; k < 5; ++k) EXPECT_EQ(a[i][j][k], v[static_cast<std::size_t>((i * 4 + j) * 5 + k)]);
    }
  }
  // A transposed, sliced view: the accessor follows its strides, and writes reach the base.
  Tensor base = random_tensor({6, 4}, kFloat32);
  const Tensor view = base.t().slice(1, 1, 6, 2);  // (4, 3): base[1 + 2c, r]
  auto w = view.accessor<float, 2>();
  ASSERT_EQ(w.size(0), 4);
  ASSERT_EQ(w.size(1), 3);
  const auto before = base.to_vector<float>();
  for (i64 r = 0; r < 4; ++r) {
    for (i64 c = 0; c < 3; ++c) {
      EXPECT_EQ(w[r][c], before[static_cast<std::size_t>((1 + 2 * c) * 4 + r)]);
      w[r][c] = static_cast<float>(100 * r + c);
    }
  }
  const auto after = base.to_vector<float>();
  for (i64 row = 0; row < 6; ++row) {
    for (i64 col = 0; col < 4; ++col) {
      const auto i = static_cast<std::size_t>(row * 4 + col);
      EXPECT_EQ(after[i], row % 2 == 1 ? static_cast<float>(100 * col + (row - 1) / 2) : before[i])
          << row << "," << col;
    }
  }
  // Every dtype; const T reads.
  const Tensor ints = from_vector<std::int32_t>({1, -2, 3, 4, 5, -6}, {2, 3});
  const auto ia = ints.accessor<const std::int32_t, 2>();
  EXPECT_EQ(ia[1][2], -6);
  EXPECT_EQ(ia[0][1], -2);
  Tensor flags = zeros({4}, kBool);
  auto fa = flags.accessor<bool, 1>();
  fa[2] = true;
  EXPECT_EQ(flags.to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  Tensor halves = zeros({2}, kHalf);
  halves.accessor<Half, 1>()[1] = Half(2.5f);
  EXPECT_EQ(halves.to(kFloat32).to_vector<float>(), (std::vector<float>{0.f, 2.5f}));
  Tensor bytes = full({2, 2}, 7, kUInt8);
  bytes.accessor<std::uint8_t, 2>()[1][0] = 255;
  EXPECT_EQ(bytes.to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{7, 7, 255, 7}));
}

TEST(TensorAccess, AccessorErrors) {
  const Tensor t = random_tensor({2, 3}, kFloat32);
  expect_error<TypeError>([&] { (void)t.accessor<double, 2>(); }, {"accessor<float64, 2>", "float32"}, "wrong T");
  expect_error<ValueError>([&] { (void)t.accessor<float, 3>(); },
                           {"accessor<float32, 3>", "3 dims", "found 2", "[2, 3]"}, "wrong N");
  const Tensor undefined;
  expect_error<ValueError>([&] { (void)undefined.accessor<float, 1>(); }, {"accessor", "undefined"}, "undefined");
}

TEST(TensorAccessGpu, AccessorOfACudaTensorIsATypeError) {
  MINIDL_REQUIRE_GPU();
  const Tensor t = random_tensor({2, 3}, kFloat32).cuda();
  expect_error<TypeError>([&] { (void)t.accessor<float, 2>(); }, {"accessor<float32, 2>", "cuda:0", ".cpu()"}, "cuda");
}

// ---- sizes() printable ---------------------------------------------------------------------------------------

TEST(TensorAccess, SizesPrintAsLibtorchDoes) {
  const Tensor t = random_tensor({2, 3, 4});
  EXPECT_EQ(str(t.sizes()), "[2, 3, 4]");
  EXPECT_EQ(str(t.strides()), "[12, 4, 1]");
  EXPECT_EQ(str(random_tensor({}).sizes()), "[]");
  EXPECT_EQ(str(t.permute({2, 0, 1}).sizes()), "[4, 2, 3]");
  // Shape is a std::vector<int64_t> in every other respect.
  const std::vector<std::int64_t> plain = t.sizes();
  const Shape back = plain;
  EXPECT_EQ(back, t.sizes());
  EXPECT_EQ(t.sizes().vec(), plain);
  EXPECT_EQ(t.sizes(), (std::vector<std::int64_t>{2, 3, 4}));
}

// ---- printing ------------------------------------------------------------------------------------------------

TEST(TensorAccessGolden, PrintingMatchesPytorchsLayoutWithLibtorchsTypeLine) {
  MINIDL_REQUIRE_LINALG_GOLDEN();
  for (const auto& c : minidl::testing::linalg_golden().at("printing")) {
    const DType dt = minidl::testing::dtype_named(c.at("dtype"));
    const Tensor t = minidl::testing::golden_tensor(c.at("input"), dt);
    const std::string want = c.at("text").get<std::string>() + "\n" + type_line(dt, t.sizes());
    EXPECT_EQ(str(t), want) << c.at("name");
    // A non-contiguous view of the same values prints the same.
    if (t.dim() >= 2) {
      EXPECT_EQ(str(t.transpose(0, 1).contiguous().transpose(0, 1)), want) << c.at("name") << " (view)";
    }
  }
}

TEST(TensorAccess, PrintingEdgeCases) {
  EXPECT_EQ(str(Tensor()), "[ Tensor (undefined) ]");
  EXPECT_EQ(str(zeros({0}, kFloat32)), "[]\n[ CPUFloatType{0} ]");
  EXPECT_EQ(str(zeros({2, 0, 3}, kInt64)), "[]\n[ CPULongType{2,0,3} ]");
  EXPECT_EQ(str(full({}, 2.5, kFloat64)), "2.5000\n[ CPUDoubleType{} ]");
  EXPECT_EQ(str(from_vector<float>({1.f, 2.f, 3.f, 4.f}, {2, 2})), "[[1., 2.],\n [3., 4.]]\n[ CPUFloatType{2,2} ]");
  // requires_grad does not change the text (as LibTorch's); the stream's own format is left as it was.
  std::ostringstream os;
  os.precision(2);
  os << from_vector<double>({0.125, 1.0}, {2}, TensorOptions(kFloat64).requires_grad()) << " " << 3.14159;
  EXPECT_EQ(os.str(), "[0.1250, 1.0000]\n[ CPUDoubleType{2} ] 3.1");
}

TEST(TensorAccessGpu, CudaTensorsPrintTheirValuesAndCudaType) {
  MINIDL_REQUIRE_GPU();
  const Tensor t = from_vector<float>({1.5f, -2.f, 3.25f}, {3});
  EXPECT_EQ(str(t.cuda()), "[ 1.5000, -2.0000,  3.2500]\n[ CUDAFloatType{3} ]");
  const Tensor big = arange(3000.0, kInt64).reshape({3, 1000});
  EXPECT_EQ(str(big.cuda()), str(big).substr(0, str(big).rfind('\n')) + "\n" + type_line(kInt64, {3, 1000}, true));
}

// ---- item and to_vector --------------------------------------------------------------------------------------

TEST(TensorAccess, ItemConvertsFromEveryDtype) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8}) {
    const Tensor t = full({1, 1}, 3, dt);
    EXPECT_EQ(t.item<float>(), 3.f) << dt;
    EXPECT_EQ(t.item<double>(), 3.0) << dt;
    EXPECT_EQ(t.item<std::int64_t>(), 3) << dt;
    EXPECT_EQ(t.item<std::int32_t>(), 3) << dt;
    EXPECT_EQ(t.item<std::uint8_t>(), 3) << dt;
    EXPECT_EQ(t.item<bool>(), true) << dt;
    EXPECT_EQ(static_cast<float>(t.item<Half>()), 3.f) << dt;
    EXPECT_EQ(static_cast<float>(t.item<BFloat16>()), 3.f) << dt;
  }
  EXPECT_EQ(full({}, 2.75, kFloat64).item<std::int64_t>(), 2);  // truncates, as to(kInt64)
  EXPECT_EQ(full({}, true, kBool).item<double>(), 1.0);
  EXPECT_EQ(full({}, -1, kInt64).item<std::uint8_t>(), 255);  // wraps, as to(kUInt8)
  // item(): LibTorch's Scalar, of the dtype's category.
  const Scalar f = full({}, 0.5, kFloat32).item(), i = full({}, 7, kInt32).item(), b = full({}, true, kBool).item();
  EXPECT_TRUE(f.is_floating_point());
  EXPECT_EQ(f.to_double(), 0.5);
  EXPECT_TRUE(i.is_integral(false));
  EXPECT_EQ(i.to_long(), 7);
  EXPECT_TRUE(b.is_boolean());
  expect_error<ValueError>([] { (void)zeros({2}).item<float>(); }, {"item", "2 elements", "[2]"}, "two elements");
}

TEST(TensorAccess, ToVectorOfViewsInEveryDtype) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8, kBool}) {
    const Tensor base = arange(24.0, kInt64).reshape({2, 3, 4}).to(dt);
    // Transposed and sliced: element (i, j) of the view is base[j % 2][2i or so]: compare with a host loop.
    const Tensor view = base.permute({2, 0, 1}).slice(0, 1, 4, 2);  // (2, 2, 3): base[a][b][1 + 2c]
    const std::vector<std::int64_t> got = view.to(kInt64).to_vector<std::int64_t>();
    std::vector<std::int64_t> want;
    for (i64 c = 0; c < 2; ++c) {
      for (i64 a = 0; a < 2; ++a) {
        for (i64 b = 0; b < 3; ++b) {
          const i64 v = a * 12 + b * 4 + 1 + 2 * c;
          want.push_back(dt == kBool ? v != 0 : (dt == kUInt8 ? v % 256 : v));
        }
      }
    }
    EXPECT_EQ(got, want) << dt;
    // The typed copy of the view itself.
    if (dt == kFloat32) {
      const auto f = view.to_vector<float>();
      ASSERT_EQ(f.size(), want.size());
      for (std::size_t k = 0; k < f.size(); ++k) EXPECT_EQ(f[k], static_cast<float>(want[k]));
    }
  }
  const Tensor expanded = from_vector<double>({1.5, -2.0}, {2, 1}).expand({2, 3});
  EXPECT_EQ(expanded.to_vector<double>(), (std::vector<double>{1.5, 1.5, 1.5, -2.0, -2.0, -2.0}));
  expect_error<TypeError>([] { (void)zeros({2}, kFloat32).to_vector<double>(); }, {"to_vector<float64>", "float32"},
                          "wrong T");
}

TEST(TensorAccessGpu, ItemAndToVectorOfCudaTensors) {
  MINIDL_REQUIRE_GPU();
  const Tensor base = arange(12.0, kFloat32).reshape({3, 4});
  EXPECT_EQ(base.cuda().t().to_vector<float>(), base.t().to_vector<float>());
  EXPECT_EQ(base.cuda().select(1, 2).to(kInt64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 6, 10}));
  EXPECT_EQ(base.cuda().sum().item<double>(), 66.0);
  EXPECT_EQ(full({}, 9, kInt32).cuda().item().to_long(), 9);
}
