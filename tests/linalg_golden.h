#pragma once
// tests/golden/linalg_golden.json (written by tests/golden/gen_linalg_golden.py, see its header), shared by
// test_linalg.cpp (products) and test_tensor_access.cpp (printing).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "minidl/minidl.h"

namespace minidl {
namespace testing {

inline std::string linalg_golden_path() {
  const char* dir = std::getenv("MINIDL_GOLDEN_DIR");
  if (dir != nullptr) return std::string(dir) + "/linalg_golden.json";
  const std::string here = __FILE__;
  return here.substr(0, here.find_last_of("/\\") + 1) + "golden/linalg_golden.json";
}

inline const nlohmann::json& linalg_golden() {
  static const nlohmann::json g = [] {
    std::ifstream in(linalg_golden_path());
    return in ? nlohmann::json::parse(in) : nlohmann::json();
  }();
  return g;
}

inline DType golden_dtype(const std::string& name) {
  for (DType d : {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8, kBool}) {
    if (name == dtype_name(d)) return d;
  }
  throw ValueError("unknown dtype " + name);
}

/// A tensor of `dtype` from the generator's {shape, values} (non-finite values are written "nan", "inf", "-inf").
inline Tensor golden_tensor(const nlohmann::json& j, DType dtype) {
  const Shape shape = j.at("shape").get<Shape>();
  if (!is_floating_point(dtype)) {
    return from_vector(j.at("values").get<std::vector<std::int64_t>>(), shape).to(dtype);
  }
  std::vector<double> v;
  for (const auto& e : j.at("values")) {
    if (e.is_number()) {
      v.push_back(e.get<double>());
    } else {
      const std::string s = e.get<std::string>();
      v.push_back(s == "nan" ? std::numeric_limits<double>::quiet_NaN()
                             : (s == "-inf" ? -1 : 1) * std::numeric_limits<double>::infinity());
    }
  }
  return from_vector(v, shape).to(dtype);
}

}  // namespace testing
}  // namespace minidl

#define MINIDL_REQUIRE_LINALG_GOLDEN()                                                     \
  if (::minidl::testing::linalg_golden().is_null()) {                                      \
    GTEST_SKIP() << ::minidl::testing::linalg_golden_path() << " not found: run `python3 " \
                 << "tests/golden/gen_linalg_golden.py` where PyTorch is installed";       \
  }
