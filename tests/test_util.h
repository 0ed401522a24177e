#pragma once
// Shared helpers for the tests: random inputs, element-by-element comparison, typed errors, GPU availability.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/tensor_impl.h"
#include "minidl/minidl.h"

namespace minidl {
namespace testing {

/// Fresh random values in [-1, 1) (never all zeros), on the CPU, of the given dtype.
inline Tensor random_tensor(const Shape& shape, DType dtype = kFloat64, bool requires_grad = false, double lo = -1.0,
                            double hi = 1.0) {
  Tensor t = uniform(shape, lo, hi, TensorOptions(dtype));
  if (requires_grad) t.requires_grad_(true);
  return t;
}

/// Expects every element of `actual` to be within atol + rtol * |expected| of `expected`.
inline void expect_close(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                         const std::string& what = "") {
  ASSERT_TRUE(actual.defined()) << what << ": actual is undefined";
  ASSERT_TRUE(expected.defined()) << what << ": expected is undefined";
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what << ": shape " << shape_str(actual.sizes()) << " vs "
                                              << shape_str(expected.sizes());
  const std::vector<double> a = actual.detach().cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> e = expected.detach().cpu().to(kFloat64).to_vector<double>();
  int failures = 0;
  for (std::size_t i = 0; i < a.size() && failures < 10; ++i) {
    const bool ok = (std::isnan(a[i]) && std::isnan(e[i])) || std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]);
    if (!ok) {
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i];
      ++failures;
    }
  }
}

/// Expects f() to throw exactly Ex (a subclass is not accepted: a FormatError where a plain IOError is expected
/// fails) with a message that contains every one of `needles`; `context` names the case in failure messages.
template <class Ex, class F>
void expect_error(F&& f, const std::vector<std::string>& needles, const std::string& context = "") {
  try {
    f();
    std::string wanted;
    for (const auto& n : needles) wanted += " \"" + n + "\"";
    ADD_FAILURE() << context << ": expected " << typeid(Ex).name() << " mentioning" << wanted << ", nothing thrown";
  } catch (const Ex& e) {
    const std::string msg = e.what();
    EXPECT_EQ(typeid(e), typeid(Ex)) << context << ": thrown " << typeid(e).name() << ": " << msg;
    for (const auto& n : needles) {
      EXPECT_NE(msg.find(n), std::string::npos) << context << ": message lacks \"" << n << "\": " << msg;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << context << ": expected " << typeid(Ex).name() << ", got " << typeid(e).name() << ": " << e.what();
  }
}

inline bool gpu_available() { return cuda::is_available(); }

/// Why bfloat16 / float16 products are refused on `device` (ops::check_lowp_products: CUDA, until the cuBLASLt
/// 16-bit backward is fixed), or empty where they run.
inline std::string lowp_products_refusal(Device device) {
  try {
    const Tensor one = ones({1, 1}, TensorOptions(kBFloat16).device(device));
    (void)mm(one, one);
    return "";
  } catch (const TypeError& e) {
    return e.what();
  }
}

/// A view of `shape` into t's storage, starting `skip` elements past t's first element: a tensor that starts
/// mid-allocation, as a DDP bucket's gradient views and a batch's rows may.
inline Tensor storage_view(const Tensor& t, std::int64_t skip, const Shape& shape) {
  const TensorImpl* i = t.unsafe_impl();
  const std::size_t offset = i->byte_offset + static_cast<std::size_t>(skip) * element_size(i->dtype);
  return Tensor(std::make_shared<TensorImpl>(i->storage, offset, shape, i->dtype));
}

}  // namespace testing
}  // namespace minidl

/// Skips the current test with a visible reason when no usable CUDA device is present.
#define MINIDL_REQUIRE_GPU()                                                                        \
  do {                                                                                              \
    if (!::minidl::testing::gpu_available()) {                                                      \
      GTEST_SKIP() << "no usable CUDA device (" << (MINIDL_CUDA_ENABLED ? "none visible" : "CPU-only build") \
                   << "); GPU tests run on a machine with a GPU";                                   \
    }                                                                                               \
  } while (0)

/// Skips a test that needs 16-bit matrix products on `device` where they are refused, with the refusal as the
/// reason; the test runs again by itself once they are enabled.
#define MINIDL_REQUIRE_LOWP_PRODUCTS(device)                                                                 \
  do {                                                                                                      \
    const std::string minidl_refusal_ = ::minidl::testing::lowp_products_refusal(device);                   \
    if (!minidl_refusal_.empty()) GTEST_SKIP() << "16-bit products are refused there: " << minidl_refusal_; \
  } while (0)

/// Skips a test that counts cudaMalloc calls when the caching allocator is off (MINIDL_CUDA_NO_CACHE=1, as in
/// compute-sanitizer runs), where every allocation is one by design.
#define MINIDL_REQUIRE_CACHING_ALLOCATOR()                                                           \
  do {                                                                                              \
    if (!::minidl::cuda::allocator_caching()) {                                                     \
      GTEST_SKIP() << "the caching allocator is off (MINIDL_CUDA_NO_CACHE=1): every allocation is a cudaMalloc"; \
    }                                                                                               \
  } while (0)

/// EXPECT_ERROR(ValueError, cat({a, b}, 3), "cat", "dim"): the statement throws exactly ValueError whose message
/// contains each string; a failure names the statement.
#define EXPECT_ERROR(ExType, statement, ...) \
  ::minidl::testing::expect_error<ExType>([&] { (void)(statement); }, {__VA_ARGS__}, #statement)
