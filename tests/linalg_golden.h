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

#include "golden_file.h"
#include "minidl/minidl.h"

namespace minidl {
namespace testing {

inline const nlohmann::json& linalg_golden() {
  static const nlohmann::json g = read_golden("linalg_golden.json");
  return g;
}

/// A tensor of `dtype` from the generator's {shape, values} (non-finite values are written "nan", "inf", "-inf").
inline Tensor golden_tensor(const nlohmann::json& j, DType dtype) {
  const Shape shape = j.at("shape").get<Shape>();
  if (!is_floating_point(dtype)) {
    return from_vector(j.at("values").get<std::vector<std::int64_t>>(), shape).to(dtype);
  }
  std::vector<double> v;
  for (const auto& e : j.at("values")) v.push_back(golden_number(e));
  return from_vector(v, shape).to(dtype);
}

}  // namespace testing
}  // namespace minidl

#define MINIDL_REQUIRE_LINALG_GOLDEN() \
  MINIDL_REQUIRE_GOLDEN_FILE(::minidl::testing::linalg_golden(), "linalg_golden.json", "gen_linalg_golden.py")
