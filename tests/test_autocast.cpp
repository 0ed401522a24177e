// Autocast (minidl/autocast.h): the guard and PyTorch's state functions, the op policy (every listed op runs in the
// dtype PyTorch's lists give, per device type), the cast cache, gradients of float32 parameters, autocast off in the
// backward pass, and a short training run under bf16 autocast against float32. The expected policies below are
// written out from PyTorch's registrations (aten/src/ATen/autocast_mode.{h,cpp}), independently of
// src/autocast/policy.h, so that a wrong row there fails here.
#include <cmath>
#include <functional>
#include <map>
#include <thread>

#include "autocast/policy.h"
#include "golden_file.h"
#include "test_util.h"

namespace minidl {
namespace {

namespace F = nn::functional;
using autocast::AutocastGuard;
using testing::random_tensor;

// ---------------------------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------------------------

TEST(Autocast, DefaultsAreOffWithPyTorchsDtypes) {
  EXPECT_FALSE(autocast::is_autocast_enabled(kCPU));
  EXPECT_FALSE(autocast::is_autocast_enabled(kCUDA));
  EXPECT_EQ(autocast::get_autocast_dtype(kCPU), kBFloat16);
  EXPECT_EQ(autocast::get_autocast_dtype(kCUDA), kFloat16);
  EXPECT_TRUE(autocast::is_autocast_cache_enabled());
}

TEST(Autocast, GuardSetsAndRestoresEachDeviceTypeSeparately) {
  {
    AutocastGuard cuda(kCUDA, kBFloat16);
    EXPECT_TRUE(autocast::is_autocast_enabled(kCUDA));
    EXPECT_FALSE(autocast::is_autocast_enabled(kCPU));
    EXPECT_EQ(autocast::get_autocast_dtype(kCUDA), kBFloat16);
    {
      AutocastGuard cpu("cpu", kFloat16);
      EXPECT_TRUE(autocast::is_autocast_enabled(kCPU));
      EXPECT_EQ(autocast::get_autocast_dtype(kCPU), kFloat16);
      EXPECT_EQ(autocast::get_autocast_dtype(kCUDA), kBFloat16);
      {
        AutocastGuard off(kCUDA, false);
        EXPECT_FALSE(autocast::is_autocast_enabled(kCUDA));
        EXPECT_TRUE(autocast::is_autocast_enabled(kCPU));
      }
      EXPECT_TRUE(autocast::is_autocast_enabled(kCUDA));
    }
    EXPECT_FALSE(autocast::is_autocast_enabled(kCPU));
    EXPECT_EQ(autocast::get_autocast_dtype(kCPU), kBFloat16);
  }
  EXPECT_FALSE(autocast::is_autocast_enabled(kCUDA));
  EXPECT_EQ(autocast::get_autocast_dtype(kCUDA), kFloat16);
}

TEST(Autocast, GuardWithoutDtypeUsesTheDeviceTypesCurrentOne) {
  autocast::set_autocast_dtype(kCPU, kFloat16);
  {
    AutocastGuard guard(kCPU);
    EXPECT_EQ(autocast::get_autocast_dtype(kCPU), kFloat16);
  }
  autocast::set_autocast_dtype(kCPU, kBFloat16);
  AutocastGuard guard(kCPU);
  EXPECT_EQ(autocast::get_autocast_dtype(kCPU), kBFloat16);
}

TEST(Autocast, NestingCountsRegionsAndTheSetters) {
  EXPECT_EQ(autocast::increment_nesting(), 1);
  EXPECT_EQ(autocast::decrement_nesting(), 0);
  autocast::set_autocast_enabled(kCPU, true);
  EXPECT_TRUE(autocast::is_autocast_enabled(kCPU));
  autocast::set_autocast_enabled(kCPU, false);
  {
    AutocastGuard guard(kCPU, std::nullopt, true, false);
    EXPECT_FALSE(autocast::is_autocast_cache_enabled());
  }
  EXPECT_TRUE(autocast::is_autocast_cache_enabled());
}

TEST(Autocast, StateIsPerThread) {
  AutocastGuard guard(kCPU, kBFloat16);
  bool other_enabled = true;
  std::thread t([&] { other_enabled = autocast::is_autocast_enabled(kCPU); });
  t.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_TRUE(autocast::is_autocast_enabled(kCPU));
}

TEST(Autocast, BadArgumentsAreTypedErrors) {
  EXPECT_ERROR(TypeError, AutocastGuard(kCPU, kFloat32), "AutocastGuard", "dtype", "bfloat16 or float16", "cpu",
               "found float32");
  EXPECT_ERROR(TypeError, AutocastGuard(kCUDA, kFloat64), "AutocastGuard", "dtype", "bfloat16 or float16", "cuda",
               "found float64");
  EXPECT_ERROR(TypeError, AutocastGuard(kCPU, kInt64), "dtype", "found int64");
  EXPECT_ERROR(TypeError, autocast::set_autocast_dtype(kCPU, kFloat32), "set_autocast_dtype", "dtype",
               "found float32");
  EXPECT_ERROR(ValueError, AutocastGuard("xpu", kBFloat16), "AutocastGuard", "device_type", "\"cpu\" or \"cuda\"",
               "found \"xpu\"");
  EXPECT_ERROR(ValueError, AutocastGuard(static_cast<DeviceType>(7)), "device_type", "kCPU or kCUDA", "found",
               "7");
  EXPECT_ERROR(ValueError, autocast::is_autocast_enabled(static_cast<DeviceType>(9)), "is_autocast_enabled",
               "device_type", "9");
  // As torch.autocast: a disabled region does not check the dtype.
  { AutocastGuard off(kCPU, kFloat32, false); }
  // Failed guards left nothing behind.
  EXPECT_FALSE(autocast::is_autocast_enabled(kCPU));
  EXPECT_EQ(autocast::get_autocast_dtype(kCPU), kBFloat16);
  EXPECT_EQ(autocast::increment_nesting(), 1);
  autocast::decrement_nesting();
}

// ---------------------------------------------------------------------------------------------------------------
// The op policy
// ---------------------------------------------------------------------------------------------------------------

/// What autocast does to an op on one device type, as PyTorch's lists say.
enum class P { Lower, F32, Promote, Same, Banned };

struct Case {
  const char* name;
  P cuda, cpu;
  std::function<Tensor(DType, Device)> run;  // builds fresh inputs of the dtype on the device and runs the op
};

Tensor rnd(const Shape& s, DType dt, Device dev, double lo = -1.0, double hi = 1.0) {
  return random_tensor(s, kFloat32, false, lo, hi).to(dev).to(dt);
}
Tensor labels(std::int64_t n, std::int64_t classes, Device dev) {
  return randint(0, classes, {n}, TensorOptions(kInt64)).to(dev);
}

std::vector<Case> policy_cases() {
  using D = DType;
  using V = Device;
  return {
      {"matmul", P::Lower, P::Lower, [](D t, V d) { return matmul(rnd({2, 3, 4}, t, d), rnd({4, 5}, t, d)); }},
      {"mm", P::Lower, P::Lower, [](D t, V d) { return mm(rnd({3, 4}, t, d), rnd({4, 5}, t, d)); }},
      {"bmm", P::Lower, P::Lower, [](D t, V d) { return bmm(rnd({2, 3, 4}, t, d), rnd({2, 4, 5}, t, d)); }},
      {"addmm", P::Lower, P::Lower,
       [](D t, V d) { return addmm(rnd({3, 5}, t, d), rnd({3, 4}, t, d), rnd({4, 5}, t, d)); }},
      {"baddbmm", P::Lower, P::Lower,
       [](D t, V d) { return baddbmm(rnd({2, 3, 5}, t, d), rnd({2, 3, 4}, t, d), rnd({2, 4, 5}, t, d)); }},
      {"mv", P::Lower, P::Same, [](D t, V d) { return mv(rnd({3, 4}, t, d), rnd({4}, t, d)); }},
      {"addmv", P::Lower, P::Same,
       [](D t, V d) { return addmv(rnd({3}, t, d), rnd({3, 4}, t, d), rnd({4}, t, d)); }},
      {"dot", P::Promote, P::Same, [](D t, V d) { return dot(rnd({6}, t, d), rnd({6}, t, d)); }},
      {"einsum", P::Lower, P::Lower,
       [](D t, V d) { return einsum("bij,bjk->bik", {rnd({2, 3, 4}, t, d), rnd({2, 4, 5}, t, d)}); }},
      {"linear", P::Lower, P::Lower,
       [](D t, V d) { return F::linear(rnd({2, 4}, t, d), rnd({3, 4}, t, d), rnd({3}, t, d)); }},
      {"linear_relu", P::Lower, P::Lower,
       [](D t, V d) { return F::linear_relu(rnd({2, 4}, t, d), rnd({3, 4}, t, d), rnd({3}, t, d)); }},
      {"conv1d", P::Lower, P::Lower,
       [](D t, V d) { return F::conv1d(rnd({2, 3, 8}, t, d), rnd({4, 3, 3}, t, d), rnd({4}, t, d)); }},
      {"conv2d", P::Lower, P::Lower,
       [](D t, V d) { return F::conv2d(rnd({2, 3, 6, 6}, t, d), rnd({4, 3, 3, 3}, t, d), rnd({4}, t, d)); }},
      {"conv2d_relu", P::Lower, P::Lower,
       [](D t, V d) { return F::conv2d_relu(rnd({2, 3, 6, 6}, t, d), rnd({4, 3, 3, 3}, t, d), rnd({4}, t, d)); }},
      {"conv_transpose1d", P::Lower, P::Lower,
       [](D t, V d) { return F::conv_transpose1d(rnd({2, 3, 5}, t, d), rnd({3, 4, 3}, t, d), rnd({4}, t, d)); }},
      {"conv_transpose2d", P::Lower, P::Lower,
       [](D t, V d) {
         return F::conv_transpose2d(rnd({2, 3, 4, 4}, t, d), rnd({3, 4, 3, 3}, t, d), rnd({4}, t, d));
       }},
      {"scaled_dot_product_attention", P::Lower, P::Lower,
       [](D t, V d) {
         return F::scaled_dot_product_attention(rnd({2, 2, 5, 8}, t, d), rnd({2, 2, 6, 8}, t, d),
                                                rnd({2, 2, 6, 8}, t, d));
       }},
      {"LSTMCell", P::Lower, P::Same,
       [](D t, V d) {
         nn::LSTMCell cell(4, 5);
         cell->to(d);
         cell->to(t);
         return std::get<0>(cell->forward(rnd({3, 4}, t, d)));
       }},
      {"GRUCell", P::Lower, P::Same,
       [](D t, V d) {
         nn::GRUCell cell(4, 5);
         cell->to(d);
         cell->to(t);
         return cell->forward(rnd({3, 4}, t, d), rnd({3, 5}, t, d));
       }},
      {"RNNCell", P::Lower, P::Same,
       [](D t, V d) {
         nn::RNNCell cell(4, 5);
         cell->to(d);
         cell->to(t);
         return cell->forward(rnd({3, 4}, t, d));
       }},
      {"LSTM", P::Lower, P::Lower,
       [](D t, V d) {
         nn::LSTM lstm(nn::LSTMOptions(4, 5).num_layers(2));
         lstm->to(d);
         lstm->to(t);
         return std::get<0>(lstm->forward(rnd({6, 2, 4}, t, d)));
       }},
      {"GRU", P::Lower, P::Lower,
       [](D t, V d) {
         nn::GRU gru(nn::GRUOptions(4, 5).bidirectional(true));
         gru->to(d);
         gru->to(t);
         return std::get<0>(gru->forward(rnd({6, 2, 4}, t, d)));
       }},
      {"acos", P::F32, P::Same, [](D t, V d) { return acos(rnd({7}, t, d, -0.9, 0.9)); }},
      {"asin", P::F32, P::Same, [](D t, V d) { return asin(rnd({7}, t, d, -0.9, 0.9)); }},
      {"cosh", P::F32, P::Same, [](D t, V d) { return cosh(rnd({7}, t, d)); }},
      {"sinh", P::F32, P::Same, [](D t, V d) { return sinh(rnd({7}, t, d)); }},
      {"tan", P::F32, P::Same, [](D t, V d) { return tan(rnd({7}, t, d)); }},
      {"exp", P::F32, P::Same, [](D t, V d) { return exp(rnd({7}, t, d)); }},
      {"expm1", P::F32, P::Same, [](D t, V d) { return expm1(rnd({7}, t, d)); }},
      {"log", P::F32, P::Same, [](D t, V d) { return log(rnd({7}, t, d, 0.1, 2.0)); }},
      {"log2", P::F32, P::Same, [](D t, V d) { return log2(rnd({7}, t, d, 0.1, 2.0)); }},
      {"log10", P::F32, P::Same, [](D t, V d) { return log10(rnd({7}, t, d, 0.1, 2.0)); }},
      {"log1p", P::F32, P::Same, [](D t, V d) { return log1p(rnd({7}, t, d, 0.1, 2.0)); }},
      {"reciprocal", P::F32, P::Same, [](D t, V d) { return reciprocal(rnd({7}, t, d, 0.5, 2.0)); }},
      {"rsqrt", P::F32, P::Same, [](D t, V d) { return rsqrt(rnd({7}, t, d, 0.5, 2.0)); }},
      {"pow(Tensor, double)", P::F32, P::Same, [](D t, V d) { return pow(rnd({7}, t, d), 2.0); }},
      {"pow(Tensor, Tensor)", P::F32, P::Same,
       [](D t, V d) { return pow(rnd({7}, t, d, 0.5, 2.0), rnd({7}, t, d)); }},
      {"softplus", P::F32, P::Same, [](D t, V d) { return F::softplus(rnd({7}, t, d)); }},
      {"softmax", P::F32, P::Same, [](D t, V d) { return softmax(rnd({3, 5}, t, d), 1); }},
      {"log_softmax", P::F32, P::Same, [](D t, V d) { return log_softmax(rnd({3, 5}, t, d), 1); }},
      {"layer_norm", P::F32, P::Same,
       [](D t, V d) { return F::layer_norm(rnd({3, 5}, t, d), {5}, rnd({5}, t, d), rnd({5}, t, d)); }},
      {"rms_norm", P::F32, P::Same, [](D t, V d) { return F::rms_norm(rnd({3, 5}, t, d), {5}, rnd({5}, t, d)); }},
      {"group_norm", P::F32, P::Same,
       [](D t, V d) { return F::group_norm(rnd({2, 4, 3}, t, d), 2, rnd({4}, t, d), rnd({4}, t, d)); }},
      {"interpolate", P::F32, P::Same,
       [](D t, V d) {
         return F::interpolate(rnd({1, 2, 4, 4}, t, d), F::InterpolateFuncOptions()
                                                            .size(std::vector<std::int64_t>{7, 7})
                                                            .mode(kBilinear)
                                                            .align_corners(false));
       }},
      {"sum", P::F32, P::Same, [](D t, V d) { return sum(rnd({3, 5}, t, d)); }},
      {"sum(dim)", P::F32, P::Same, [](D t, V d) { return sum(rnd({3, 5}, t, d), {1}); }},
      {"Tensor::sum", P::F32, P::Same, [](D t, V d) { return rnd({3, 5}, t, d).sum(); }},
      {"prod", P::F32, P::F32, [](D t, V d) { return prod(rnd({3, 5}, t, d)); }},
      {"prod(dim)", P::F32, P::F32, [](D t, V d) { return prod(rnd({3, 5}, t, d), 1); }},
      {"cumsum", P::F32, P::Same, [](D t, V d) { return cumsum(rnd({3, 5}, t, d), 1); }},
      {"cumprod", P::F32, P::Same, [](D t, V d) { return cumprod(rnd({3, 5}, t, d), 1); }},
      {"logsumexp", P::F32, P::Same, [](D t, V d) { return logsumexp(rnd({3, 5}, t, d), {1}); }},
      {"norm", P::F32, P::Same, [](D t, V d) { return norm(rnd({3, 5}, t, d)); }},
      {"cross_entropy", P::F32, P::F32,
       [](D t, V d) { return F::cross_entropy(rnd({4, 5}, t, d), labels(4, 5, d)); }},
      {"cross_entropy(options)", P::F32, P::F32,
       [](D t, V d) {
         return F::cross_entropy(rnd({4, 5}, t, d), labels(4, 5, d), F::CrossEntropyFuncOptions().label_smoothing(0.1));
       }},
      {"nll_loss", P::F32, P::F32, [](D t, V d) { return F::nll_loss(rnd({4, 5}, t, d), labels(4, 5, d)); }},
      {"mse_loss", P::F32, P::F32, [](D t, V d) { return F::mse_loss(rnd({4, 5}, t, d), rnd({4, 5}, t, d)); }},
      {"l1_loss", P::F32, P::F32, [](D t, V d) { return F::l1_loss(rnd({4, 5}, t, d), rnd({4, 5}, t, d)); }},
      {"smooth_l1_loss", P::F32, P::F32,
       [](D t, V d) { return F::smooth_l1_loss(rnd({4, 5}, t, d), rnd({4, 5}, t, d)); }},
      {"huber_loss", P::F32, P::F32, [](D t, V d) { return F::huber_loss(rnd({4, 5}, t, d), rnd({4, 5}, t, d)); }},
      {"kl_div", P::F32, P::F32, [](D t, V d) { return F::kl_div(rnd({4, 5}, t, d), rnd({4, 5}, t, d, 0.0, 1.0)); }},
      {"binary_cross_entropy_with_logits", P::F32, P::F32,
       [](D t, V d) { return F::binary_cross_entropy_with_logits(rnd({4, 5}, t, d), rnd({4, 5}, t, d, 0.0, 1.0)); }},
      {"binary_cross_entropy", P::Banned, P::F32,
       [](D t, V d) {
         return F::binary_cross_entropy(rnd({4, 5}, t, d, 0.05, 0.95), rnd({4, 5}, t, d, 0.0, 1.0));
       }},
      {"atan2", P::Promote, P::Same, [](D t, V d) { return atan2(rnd({7}, t, d), rnd({7}, t, d)); }},
      {"index_put", P::Promote, P::Same,
       [](D t, V d) { return index_put(rnd({5, 3}, t, d), {labels(4, 5, d)}, rnd({4, 3}, t, d)); }},
      {"scatter_add", P::Promote, P::Same,
       [](D t, V d) {
         return scatter_add(rnd({5, 3}, t, d), 0, randint(0, 5, {2, 3}, TensorOptions(kInt64)).to(d),
                            rnd({2, 3}, t, d));
       }},
      {"cat", P::Same, P::Promote, [](D t, V d) { return cat({rnd({2, 3}, t, d), rnd({4, 3}, t, d)}); }},
      {"stack", P::Same, P::Promote, [](D t, V d) { return stack({rnd({2, 3}, t, d), rnd({2, 3}, t, d)}); }},
  };
}

/// The dtype an op returns for inputs of dtype `in` under autocast to `lower` with policy `p`.
DType expected_dtype(P p, DType in, DType lower) {
  if (in == kFloat64) return kFloat64;  // float64 is never cast, and ignored by promotion
  switch (p) {
    case P::Lower: return lower;
    case P::F32: return kFloat32;
    default: return in;
  }
}

/// Every op of the policy under autocast on `device`, from float32, lower-precision and float64 inputs; and outside
/// the guard, where nothing changes.
void check_policy(Device device, DType lower) {
  for (const Case& c : policy_cases()) {
    const P p = device.is_cuda() ? c.cuda : c.cpu;
    for (const DType in : {kFloat32, lower, kFloat64}) {
      SCOPED_TRACE(std::string(c.name) + " on " + device.str() + " from " + dtype_name(in));
      AutocastGuard guard(device.type(), lower);
      if (p == P::Banned) {
        EXPECT_ERROR(TypeError, c.run(in, device), c.name, "unsafe to autocast", "with_logits");
        continue;
      }
      try {
        EXPECT_EQ(c.run(in, device).dtype(), expected_dtype(p, in, lower));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "threw: " << e.what();
      }
    }
    SCOPED_TRACE(std::string(c.name) + " on " + device.str() + " outside autocast");
    EXPECT_EQ(c.run(kFloat32, device).dtype(), kFloat32);
    // Autocast on the other device type leaves this one's tensors alone.
    AutocastGuard other(device.is_cuda() ? kCPU : kCUDA, kBFloat16);
    EXPECT_EQ(c.run(kFloat32, device).dtype(), kFloat32);
  }
}

TEST(Autocast, EveryOpOfThePolicyRunsInItsDtypeCPU) { check_policy(Device(kCPU), kBFloat16); }
TEST(Autocast, EveryOpOfThePolicyRunsInItsDtypeCPUFloat16) { check_policy(Device(kCPU), kFloat16); }

TEST(Autocast, EveryOpOfThePolicyRunsInItsDtypeGPU) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  check_policy(Device(kCUDA), kBFloat16);
  check_policy(Device(kCUDA), kFloat16);
}

TEST(Autocast, ACellLoopFeedsItsLowerPrecisionStateBackGPU) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  const Device gpu(kCUDA);
  nn::LSTMCell cell(4, 5);
  cell->to(gpu);
  AutocastGuard guard(kCUDA, kBFloat16);
  std::tuple<Tensor, Tensor> state = cell->forward(rnd({3, 4}, kFloat32, gpu));
  for (int t = 0; t < 3; ++t) state = cell->forward(rnd({3, 4}, kFloat32, gpu), state);  // bf16 state, f32 input
  EXPECT_EQ(std::get<0>(state).dtype(), kBFloat16);
  EXPECT_EQ(std::get<1>(state).dtype(), kBFloat16);
}

TEST(Autocast, PromotionTakesTheWidestOfMixedInputs) {
  const Device cpu(kCPU);
  AutocastGuard guard(kCPU, kBFloat16);
  const Tensor a = rnd({2, 3}, kBFloat16, cpu), b = rnd({2, 3}, kFloat32, cpu), c = rnd({2, 3}, kFloat64, cpu);
  EXPECT_EQ(cat({a, b}).dtype(), kFloat32);
  EXPECT_EQ(stack({a, a}).dtype(), kBFloat16);
  EXPECT_EQ(stack({b, a}).dtype(), kFloat32);
  // float64 is ignored by autocast's promotion and not cast: cat's own promotion makes the result float64.
  EXPECT_EQ(cat({a, c}).dtype(), kFloat64);
  EXPECT_ERROR(TypeError, cat({a, rnd({2, 3}, kFloat16, cpu)}), "cat", "bfloat16", "float16", "promoted");
}

TEST(Autocast, PromotionTakesTheWidestOfMixedInputsGPU) {
  MINIDL_REQUIRE_GPU();
  const Device gpu(kCUDA);
  AutocastGuard guard(kCUDA, kBFloat16);
  const Tensor idx = labels(4, 5, gpu);
  EXPECT_EQ(index_put(rnd({5, 3}, kBFloat16, gpu), {idx}, rnd({4, 3}, kFloat32, gpu)).dtype(), kFloat32);
  const Tensor sidx = randint(0, 5, {2, 3}, TensorOptions(kInt64)).to(gpu);
  EXPECT_EQ(scatter_add(rnd({5, 3}, kFloat32, gpu), 0, sidx, rnd({2, 3}, kBFloat16, gpu)).dtype(), kFloat32);
  EXPECT_EQ(dot(rnd({6}, kBFloat16, gpu), rnd({6}, kFloat32, gpu)).dtype(), kFloat32);
  EXPECT_EQ(atan2(rnd({6}, kBFloat16, gpu), rnd({6}, kBFloat16, gpu)).dtype(), kBFloat16);
}

TEST(Autocast, AnExplicitResultDtypeIsRespected) {
  const Device cpu(kCPU);
  // CUDA's float32 policy for sum and cumsum applies only without a dtype argument; prod's on the CPU likewise.
  AutocastGuard guard(kCPU, kBFloat16);
  EXPECT_EQ(prod(rnd({3, 4}, kFloat32, cpu), kFloat64).dtype(), kFloat64);
  EXPECT_EQ(prod(rnd({3, 4}, kFloat32, cpu), 1, false, kFloat64).dtype(), kFloat64);
}

TEST(Autocast, EnabledFalseAndNestedRegions) {
  const Device cpu(kCPU);
  const Tensor x = rnd({3, 4}, kBFloat16, cpu);
  AutocastGuard outer(kCPU, kBFloat16);
  EXPECT_EQ(prod(x).dtype(), kFloat32);
  {
    AutocastGuard off(kCPU, false);
    EXPECT_EQ(prod(x).dtype(), kBFloat16);
    {
      AutocastGuard on(kCPU);
      EXPECT_EQ(prod(x).dtype(), kFloat32);
    }
    EXPECT_EQ(prod(x).dtype(), kBFloat16);
  }
  EXPECT_EQ(prod(x).dtype(), kFloat32);
}

TEST(Autocast, InPlaceOpsKeepTheirDtype) {
  AutocastGuard guard(kCPU, kBFloat16);
  Tensor p = rnd({4}, kFloat32, Device(kCPU)).requires_grad_(true);
  Tensor y = p * 1.0;
  y.exp_();  // recorded through the out-of-place exp, which must not be autocast here
  EXPECT_EQ(y.dtype(), kFloat32);
}

// ---------------------------------------------------------------------------------------------------------------
// The cast cache
// ---------------------------------------------------------------------------------------------------------------

TEST(Autocast, AParameterIsCastOncePerOutermostRegion) {
  Tensor w = random_tensor({3, 4}, kFloat32, true);
  Tensor first;
  {
    AutocastGuard outer(kCPU, kBFloat16);
    first = autocast::cached_cast(kBFloat16, w, kCPU);
    EXPECT_EQ(first.dtype(), kBFloat16);
    EXPECT_TRUE(autocast::cached_cast(kBFloat16, w, kCPU).is_same(first));
    {
      AutocastGuard inner(kCPU, kBFloat16);
    }  // leaving an inner region keeps the cache
    EXPECT_TRUE(autocast::cached_cast(kBFloat16, w, kCPU).is_same(first));
    // Only float32 leaves that require grad, cast to the autocast dtype, are cached.
    const Tensor plain = random_tensor({3, 4}, kFloat32);
    EXPECT_FALSE(autocast::cached_cast(kBFloat16, plain, kCPU).is_same(autocast::cached_cast(kBFloat16, plain, kCPU)));
    const Tensor nonleaf = w * 2.0;
    EXPECT_FALSE(
        autocast::cached_cast(kBFloat16, nonleaf, kCPU).is_same(autocast::cached_cast(kBFloat16, nonleaf, kCPU)));
    EXPECT_FALSE(autocast::cached_cast(kFloat16, w, kCPU).is_same(autocast::cached_cast(kFloat16, w, kCPU)));
    // A cast made under no_grad has no graph edge: it is not handed out with grad on.
    Tensor no_grad_cast;
    {
      NoGradGuard no_grad;
      no_grad_cast = autocast::cached_cast(kBFloat16, w, kCPU);
    }
    EXPECT_FALSE(no_grad_cast.is_same(first));
    EXPECT_TRUE(autocast::cached_cast(kBFloat16, w, kCPU).is_same(first));
  }
  AutocastGuard again(kCPU, kBFloat16);
  EXPECT_FALSE(autocast::cached_cast(kBFloat16, w, kCPU).is_same(first));
}

TEST(Autocast, CacheCanBeTurnedOffAndIneligibleTensorsPassThrough) {
  Tensor w = random_tensor({3, 4}, kFloat32, true);
  {
    AutocastGuard guard(kCPU, kBFloat16, true, false);
    EXPECT_FALSE(autocast::cached_cast(kBFloat16, w, kCPU).is_same(autocast::cached_cast(kBFloat16, w, kCPU)));
  }
  const Tensor d = random_tensor({3}, kFloat64), i = ones({3}, TensorOptions(kInt64));
  EXPECT_TRUE(autocast::cached_cast(kBFloat16, d, kCPU).is_same(d));
  EXPECT_TRUE(autocast::cached_cast(kBFloat16, i, kCPU).is_same(i));
  EXPECT_TRUE(autocast::cached_cast(kBFloat16, w, kCUDA).is_same(w));  // not on that device type
  EXPECT_FALSE(autocast::cached_cast(kBFloat16, Tensor(), kCPU).defined());
}

/// Two uses of one weight in a region share one conversion: both products' weight edges lead to the same node.
void check_weight_used_twice_converts_once(Device device) {
  Tensor w = random_tensor({3, 4}, kFloat32).to(device).requires_grad_(true);
  const Tensor x = rnd({2, 4}, kFloat32, device);
  AutocastGuard guard(device.type(), kBFloat16);
  const Tensor y1 = F::linear(x, w), y2 = F::linear(x * 2.0, w);
  ASSERT_EQ(y1.dtype(), kBFloat16);
  ASSERT_TRUE(y1.grad_fn() && y2.grad_fn());
  const auto& n1 = y1.grad_fn()->next_functions();
  const auto& n2 = y2.grad_fn()->next_functions();
  ASSERT_GE(n1.size(), 2U);
  ASSERT_GE(n2.size(), 2U);
  ASSERT_TRUE(n1[1]);
  EXPECT_EQ(n1[1], n2[1]) << "the weight was converted twice";
  (y1.to(kFloat32).sum() + y2.to(kFloat32).sum()).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
}

TEST(Autocast, AWeightUsedTwiceConvertsOnce) { check_weight_used_twice_converts_once(Device(kCPU)); }

TEST(Autocast, AWeightUsedTwiceConvertsOnceGPU) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  check_weight_used_twice_converts_once(Device(kCUDA));
}

// ---------------------------------------------------------------------------------------------------------------
// Gradients and the backward pass
// ---------------------------------------------------------------------------------------------------------------

TEST(Autocast, GradientsArriveInEachInputsDtype) {
  // A bf16 leaf cast up by the float32 policy gets a bf16 gradient; a float32 one cast down gets float32.
  Tensor p = random_tensor({4, 5}, kFloat32).to(kBFloat16).requires_grad_(true);
  const Tensor target = random_tensor({4, 5}, kFloat32);
  Tensor loss;
  {
    AutocastGuard guard(kCPU, kBFloat16);
    loss = F::mse_loss(p, target);
  }
  EXPECT_EQ(loss.dtype(), kFloat32);
  loss.backward();
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(p.grad().dtype(), kBFloat16);
  const Tensor expected = (p.detach().to(kFloat32) - target) * (2.0 / 20.0);
  testing::expect_close(p.grad().to(kFloat32), expected, 1.6e-2, 1e-3, "mse_loss gradient");
}

TEST(Autocast, BackwardRunsWithAutocastOff) {
  // A backward rule that calls a float32-policy op: in the forward, under the guard, prod of a bf16 tensor is
  // float32; in the backward, even inside the guard, it stays bf16.
  const Tensor probe = rnd({3}, kBFloat16, Device(kCPU));
  DType in_backward = kBool;
  Tensor x = random_tensor({3}, kFloat32, true);
  AutocastGuard guard(kCPU, kBFloat16);
  EXPECT_EQ(prod(probe).dtype(), kFloat32);
  Tensor y = autograd::record(x.detach() * 2.0, "Probe", {x}, [&](const Tensor& g) {
    in_backward = prod(probe).dtype();
    return std::vector<Tensor>{g * 2.0};
  });
  y.sum().backward();
  EXPECT_EQ(in_backward, kBFloat16);
  EXPECT_TRUE(autocast::is_autocast_enabled(kCPU));
  EXPECT_EQ(prod(probe).dtype(), kFloat32);
}

/// Float32 parameters trained under autocast get float32 gradients close to those of a float32 forward.
void check_float32_parameter_gradients(Device device) {
  nn::Linear fc1(6, 8), fc2(8, 3);
  fc1->to(device);
  fc2->to(device);
  const Tensor x = rnd({5, 6}, kFloat32, device), y = labels(5, 3, device);
  const auto loss_of = [&] { return F::cross_entropy(fc2(relu(fc1(x))), y); };
  loss_of().backward();
  std::vector<Tensor> reference;
  for (auto* m : {&fc1, &fc2}) {
    for (auto& p : (*m)->parameters()) {
      reference.push_back(p.grad().clone());
      p.mutable_grad() = Tensor();
    }
  }
  Tensor loss;
  {
    AutocastGuard guard(device.type(), kBFloat16);
    loss = loss_of();
  }
  EXPECT_EQ(loss.dtype(), kFloat32);
  loss.backward();
  std::size_t k = 0;
  for (auto* m : {&fc1, &fc2}) {
    for (auto& p : (*m)->parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.dtype(), kFloat32);
      EXPECT_EQ(p.grad().dtype(), kFloat32);
      testing::expect_close(p.grad(), reference[k++], 5e-2, 2e-2, "gradient under autocast");
    }
  }
}

TEST(Autocast, Float32ParametersGetFloat32Gradients) { check_float32_parameter_gradients(Device(kCPU)); }

TEST(Autocast, Float32ParametersGetFloat32GradientsGPU) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  check_float32_parameter_gradients(Device(kCUDA));
}

// ---------------------------------------------------------------------------------------------------------------
// Training under autocast
// ---------------------------------------------------------------------------------------------------------------

struct SmallCnnImpl : nn::Module {
  SmallCnnImpl() : Module("SmallCnn"), conv(nn::Conv2dOptions(1, 4, 3)), fc1(4 * 3 * 3, 16), fc2(16, 3) {
    register_module("conv", conv.ptr());
    register_module("fc1", fc1.ptr());
    register_module("fc2", fc2.ptr());
  }
  Tensor forward(const Tensor& x) {
    Tensor h = F::max_pool2d(relu(conv(x)), 2).flatten(1);
    return fc2(relu(fc1(h)));
  }
  nn::Conv2d conv;
  nn::Linear fc1, fc2;
};
MINIDL_MODULE(SmallCnn);

/// The losses of a few SGD steps from one initialisation, with autocast to `amp` (or none).
std::vector<double> train_losses(Device device, std::optional<DType> amp, const Tensor& x, const Tensor& y) {
  manual_seed(7);
  SmallCnn model;
  model->to(device);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  std::vector<double> losses;
  for (int step = 0; step < 6; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard guard(device.type(), amp, amp.has_value());
      loss = F::cross_entropy(model->forward(x), y);
    }
    EXPECT_EQ(loss.dtype(), kFloat32);
    loss.backward();
    for (const auto& p : model->parameters()) EXPECT_EQ(p.grad().dtype(), kFloat32);
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

void check_training(Device device) {
  const Tensor x = rnd({16, 1, 8, 8}, kFloat32, device), y = labels(16, 3, device);
  const std::vector<double> reference = train_losses(device, std::nullopt, x, y);
  const std::vector<double> amp = train_losses(device, kBFloat16, x, y);
  ASSERT_EQ(reference.size(), amp.size());
  for (std::size_t i = 0; i < amp.size(); ++i) {
    // bf16 keeps 8 bits of mantissa (OpInfo's rtol 1.6e-2); a few steps compound it a little.
    EXPECT_NEAR(amp[i], reference[i], 3e-2 * std::abs(reference[i]) + 1e-2) << "step " << i;
  }
  EXPECT_LT(amp.back(), amp.front()) << "training under autocast did not reduce the loss";
}

TEST(Autocast, SmallCnnTrainsUnderBFloat16LikeFloat32) { check_training(Device(kCPU)); }

TEST(Autocast, SmallCnnTrainsUnderBFloat16LikeFloat32GPU) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(kCUDA));
  check_training(Device(kCUDA));
}


// ---------------------------------------------------------------------------------------------------------------
// Against PyTorch's CUDA autocast: tests/golden/autocast_golden.json (gen_autocast_golden.py, which describes the
// two models). The dtype of every intermediate must be PyTorch's; the loss and gradients must be as close to
// PyTorch's bf16 results as bf16 itself is to float32 there (three times that distance, plus bf16's rtol).
// ---------------------------------------------------------------------------------------------------------------

using json = nlohmann::json;

/// formula() of gen_autocast_golden.py: offset + scale * sin(0.37 i + 1.3 k + 0.5) in float64, then float32.
Tensor formula(const Shape& shape, int k, double scale = 1.0, double offset = 0.0) {
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = offset + scale * std::sin(0.37 * double(i) + 1.3 * k + 0.5);
  return from_vector(v, shape).to(kFloat32);
}

using Params = std::map<std::string, Tensor>;

/// A golden model: its parameters (leaves on the GPU), and one step that records each intermediate's dtype.
struct GoldenModel {
  Params params;
  std::function<Tensor(const Params&, std::map<std::string, DType>&)> step;
};

GoldenModel transformer_model(Device dev) {
  constexpr std::int64_t B = 2, T = 8, C = 32, H = 4, HID = 128, V = 16;
  const double s = 1 / std::sqrt(double(C)), s4 = 1 / std::sqrt(double(HID));
  const std::vector<std::tuple<std::string, Shape, double, double>> shapes = {
      {"ln1.weight", {C}, 0.1, 1.0},        {"ln1.bias", {C}, 0.1, 0.0},        {"qkv.weight", {3 * C, C}, s, 0.0},
      {"qkv.bias", {3 * C}, 0.02, 0.0},     {"proj.weight", {C, C}, s, 0.0},    {"proj.bias", {C}, 0.02, 0.0},
      {"ln2.weight", {C}, 0.1, 1.0},        {"ln2.bias", {C}, 0.1, 0.0},        {"fc.weight", {HID, C}, s, 0.0},
      {"fc.bias", {HID}, 0.02, 0.0},        {"fc_proj.weight", {C, HID}, s4, 0.0}, {"fc_proj.bias", {C}, 0.02, 0.0},
      {"head.weight", {V, C}, s, 0.0},      {"head.bias", {V}, 0.02, 0.0}};
  GoldenModel m;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto& [name, shape, scale, offset] = shapes[k];
    m.params[name] = formula(shape, int(k), scale, offset).to(dev).requires_grad_(true);
  }
  const Tensor x = formula({B, T, C}, 100).to(dev);
  std::vector<std::int64_t> t(B * T);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = (std::int64_t(i) * 5 + 3) % V;
  const Tensor targets = from_vector(t, {B * T}).to(dev);
  m.step = [=](const Params& p, std::map<std::string, DType>& dt) {
    const Tensor h = F::layer_norm(x, {C}, p.at("ln1.weight"), p.at("ln1.bias"));
    const Tensor qkv = F::linear(h, p.at("qkv.weight"), p.at("qkv.bias"));
    std::vector<Tensor> heads;
    for (const Tensor& part : qkv.split(C, -1)) heads.push_back(part.reshape({B, T, H, C / H}).transpose(1, 2));
    const Tensor att = F::scaled_dot_product_attention(heads[0], heads[1], heads[2], {}, 0.0, true);
    const Tensor att_out = F::linear(att.transpose(1, 2).reshape({B, T, C}), p.at("proj.weight"), p.at("proj.bias"));
    const Tensor x2 = x + att_out;
    const Tensor h2 = F::layer_norm(x2, {C}, p.at("ln2.weight"), p.at("ln2.bias"));
    const Tensor fc = F::linear(h2, p.at("fc.weight"), p.at("fc.bias"));
    const Tensor act = gelu(fc);
    const Tensor mlp = F::linear(act, p.at("fc_proj.weight"), p.at("fc_proj.bias"));
    const Tensor y = x2 + mlp;
    const Tensor logits = F::linear(y, p.at("head.weight"), p.at("head.bias"));
    const Tensor loss = F::cross_entropy(logits.reshape({B * T, V}), targets);
    dt = {{"ln1", h.dtype()},       {"qkv", qkv.dtype()},   {"attention", att.dtype()},
          {"attention_proj", att_out.dtype()}, {"residual1", x2.dtype()}, {"ln2", h2.dtype()},
          {"fc", fc.dtype()},       {"gelu", act.dtype()},  {"fc_proj", mlp.dtype()},
          {"residual2", y.dtype()}, {"logits", logits.dtype()}, {"loss", loss.dtype()}};
    return loss;
  };
  return m;
}

GoldenModel cnn_model(Device dev) {
  constexpr std::int64_t N = 4;
  const std::vector<std::tuple<std::string, Shape, double>> shapes = {
      {"conv1.weight", {32, 1, 3, 3}, 9},  {"conv1.bias", {32}, 9},     {"conv2.weight", {64, 32, 3, 3}, 288},
      {"conv2.bias", {64}, 288},          {"fc1.weight", {128, 9216}, 9216}, {"fc1.bias", {128}, 9216},
      {"fc2.weight", {10, 128}, 128},     {"fc2.bias", {10}, 128}};
  GoldenModel m;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto& [name, shape, fan_in] = shapes[k];
    m.params[name] = formula(shape, 200 + int(k), 1 / std::sqrt(fan_in)).to(dev).requires_grad_(true);
  }
  const Tensor x = formula({N, 1, 28, 28}, 300, 0.5, 0.5).to(dev);
  std::vector<std::int64_t> l(N);
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = (std::int64_t(i) * 3 + 1) % 10;
  const Tensor labels_t = from_vector(l, {N}).to(dev);
  m.step = [=](const Params& p, std::map<std::string, DType>& dt) {
    // examples/mnist/net.cpp's layers (ConvReLU2d, max_pool2d, LinearReLU, Linear) without dropout.
    const Tensor c1 = F::conv2d_relu(x, p.at("conv1.weight"), p.at("conv1.bias"));
    const Tensor c2 = F::conv2d_relu(c1, p.at("conv2.weight"), p.at("conv2.bias"));
    const Tensor pooled = F::max_pool2d(c2, 2);
    const Tensor f1 = F::linear_relu(pooled.flatten(1), p.at("fc1.weight"), p.at("fc1.bias"));
    const Tensor logits = F::linear(f1, p.at("fc2.weight"), p.at("fc2.bias"));
    const Tensor loss = F::cross_entropy(logits, labels_t);
    dt = {{"conv1", c1.dtype()}, {"conv2", c2.dtype()}, {"max_pool", pooled.dtype()},
          {"fc1", f1.dtype()},   {"logits", logits.dtype()}, {"loss", loss.dtype()}};
    return loss;
  };
  return m;
}

/// The values a golden entry stores for `t` (all, or the summary), in the order the entry lists them.
std::vector<double> stored_values(const Tensor& t, const json& entry) {
  const std::vector<double> v = t.detach().cpu().to(kFloat64).to_vector<double>();
  if (entry.contains("data")) return v;
  double sum = 0, abs_sum = 0, sq_sum = 0;
  for (double e : v) {
    sum += e;
    abs_sum += std::abs(e);
    sq_sum += e * e;
  }
  std::vector<double> out{sum, abs_sum, sq_sum};
  for (const auto& i : entry["indices"]) out.push_back(v[i.get<std::size_t>()]);
  return out;
}

std::vector<double> golden_values(const json& entry) {
  if (entry.contains("data")) return entry["data"].get<std::vector<double>>();
  std::vector<double> out{entry["sum"].get<double>(), entry["abs_sum"].get<double>(), entry["sq_sum"].get<double>()};
  for (const auto& s : entry["samples"]) out.push_back(s.get<double>());
  return out;
}

/// `actual` against PyTorch's autocast values within 3x PyTorch's own bf16-vs-float32 distance plus bf16's rtol.
void expect_like_pytorch(const std::vector<double>& actual, const std::vector<double>& amp,
                         const std::vector<double>& f32, const std::string& what) {
  ASSERT_EQ(actual.size(), amp.size()) << what;
  double noise = 0, scale = 0;
  for (std::size_t i = 0; i < amp.size(); ++i) {
    noise = std::max(noise, std::abs(amp[i] - f32[i]));
    scale = std::max(scale, std::abs(amp[i]));
  }
  int failures = 0;
  for (std::size_t i = 0; i < amp.size() && failures < 5; ++i) {
    const double tol = 3 * noise + 1.6e-2 * std::abs(amp[i]) + 1e-3 * scale;
    if (!(std::abs(actual[i] - amp[i]) <= tol)) {
      ADD_FAILURE() << what << " value " << i << ": " << actual[i] << ", PyTorch " << amp[i] << " (float32 "
                    << f32[i] << ", tolerance " << tol << ")";
      ++failures;
    }
  }
}

/// One bf16 autocast step of `make`'s model on `device` against the golden file's entry `key` (CUDA:
/// autocast_golden.json, PyTorch on a GPU; CPU: autocast_cpu_golden.json, PyTorch's CPU autocast).
void check_against_pytorch(DeviceType device, const char* key, GoldenModel (*make)(Device)) {
  if (device == kCUDA) MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LOWP_PRODUCTS(Device(device));
  const bool gpu = device == kCUDA;
  const json g = testing::read_golden(gpu ? "autocast_golden.json" : "autocast_cpu_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(g, gpu ? "autocast_golden.json" : "autocast_cpu_golden.json",
                             gpu ? "gen_autocast_golden.py" : "gen_autocast_cpu_golden.py");
  if (!g.contains(key)) GTEST_SKIP() << "the golden file has no " << key << " (PyTorch " << g["torch_version"] << ")";
  const json& want = g[key];
  struct Tf32Off {  // PyTorch's values were computed without TF32
    bool gpu, conv = cuda::allow_tf32_conv(), matmul = cuda::allow_tf32_matmul();
    explicit Tf32Off(bool on_gpu) : gpu(on_gpu) {
      if (gpu) cuda::set_allow_tf32(false, false);
    }
    ~Tf32Off() {
      if (gpu) cuda::set_allow_tf32(conv, matmul);
    }
  } tf32_off(gpu);
  GoldenModel m = make(Device(device));
  std::map<std::string, DType> dtypes;
  Tensor loss;
  {
    AutocastGuard guard(device, kBFloat16);
    loss = m.step(m.params, dtypes);
  }
  loss.backward();
  for (const auto& [name, dtype] : want["dtypes"].items()) {
    ASSERT_TRUE(dtypes.count(name)) << key << ": no intermediate " << name;
    EXPECT_EQ(dtypes.at(name), testing::dtype_named(dtype)) << key << ": intermediate " << name;
  }
  expect_like_pytorch({loss.item<double>()}, {want["loss"]["autocast"].get<double>()},
                      {want["loss"]["float32"].get<double>()}, std::string(key) + " loss");
  for (const auto& [name, entry] : want["grads"].items()) {
    const Tensor& p = m.params.at(name);
    ASSERT_TRUE(p.grad().defined()) << key << ": no gradient for " << name;
    EXPECT_EQ(p.grad().dtype(), kFloat32) << name;
    EXPECT_EQ(p.grad().sizes(), entry["shape"].get<Shape>()) << name;
    expect_like_pytorch(stored_values(p.grad(), entry["autocast"]), golden_values(entry["autocast"]),
                        golden_values(entry["float32"]), std::string(key) + " gradient of " + name);
  }
}

// The golden models themselves, on the CPU without autocast: every intermediate float32, every gradient present.
TEST(AutocastGolden, ModelsRunInFloat32WithoutAutocast) {
  for (const auto& make : {transformer_model, cnn_model}) {
    GoldenModel m = make(Device(kCPU));
    std::map<std::string, DType> dtypes;
    const Tensor loss = m.step(m.params, dtypes);
    for (const auto& [name, dtype] : dtypes) EXPECT_EQ(dtype, kFloat32) << name;
    EXPECT_TRUE(std::isfinite(loss.item<double>()));
    loss.backward();
    for (const auto& [name, p] : m.params) {
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_EQ(p.grad().sizes(), p.sizes()) << name;
    }
  }
}

TEST(AutocastGolden, TransformerBlockStepLikePyTorchGPU) {
  check_against_pytorch(kCUDA, "transformer", transformer_model);
}
TEST(AutocastGolden, ExampleCnnStepLikePyTorchGPU) { check_against_pytorch(kCUDA, "cnn", cnn_model); }

// PyTorch's CPU autocast (Debian's 1.13 wrote the file: the CNN only, it has no scaled_dot_product_attention).
TEST(AutocastGolden, ExampleCnnStepLikePyTorchCPU) { check_against_pytorch(kCPU, "cnn", cnn_model); }
TEST(AutocastGolden, TransformerBlockStepLikePyTorchCPU) {
  check_against_pytorch(kCPU, "transformer", transformer_model);
}

// minidl's CPU policy column against what the golden file's PyTorch does to each op (gen_autocast_cpu_golden.py runs
// every op and records "lower", "float32", "unchanged", ...). minidl follows PyTorch 2.x's lists; the rows where the
// recording PyTorch differs are listed with what it does, so a regenerated file with other differences fails here.
TEST(AutocastGolden, CpuPolicyLikePyTorchs) {
  const json g = testing::read_golden("autocast_cpu_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(g, "autocast_cpu_golden.json", "gen_autocast_cpu_golden.py");
  const json& torch_policy = g["cpu_policy"];
  const std::string version = g["torch_version"].get<std::string>();
  // PyTorch 1.13 (Debian's): no scaled_dot_product_attention or rms_norm yet; its CPU list casts the transposed
  // convolutions to float32 (2.x lowers them), and its LSTM layer is not lowered (2.x lowers mkldnn_rnn_layer).
  std::map<std::string, std::string> known;
  if (version.rfind("1.", 0) == 0) {
    known = {{"scaled_dot_product_attention", "absent"},
             {"rms_norm", "absent"},
             {"conv_transpose1d", "float32"},
             {"conv_transpose2d", "float32"},
             {"rnn_recurrence", "unknown: not lowered"}};
  }
  using autocast::policy::Cast;
  int rows = 0;
#define MINIDL_AUTOCAST_ROW(op, cuda_cast, cpu_cast)                                                             \
  {                                                                                                              \
    ++rows;                                                                                                      \
    const Cast c = autocast::policy::cast_of(autocast::policy::Op::op, kCPU);                                    \
    const std::string mine = c == Cast::Lower     ? "lower"                                                      \
                             : c == Cast::Float32 ? "float32"                                                    \
                             : c == Cast::Banned  ? "refused"                                                    \
                                                  : "unchanged";                                                  \
    ASSERT_TRUE(torch_policy.contains(#op)) << "the golden file has no row for " #op;                            \
    const std::string theirs = torch_policy[#op].get<std::string>();                                             \
    if (known.count(#op)) {                                                                                      \
      EXPECT_EQ(theirs.rfind(known.at(#op), 0), 0u) << #op << ": PyTorch " << version << " now does " << theirs; \
    } else {                                                                                                     \
      EXPECT_EQ(mine, theirs) << #op << " under CPU autocast: minidl " << mine << ", PyTorch " << version << " " \
                              << theirs;                                                                         \
    }                                                                                                            \
  }
  MINIDL_AUTOCAST_OPS(MINIDL_AUTOCAST_ROW)
#undef MINIDL_AUTOCAST_ROW
  EXPECT_EQ(static_cast<std::size_t>(rows), torch_policy.size()) << "rows of minidl's table vs the golden file's";
}

}  // namespace
}  // namespace minidl
