// Type promotion and dtype conversions against PyTorch: tests/golden/dtype_golden.json, written by
// tests/golden/gen_dtype_golden.py (see its header for what it stores). Conversions compare bits, on the CPU and
// on the GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "golden_file.h"
#include "minidl/minidl.h"
#include "test_util.h"

using namespace minidl;
using json = nlohmann::json;

namespace {

const json& golden() {
  static const json g = minidl::testing::read_golden("dtype_golden.json");
  return g;
}

#define MINIDL_REQUIRE_GOLDEN() MINIDL_REQUIRE_GOLDEN_FILE(golden(), "dtype_golden.json", "gen_dtype_golden.py")

using minidl::testing::dtype_named;

/// The 16-bit patterns of a bfloat16 or float16 tensor.
std::vector<std::uint16_t> bits16(const Tensor& t) {
  std::vector<std::uint16_t> r;
  const Tensor c = t.cpu();
  if (t.dtype() == kBFloat16) {
    for (const BFloat16 v : c.to_vector<BFloat16>()) r.push_back(v.bits);
  } else {
    for (const Half v : c.to_vector<Half>()) r.push_back(v.bits);
  }
  return r;
}

void expect_conversions(Device device) {
  const json& c = golden()["conversions"];
  std::vector<float> f32;
  for (const std::uint32_t u : c["float32_bits"].get<std::vector<std::uint32_t>>()) {
    float f;
    std::memcpy(&f, &u, 4);
    f32.push_back(f);
  }
  const Tensor x = from_vector(f32, {static_cast<std::int64_t>(f32.size())}).to(device);
  EXPECT_EQ(bits16(x.to(kBFloat16)), c["bfloat16_bits"].get<std::vector<std::uint16_t>>()) << device;
  EXPECT_EQ(bits16(x.to(kHalf)), c["float16_bits"].get<std::vector<std::uint16_t>>()) << device;
  const auto f64 = c["float64"].get<std::vector<double>>();
  const Tensor d = from_vector(f64, {static_cast<std::int64_t>(f64.size())}).to(device);
  EXPECT_EQ(bits16(d.to(kBFloat16)), c["float64_to_bfloat16_bits"].get<std::vector<std::uint16_t>>()) << device;
  EXPECT_EQ(bits16(d.to(kHalf)), c["float64_to_float16_bits"].get<std::vector<std::uint16_t>>()) << device;
  EXPECT_EQ(d.to(kInt64).cpu().to_vector<std::int64_t>(), c["float64_to_int64"].get<std::vector<std::int64_t>>());
  EXPECT_EQ(d.to(kInt32).cpu().to_vector<std::int32_t>(), c["float64_to_int32"].get<std::vector<std::int32_t>>());
  EXPECT_EQ(d.to(kUInt8).cpu().to_vector<std::uint8_t>(), c["float64_to_uint8"].get<std::vector<std::uint8_t>>());
  EXPECT_EQ(d.to(kBool).cpu().to_vector<bool>(), c["float64_to_bool"].get<std::vector<bool>>());
  // And back: every bfloat16 / float16 value widens exactly.
  const Tensor h = x.to(kHalf);
  EXPECT_EQ(bits16(h.to(kFloat32).to(kHalf)), bits16(h)) << device;
  EXPECT_EQ(bits16(h.to(kFloat64).to(kHalf)), bits16(h)) << device;
}

}  // namespace

TEST(DTypeGolden, ResultTypeMatchesPyTorchForEveryPair) {
  MINIDL_REQUIRE_GOLDEN();
  int checked = 0;
  for (const json& row : golden()["promotion"]) {
    const Tensor a = zeros({2}, dtype_named(row["a"]));
    const std::string kind = row["b_kind"], b = row["b"];
    DType r;
    if (kind == "scalar") {
      r = b == "bool" ? result_type(a, Scalar(true)) : b == "int" ? result_type(a, Scalar(3)) : result_type(a, 2.5);
    } else {
      r = result_type(a, zeros(kind == "tensor" ? Shape{2} : Shape{}, dtype_named(b)));
    }
    EXPECT_EQ(dtype_name(r), row["result"].get<std::string>()) << row["a"] << " with " << kind << " " << b;
    ++checked;
  }
  EXPECT_EQ(checked, 8 * 8 * 2 + 8 * 3);
}

TEST(DTypeGolden, ConversionsMatchPyTorchBitwiseOnTheCpu) {
  MINIDL_REQUIRE_GOLDEN();
  expect_conversions(Device(kCPU));
}

TEST(DTypeGolden, ConversionsMatchPyTorchBitwiseOnTheGpu) {
  MINIDL_REQUIRE_GOLDEN();
  MINIDL_REQUIRE_GPU();
  expect_conversions(Device(kCUDA));
}
