// BF16 and F16 tensors in safetensors files: every bit pattern and conversions over both formats' ranges survive
// io::save / io::load and save_state_dict; a transposed view is written row-major; a module whose dtype differs
// from the file's is refused. Against PyTorch (tests/golden/gen_safetensors_lowp_golden.py): minidl reads the file
// PyTorch writes (lowp_torch.safetensors) element for element, and writes one (WritesAFileTorchLoads) that the
// script's --check loads with PyTorch and compares.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "file_helpers.h"
#include "golden_file.h"
#include "minidl/io/safetensors.h"
#include "test_util.h"

namespace minidl {
namespace {

using test_files::message_of;
using test_files::TempDir;

constexpr const char* kGenerator = "gen_safetensors_lowp_golden.py";
constexpr const char* kTorchFile = "lowp_torch.safetensors";

/// The 16-bit patterns of a bfloat16 / float16 tensor, row-major.
std::vector<std::uint16_t> bits_of(const Tensor& t) {
  const Tensor c = t.detach().cpu().contiguous();
  std::vector<std::uint16_t> out(static_cast<std::size_t>(c.numel()));
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size() * 2);
  return out;
}

/// Expects a and b (one 16-bit dtype, one shape) to agree bit for bit, a NaN matching a NaN of any payload.
void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const std::vector<std::uint16_t> x = bits_of(a), y = bits_of(b);
  const std::vector<double> xv = a.to(kFloat64).to_vector<double>(), yv = b.to(kFloat64).to_vector<double>();
  int failures = 0;
  for (std::size_t i = 0; i < x.size() && failures < 10; ++i) {
    const bool nan = std::isnan(xv[i]) && std::isnan(yv[i]);
    if (!nan && x[i] != y[i]) {
      ADD_FAILURE() << what << ": element " << i << " is 0x" << std::hex << x[i] << ", expected 0x" << y[i] << std::dec
                    << " (" << xv[i] << " vs " << yv[i] << ")";
      ++failures;
    }
  }
}

/// A tensor of `dtype` (2 bytes per element) holding the given patterns.
Tensor from_bits(const std::vector<std::uint16_t>& bits, DType dtype) {
  Tensor t = empty({static_cast<std::int64_t>(bits.size())}, TensorOptions(dtype));
  std::memcpy(t.data_ptr(), bits.data(), bits.size() * 2);
  return t;
}

/// All 65536 patterns in order.
std::vector<std::uint16_t> every_pattern() {
  std::vector<std::uint16_t> bits(65536);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  return bits;
}

/// Float32 values over both formats' ranges: special values, halfway cases, subnormals of each, and values from
/// a fixed formula (no random draws, so the file's content is a function of this code alone).
Tensor source_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          inf,
                          -inf,
                          std::numeric_limits<float>::quiet_NaN(),
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          6.103515625e-05f,
                          5.960464477539063e-08f,
                          2.98e-08f,
                          2.9802322387695312e-08f,
                          1e-45f,
                          1.17549435e-38f,
                          3.3895313892515355e+38f,
                          std::numeric_limits<float>::max(),
                          1.00390625f,
                          1.001953125f,
                          1.0009765625f,
                          0.1f,
                          -0.3333333f};
  for (int i = 0; i < 400; ++i) {
    const double mantissa = 1.0 + static_cast<double>((i * 7919) % 1000) / 1000.0;
    const int exponent = i < 300 ? (i * 37) % 60 - 30 : (i * 53) % 256 - 130;
    v.push_back(static_cast<float>((i % 2 == 0 ? 1 : -1) * std::ldexp(mantissa, exponent)));
  }
  return from_vector(v, {static_cast<std::int64_t>(v.size())});
}

/// The minidl tensor of a record (the dtype names are minidl's: safetensors_name()).
Tensor tensor_of(const io::TensorRecord& r) {
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool}) {
    if (r.dtype != safetensors_name(d)) continue;
    Tensor t = empty(r.shape, TensorOptions(d));
    if (!r.data.empty()) std::memcpy(t.data_ptr(), r.data.data(), r.data.size());
    return t;
  }
  throw ValueError("no minidl dtype for " + r.dtype);
}

std::map<std::string, Tensor> read_tensors(const std::string& path) {
  std::map<std::string, Tensor> out;
  for (const io::TensorRecord& r : io::read_safetensors(path).tensors) out[r.name] = tensor_of(r);
  return out;
}

/// A module holding bfloat16 and float16 parameters and buffers: values, 0-d, empty, every bit pattern.
struct LowpNet : nn::Module {
  explicit LowpNet(bool filled) : Module("LowpNet") {
    const Tensor src = source_values();
    auto make = [&](const Tensor& values) { return filled ? values.clone() : zeros_like(values); };
    register_parameter("w_bf16", make(src.to(kBFloat16)));
    register_parameter("w_f16", make(src.narrow(0, 0, 420).reshape({20, 21}).to(kFloat16)));
    register_parameter("s_bf16", make(full({}, -2.5, TensorOptions(kBFloat16))));
    register_buffer("empty_f16", make(empty({0, 3}, TensorOptions(kFloat16))));
    register_buffer("all_bf16", make(from_bits(every_pattern(), kBFloat16)));
    register_buffer("all_f16", make(from_bits(every_pattern(), kFloat16)));
  }
};

TEST(SafetensorsLowp, ModuleRoundTripKeepsEveryBit) {
  TempDir dir;
  const std::string path = dir.file("lowp.safetensors");
  LowpNet saved(true), loaded(false);
  io::save(saved, path);
  const io::SafetensorsContents contents = io::read_safetensors(path);
  const std::map<std::string, std::string> dtypes = {{"w_bf16", "BF16"},   {"w_f16", "F16"},     {"s_bf16", "BF16"},
                                                     {"empty_f16", "F16"}, {"all_bf16", "BF16"}, {"all_f16", "F16"}};
  ASSERT_EQ(contents.tensors.size(), dtypes.size());
  for (const io::TensorRecord& r : contents.tensors) EXPECT_EQ(r.dtype, dtypes.at(r.name)) << r.name;
  io::load(loaded, path);
  const auto a = io::state_dict(saved), b = io::state_dict(loaded);
  for (const auto& [name, t] : a) expect_same_bits(b.at(name), t, name);
  EXPECT_EQ(bits_of(b.at("all_bf16")), every_pattern()) << "NaN payloads too: the bytes are copied";
  EXPECT_EQ(bits_of(b.at("all_f16")), every_pattern());
}

TEST(SafetensorsLowp, ViewsAreWrittenRowMajorAndDtypeMismatchesRefused) {
  TempDir dir;
  const std::string path = dir.file("views.safetensors");
  const Tensor m = uniform({4, 6}, -3, 3, TensorOptions(kFloat32));
  io::save_state_dict({{"t", m.to(kBFloat16).t()}, {"slice", m.to(kFloat16).narrow(1, 2, 3)}}, path);
  const auto back = read_tensors(path);
  expect_same_bits(back.at("t"), m.to(kBFloat16).t().contiguous(), "transposed bfloat16");
  expect_same_bits(back.at("slice"), m.to(kFloat16).narrow(1, 2, 3).contiguous(), "sliced float16");

  nn::Module wrong("Wrong");
  wrong.register_parameter("t", zeros({6, 4}, TensorOptions(kFloat32)));
  wrong.register_parameter("slice", zeros({4, 3}, TensorOptions(kBFloat16)));
  const std::string msg = message_of<FormatError>([&] { io::load(wrong, path); });
  EXPECT_NE(msg.find("'t': dtype expected F32, found BF16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'slice': dtype expected BF16, found F16"), std::string::npos) << msg;
}

TEST(SafetensorsLowp, ReadsAFileWrittenByPyTorch) {
  const std::string path = testing::golden_path(kTorchFile);
  if (!std::ifstream(path)) {
    GTEST_SKIP() << path << " not found: run `python3 tests/golden/" << kGenerator << "` where PyTorch is installed";
  }
  const io::SafetensorsContents contents = io::read_safetensors(path);
  EXPECT_EQ(contents.metadata.at("generator"), "tests/golden/gen_safetensors_lowp_golden.py");
  const auto t = read_tensors(path);
  const Tensor src = t.at("f32_source");
  ASSERT_EQ(src.dtype(), kFloat32);
  expect_same_bits(t.at("bf16"), src.to(kBFloat16), "PyTorch's bfloat16 of f32_source");
  expect_same_bits(t.at("f16"), src.to(kFloat16), "PyTorch's float16 of f32_source");
  const Tensor m = t.at("matrix_f32");
  expect_same_bits(t.at("bf16_matrix"), m.to(kBFloat16), "bf16_matrix");
  expect_same_bits(t.at("f16_matrix"), m.to(kFloat16), "f16_matrix");
  expect_same_bits(t.at("bf16_matrix_t"), m.t().to(kBFloat16), "bf16_matrix_t");
  expect_same_bits(t.at("f16_matrix_t"), m.t().to(kFloat16), "f16_matrix_t");
  EXPECT_EQ(t.at("bf16_scalar").dim(), 0);
  EXPECT_EQ(t.at("bf16_scalar").item<double>(), -2.5);
  EXPECT_EQ(t.at("f16_scalar").item<double>(), static_cast<double>(static_cast<float>(Half(0.333f))));
  EXPECT_EQ(t.at("bf16_empty").sizes(), (Shape{2, 0}));
  EXPECT_EQ(t.at("f16_empty").sizes(), (Shape{0, 4}));
  std::vector<std::uint16_t> pattern;
  for (std::uint32_t b = 0; b < 65536; b += 251) pattern.push_back(static_cast<std::uint16_t>(b));
  EXPECT_EQ(bits_of(t.at("bf16_bits")), pattern);
  EXPECT_EQ(bits_of(t.at("f16_bits")), pattern);
  EXPECT_EQ(t.at("bf16_bits").dtype(), kBFloat16);
  EXPECT_EQ(t.at("f16_bits").dtype(), kFloat16);

  // The same file through io::load into a module of those names, shapes and dtypes.
  nn::Module m2("FromTorch");
  m2.register_buffer("bf16_matrix", zeros({3, 5}, TensorOptions(kBFloat16)));
  m2.register_buffer("f16", zeros(t.at("f16").sizes(), TensorOptions(kFloat16)));
  for (const auto& [name, value] : t) {
    if (name != "bf16_matrix" && name != "f16") m2.register_buffer(name, zeros_like(value));
  }
  io::load(m2, path);
  for (const auto& [name, value] : io::state_dict(m2)) {
    ASSERT_EQ(value.nbytes(), t.at(name).nbytes()) << name;
    EXPECT_EQ(std::memcmp(value.data_ptr(), t.at(name).data_ptr(), value.nbytes()), 0) << name;
  }
}

TEST(SafetensorsLowp, WritesAFileTorchLoads) {
  // Checked with PyTorch by `gen_safetensors_lowp_golden.py --check` where MINIDL_LOWP_SAFETENSORS_OUT points.
  TempDir dir;
  const char* out = std::getenv("MINIDL_LOWP_SAFETENSORS_OUT");
  const std::string path = out != nullptr ? std::string(out) : dir.file("lowp_minidl.safetensors");
  const Tensor src = source_values();
  const Tensor u = uniform({3, 5}, -4, 4, TensorOptions(kFloat32));  // written through transposed views
  const std::map<std::string, Tensor> tensors = {{"f32_source", src},
                                                 {"bf16", src.to(kBFloat16)},
                                                 {"f16", src.to(kFloat16)},
                                                 {"bf16_bits", from_bits(every_pattern(), kBFloat16)},
                                                 {"f16_bits", from_bits(every_pattern(), kFloat16)},
                                                 {"t_source", u.t()},
                                                 {"bf16_t", u.to(kBFloat16).t()},
                                                 {"f16_t", u.to(kFloat16).t()},
                                                 {"bf16_scalar", full({}, -2.5, TensorOptions(kBFloat16))},
                                                 {"f16_scalar", full({}, 0.5, TensorOptions(kFloat16))},
                                                 {"bf16_empty", empty({0, 3}, TensorOptions(kBFloat16))},
                                                 {"f16_empty", empty({2, 0}, TensorOptions(kFloat16))}};
  io::save_state_dict(tensors, path, {{"writer", "minidl"}});
  const auto back = read_tensors(path);
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    if (t.dtype() == kFloat32) continue;
    expect_same_bits(back.at(name), t.contiguous(), name);
  }
  if (out != nullptr) std::cout << "wrote " << path << " for gen_safetensors_lowp_golden.py --check\n";
}

}  // namespace
}  // namespace minidl
