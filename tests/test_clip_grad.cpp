// Gradient clipping (nn::utils::clip_grad_norm_, clip_grad_value_): the total norm and the clipped gradients
// against a float64 reimplementation of PyTorch's formulas, for norm types 1, 2, 3 and inf, float32 and float64,
// non-contiguous and empty gradients, parameters without gradient, non-finite norms, bad arguments; on a GPU,
// CUDA against CPU and a training step with clipping captured in a CUDA graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "minidl/config.h"
#include "minidl/minidl.h"
#include "test_util.h"

namespace minidl {
namespace {

using nn::utils::clip_grad_norm_;
using nn::utils::clip_grad_value_;
using testing::expect_close;

const double kInf = std::numeric_limits<double>::infinity();

std::vector<double> values_of(const Tensor& t) { return t.detach().cpu().to(kFloat64).to_vector<double>(); }

/// Parameters of several shapes (one empty, one without gradient) with fresh random gradients scaled by `scale`;
/// the gradient of parameter 1 is a transposed (non-contiguous) view.
std::vector<Tensor> make_params(DType dtype, double scale, Device device = Device(kCPU)) {
  const std::vector<Shape> shapes = {{7}, {5, 3}, {0, 4}, {3, 2, 2}, {1}, {4}};
  std::vector<Tensor> params;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    Tensor p = testing::random_tensor(shapes[i], dtype).to(device).requires_grad_(true);
    if (i == 1) {
      p.mutable_grad() = (testing::random_tensor({3, 5}, dtype) * scale).to(device).t();
    } else if (i != 5) {  // parameter 5 has no gradient
      p.mutable_grad() = (testing::random_tensor(shapes[i], dtype) * scale).to(device);
    }
    params.push_back(p);
  }
  return params;
}

/// PyTorch's total norm, in float64: the norm of the per-tensor norms.
double reference_norm(const std::vector<std::vector<double>>& grads, double p) {
  std::vector<double> norms;
  for (const auto& g : grads) {
    double s = 0.0;
    for (const double x : g) s = std::isinf(p) ? std::max(s, std::fabs(x)) : s + std::pow(std::fabs(x), p);
    norms.push_back(std::isinf(p) ? s : std::pow(s, 1.0 / p));
  }
  double s = 0.0;
  for (const double n : norms) s = std::isinf(p) ? std::max(s, n) : s + std::pow(n, p);
  return std::isinf(p) ? s : std::pow(s, 1.0 / p);
}

std::vector<std::vector<double>> grads_of(const std::vector<Tensor>& params) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : params) {
    if (p.grad().defined()) out.push_back(values_of(p.grad()));
  }
  return out;
}

/// Clips `params` and checks the returned norm and every gradient element against the float64 reference.
void check_clip(std::vector<Tensor> params, double max_norm, double p, DType dtype, const std::string& what) {
  const auto before = grads_of(params);
  const double ref = reference_norm(before, p);
  const Tensor total = clip_grad_norm_(params, max_norm, p);
  const double tol = dtype == kFloat32 ? 2e-6 : 1e-13;
  ASSERT_EQ(total.dim(), 0) << what;
  EXPECT_EQ(total.dtype(), dtype) << what;
  EXPECT_EQ(total.device(), params[0].device()) << what;
  EXPECT_NEAR(total.cpu().to(kFloat64).item<double>(), ref, tol * ref) << what;
  const double coef = std::min(max_norm / (ref + 1e-6), 1.0);
  const auto after = grads_of(params);
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t k = 0; k < after.size(); ++k) {
    ASSERT_EQ(after[k].size(), before[k].size());
    for (std::size_t i = 0; i < after[k].size(); ++i) {
      EXPECT_NEAR(after[k][i], before[k][i] * coef, 4 * tol * std::fabs(before[k][i]) + 1e-30)
          << what << ": gradient " << k << " element " << i;
    }
  }
}

TEST(ClipGradNorm, MatchesFloat64Reference) {
  for (const DType dtype : {kFloat32, kFloat64}) {
    for (const double p : {1.0, 2.0, 3.0, kInf}) {
      const std::string what = std::string(dtype_name(dtype)) + " norm " + std::to_string(p);
      check_clip(make_params(dtype, 3.0), 0.5, p, dtype, what);
    }
  }
}

TEST(ClipGradNorm, BelowMaxNormNothingIsScaled) {
  for (const double p : {1.0, 2.0, kInf}) {
    std::vector<Tensor> params = make_params(kFloat32, 1.0);
    const auto before = grads_of(params);
    const double total = clip_grad_norm_(params, 1e6, p).item<double>();
    EXPECT_NEAR(total, reference_norm(before, p), 2e-6 * total);
    EXPECT_EQ(grads_of(params), before) << "norm " << p;
  }
}

TEST(ClipGradNorm, MixedDtypesGiveAFloat64Norm) {
  Tensor a = testing::random_tensor({6}, kFloat32, true), b = testing::random_tensor({4}, kFloat64, true);
  a.mutable_grad() = testing::random_tensor({6}, kFloat32) * 4.0;
  b.mutable_grad() = testing::random_tensor({4}, kFloat64) * 4.0;
  const double ref = reference_norm(grads_of({a, b}), 2.0);
  const Tensor total = clip_grad_norm_({a, b}, 1.0);
  EXPECT_EQ(total.dtype(), kFloat64);
  EXPECT_NEAR(total.item<double>(), ref, 1e-6 * ref);
  EXPECT_NEAR(reference_norm(grads_of({a, b}), 2.0), 1.0, 1e-5);
}

TEST(ClipGradNorm, SingleTensorAndNoGradients) {
  Tensor p = testing::random_tensor({10}, kFloat64, true);
  p.mutable_grad() = testing::random_tensor({10}) * 5.0;
  const double ref = reference_norm(grads_of({p}), 2.0);
  EXPECT_NEAR(clip_grad_norm_(p, 2.0).item<double>(), ref, 1e-13 * ref);
  EXPECT_NEAR(reference_norm(grads_of({p}), 2.0), 2.0 * ref / (ref + 1e-6), 1e-12);
  Tensor q = testing::random_tensor({3}, kFloat64, true);
  const Tensor none = clip_grad_norm_(std::vector<Tensor>{q}, 1.0);
  EXPECT_EQ(none.dtype(), kFloat32);
  EXPECT_EQ(none.item<float>(), 0.0f);
  EXPECT_FALSE(q.grad().defined());
}

TEST(ClipGradNorm, NonFiniteNorms) {
  for (const double bad : {kInf, std::nan("")}) {
    Tensor p = testing::random_tensor({4}, kFloat64, true);
    Tensor g = testing::random_tensor({4});
    g.index_put_({1}, bad);
    p.mutable_grad() = g;
    const auto before = values_of(g);
    EXPECT_ERROR(ValueError, clip_grad_norm_(p, 1.0, 2.0, true), "clip_grad_norm_", "error_if_nonfinite");
    EXPECT_EQ(values_of(p.grad()).size(), before.size());
    for (std::size_t i = 0; i < before.size(); ++i) {
      if (i != 1) EXPECT_EQ(values_of(p.grad())[i], before[i]) << "unchanged after the error";
    }
    const double total = clip_grad_norm_(p, 1.0).item<double>();
    EXPECT_EQ(std::isnan(total), std::isnan(bad));
    // As PyTorch: an infinite norm gives coefficient 0 (finite gradients become 0, inf * 0 NaN); NaN gives NaN.
    const auto after = values_of(p.grad());
    for (std::size_t i = 0; i < after.size(); ++i) {
      if (std::isnan(bad) || i == 1) {
        EXPECT_TRUE(std::isnan(after[i])) << i;
      } else {
        EXPECT_EQ(after[i], 0.0) << i;
      }
    }
  }
}

TEST(ClipGradValue, ClampsEveryElement) {
  std::vector<Tensor> params = make_params(kFloat64, 3.0);
  const auto before = grads_of(params);
  clip_grad_value_(params, 0.7);
  const auto after = grads_of(params);
  for (std::size_t k = 0; k < after.size(); ++k) {
    for (std::size_t i = 0; i < after[k].size(); ++i) EXPECT_EQ(after[k][i], std::clamp(before[k][i], -0.7, 0.7));
  }
  Tensor p = testing::random_tensor({3}, kFloat32, true);
  p.mutable_grad() = testing::random_tensor({3}, kFloat32) * 10.0;
  clip_grad_value_(p, 0.0);
  for (const double v : values_of(p.grad())) EXPECT_EQ(std::fabs(v), 0.0);
}

TEST(ClipGrad, BadArgumentsAreRejected) {
  std::vector<Tensor> params = make_params(kFloat32, 1.0);
  EXPECT_ERROR(ValueError, clip_grad_norm_(params, -1.0), "clip_grad_norm_", "max_norm", "-1");
  EXPECT_ERROR(ValueError, clip_grad_norm_(params, std::nan("")), "clip_grad_norm_", "max_norm", "nan");
  EXPECT_ERROR(ValueError, clip_grad_norm_(params, 1.0, 0.0), "clip_grad_norm_", "norm_type", "0");
  EXPECT_ERROR(ValueError, clip_grad_norm_(params, 1.0, -kInf), "clip_grad_norm_", "norm_type", "-inf");
  EXPECT_ERROR(ValueError, clip_grad_norm_(std::vector<Tensor>{Tensor()}, 1.0), "clip_grad_norm_", "undefined");
  EXPECT_ERROR(ValueError, clip_grad_value_(params, -0.5), "clip_grad_value_", "clip_value", "-0.5");
  EXPECT_ERROR(ValueError, clip_grad_value_(params, kInf), "clip_grad_value_", "clip_value", "inf");
}

// ---- CUDA --------------------------------------------------------------------------------------------------
#if MINIDL_CUDA_ENABLED

TEST(ClipGradGpu, MatchesCpu) {
  MINIDL_REQUIRE_GPU();
  for (const DType dtype : {kFloat32, kFloat64}) {
    for (const double p : {1.0, 2.0, 3.0, kInf}) {
      const std::string what = std::string(dtype_name(dtype)) + " norm " + std::to_string(p);
      std::vector<Tensor> cpu_params = make_params(dtype, 3.0);
      // Many tensors (more than one launch's list) and a large one (many blocks per tensor).
      for (int i = 0; i < 70; ++i) {
        Tensor q = testing::random_tensor({i == 3 ? 300001 : 1 + i % 9}, dtype, true);
        q.mutable_grad() = testing::random_tensor(q.sizes(), dtype);
        cpu_params.push_back(q);
      }
      std::vector<Tensor> gpu_params;
      for (const Tensor& q : cpu_params) {
        Tensor g = q.detach().to(Device(kCUDA, 0)).requires_grad_(true);
        if (q.grad().defined()) g.mutable_grad() = q.grad().to(Device(kCUDA, 0));
        gpu_params.push_back(g);
      }
      check_clip(gpu_params, 0.5, p, dtype, "cuda " + what);
      const Tensor cpu_total = clip_grad_norm_(cpu_params, 0.5, p);
      const double rtol = dtype == kFloat32 ? 1e-5 : 1e-12;
      for (std::size_t i = 0; i < cpu_params.size(); ++i) {
        if (cpu_params[i].grad().defined()) {
          expect_close(gpu_params[i].grad(), cpu_params[i].grad(), rtol, 0.0, what + " gradient " + std::to_string(i));
        }
      }
      (void)cpu_total;
    }
  }
}

TEST(ClipGradGpu, StepWithClippingCapturedInACudaGraph) {
  MINIDL_REQUIRE_GPU();
  const Device gpu(kCUDA, 0);
  std::vector<Tensor> cpu_params, gpu_params;
  for (const Shape& s : std::vector<Shape>{{64, 32}, {32}, {10, 64}}) {
    Tensor p = testing::random_tensor(s, kFloat32, true);
    p.mutable_grad() = testing::random_tensor(s, kFloat32) * 2.0;
    cpu_params.push_back(p);
    Tensor q = p.detach().to(gpu).requires_grad_(true);
    q.mutable_grad() = p.grad().to(gpu);
    gpu_params.push_back(q);
  }
  optim::SGD cpu_opt(cpu_params, optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD gpu_opt(gpu_params, optim::SGDOptions(0.1).momentum(0.9));
  // Each replay clips the gradients again in place: the reference does the same on the CPU.
  auto cpu_step = [&] {
    clip_grad_norm_(cpu_params, 1.0);
    cpu_opt.step();
  };
  cpu_step();
  clip_grad_norm_(gpu_params, 1.0);  // the warm-up step, outside the graph
  gpu_opt.step();
  // The norm's tensors are allocated inside the capture: cuda::CUDAGraph keeps them in the graph's pool.
  cuda::CUDAGraph graph;
  graph.capture_begin();
  const Tensor total = clip_grad_norm_(gpu_params, 1.0);
  gpu_opt.step();
  graph.capture_end();
  for (int r = 0; r < 4; ++r) {
    graph.replay();
    cpu_step();
  }
  cuda::synchronize();
  EXPECT_NEAR(total.cpu().item<float>(), 1.0f, 1e-5f) << "the last replay saw gradients already clipped to 1";
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    expect_close(gpu_params[i], cpu_params[i], 1e-5, 1e-6, "parameter " + std::to_string(i));
    expect_close(gpu_params[i].grad(), cpu_params[i].grad(), 1e-5, 1e-7, "gradient " + std::to_string(i));
  }
}

TEST(ClipGradGpu, MixedDevicesAreRejected) {
  MINIDL_REQUIRE_GPU();
  Tensor a = testing::random_tensor({3}, kFloat32, true);
  Tensor b = testing::random_tensor({3}, kFloat32).to(Device(kCUDA, 0)).requires_grad_(true);
  a.mutable_grad() = testing::random_tensor({3}, kFloat32);
  b.mutable_grad() = testing::random_tensor({3}, kFloat32).to(Device(kCUDA, 0));
  EXPECT_ERROR(ValueError, clip_grad_norm_({a, b}, 1.0), "clip_grad_norm_", "one device");
}

#endif  // MINIDL_CUDA_ENABLED

}  // namespace
}  // namespace minidl
