// The golden files of tests/golden (PyTorch's results, written by the generators beside them): where a test finds
// one, how it reads their dtype names and numbers, and the skip when one is absent.
#pragma once

#include <gtest/gtest.h>
#include <minidl/minidl.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace minidl::testing {

/// tests/golden/<name>, or $MINIDL_GOLDEN_DIR/<name> where that is set.
inline std::string golden_path(const std::string& name) {
  const char* dir = std::getenv("MINIDL_GOLDEN_DIR");
  if (dir != nullptr) return std::string(dir) + "/" + name;
  const std::string here = __FILE__;
  return here.substr(0, here.find_last_of("/\\") + 1) + "golden/" + name;
}

/// The parsed file, or null where it is absent.
inline nlohmann::json read_golden(const std::string& name) {
  std::ifstream in(golden_path(name));
  return in ? nlohmann::json::parse(in) : nlohmann::json();
}

/// The dtype a generator names as PyTorch does ("float32", "bfloat16", "bool", ...).
inline DType dtype_named(const std::string& name) {
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool}) {
    if (name == dtype_name(d)) return d;
  }
  throw ValueError("unknown dtype " + name);
}

/// A value as the generators write it: a number, a bool, or "nan", "inf", "-inf".
inline double golden_number(const nlohmann::json& v) {
  if (v.is_string()) {
    const std::string s = v;
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    return s == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return v.get<double>();
}

}  // namespace minidl::testing

/// Skips the test where `golden` (the parsed file `name`) is null, naming the file and the generator that writes it.
#define MINIDL_REQUIRE_GOLDEN_FILE(golden, name, generator)                                                       \
  if ((golden).is_null()) {                                                                                       \
    GTEST_SKIP() << minidl::testing::golden_path(name) << " not found: run `python3 tests/golden/" << (generator) \
                 << "` where PyTorch is installed";                                                               \
  }
