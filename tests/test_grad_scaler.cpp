// amp::GradScaler (torch.amp.GradScaler's algorithm): an inf or NaN gradient skips the optimizer step (parameters,
// state and step counts bitwise unchanged) and backs the scale off; clean steps grow it after growth_interval;
// unscale_ before clip_grad_norm_; training with the scaler agrees with training without it when nothing
// overflows (float32, and float16 activations over float32 parameters); state_dict; several optimizers; typed
// errors for misuse. The kernels against a plain loop on the CPU; on a GPU, CUDA against CPU and a whole scaled
// step captured in a CUDA graph against the eager steps, overflow included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "golden_file.h"
#include "kernels/backend.h"
#include "kernels/grad_scaler.h"
#include "minidl/minidl.h"
#include "test_util.h"

namespace minidl {
namespace {

using testing::expect_close;

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A two-layer perceptron's parameters (float32, fresh random values) on `device`.
std::vector<Tensor> make_params(Device device = Device(kCPU), std::uint64_t seed = 7) {
  manual_seed(seed);
  std::vector<Tensor> params;
  for (const Shape& s : std::vector<Shape>{{6, 5}, {6}, {3, 6}, {3}}) {
    params.push_back(testing::random_tensor(s, kFloat32).to(device).requires_grad_(true));
  }
  return params;
}

/// The perceptron's loss on (x, y), computed in `compute` (float32, or float16 activations over float32
/// parameters: each parameter is cast on use, so its gradient comes back float32, as under autocast).
Tensor loss_of(const std::vector<Tensor>& p, const Tensor& x, const Tensor& y, DType compute = kFloat32) {
  auto c = [&](const Tensor& t) { return t.dtype() == compute ? t : t.to(compute); };
  // Products as broadcast multiplications and sums (float16 matmuls are another branch's work).
  auto linear = [](const Tensor& in, const Tensor& w, const Tensor& b) { return (in.unsqueeze(1) * w).sum(-1) + b; };
  Tensor h = relu(linear(c(x), c(p[0]), c(p[1])));
  Tensor out = linear(h, c(p[2]), c(p[3]));
  return (out.to(kFloat32) - y).pow(2).mean();
}

struct Batch {
  Tensor x, y;
};

std::vector<Batch> make_batches(int count, Device device = Device(kCPU)) {
  manual_seed(11);
  std::vector<Batch> batches;
  for (int i = 0; i < count; ++i) {
    batches.push_back(
        {testing::random_tensor({8, 5}, kFloat32).to(device), testing::random_tensor({8, 3}, kFloat32).to(device)});
  }
  return batches;
}

/// Every value of a state dictionary (optimizer or scaler), bitwise, as float64 vectors.
std::map<std::string, std::vector<double>> snapshot(const std::map<std::string, Tensor>& state) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [key, t] : state) out[key] = t.detach().cpu().to(kFloat64).to_vector<double>();
  return out;
}

std::vector<std::vector<float>> values_of(const std::vector<Tensor>& params) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : params) out.push_back(p.detach().cpu().to_vector<float>());
  return out;
}

/// Expects the same values element for element (infinities included; NaN matches NaN).
void expect_identical(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  const std::vector<double> a = actual.detach().cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> e = expected.detach().cpu().to(kFloat64).to_vector<double>();
  int failures = 0;
  for (std::size_t i = 0; i < a.size() && failures < 10; ++i) {
    if (a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i]))) continue;
    ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i];
    ++failures;
  }
}

/// Writes `value` into element 0 of parameter `which`'s gradient.
void poison(const std::vector<Tensor>& params, std::size_t which, double value) {
  NoGradGuard no_grad;
  params[which].grad().view({-1}).narrow(0, 0, 1).fill_(value);
}

/// One optimizer step with the scaler; `bad` (inf or NaN, or 0 for none) is written into a gradient first.
void scaled_step(amp::GradScaler& scaler, optim::Optimizer& opt, const std::vector<Tensor>& params, const Batch& b,
                 bool unscale_first, double bad = 0.0) {
  opt.zero_grad();
  scaler.scale(loss_of(params, b.x, b.y)).backward();
  if (bad != 0.0 || std::isnan(bad)) poison(params, 2, bad);
  if (unscale_first) scaler.unscale_(opt);
  scaler.step(opt);
  scaler.update();
}

// ---- the algorithm -------------------------------------------------------------------------------------------

class GradScalerOverflow : public ::testing::TestWithParam<std::tuple<int, bool, double>> {};

TEST_P(GradScalerOverflow, SkipsTheStepAndBacksOffTheScale) {
  const auto [kind, unscale_first, bad] = GetParam();
  std::vector<Tensor> params = make_params();
  std::unique_ptr<optim::Optimizer> opt;
  if (kind == 0) opt = std::make_unique<optim::SGD>(params, optim::SGDOptions(0.1).momentum(0.9));
  if (kind == 1) opt = std::make_unique<optim::Adam>(params, optim::AdamOptions(1e-2).amsgrad(true));
  if (kind == 2) opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions(1e-2));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(1024.0));
  const std::vector<Batch> batches = make_batches(3);
  scaled_step(scaler, *opt, params, batches[0], unscale_first);
  scaled_step(scaler, *opt, params, batches[1], unscale_first);
  ASSERT_EQ(scaler.get_scale(), 1024.0);
  const auto before_params = values_of(params);
  const auto before_state = snapshot(opt->state_dict());
  ASSERT_EQ(before_state.at("0.step"), std::vector<double>{2.0});

  scaled_step(scaler, *opt, params, batches[2], unscale_first, bad);
  EXPECT_EQ(values_of(params), before_params) << "the parameters changed in a skipped step";
  const auto after_state = snapshot(opt->state_dict());
  ASSERT_EQ(after_state.size(), before_state.size());
  for (const auto& [key, v] : before_state) {
    EXPECT_EQ(after_state.at(key), v) << "optimizer state '" << key << "' changed in a skipped step";
  }
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_EQ(snapshot(scaler.state_dict()).at("_growth_tracker"), std::vector<double>{0.0});

  // The next clean step is taken, counting from the old step count.
  scaled_step(scaler, *opt, params, batches[0], unscale_first);
  EXPECT_NE(values_of(params), before_params);
  EXPECT_EQ(snapshot(opt->state_dict()).at("0.step"), std::vector<double>{3.0});
  EXPECT_EQ(scaler.get_scale(), 512.0);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, GradScalerOverflow,
                         ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Bool(),
                                            ::testing::Values(kInf, -kInf, kNaN)));

TEST(GradScaler, CleanStepsGrowTheScaleAfterGrowthInterval) {
  std::vector<Tensor> params = make_params();
  optim::SGD opt(params, optim::SGDOptions(0.01));
  amp::GradScaler scaler(
      amp::GradScalerOptions().init_scale(8.0).growth_interval(3).growth_factor(4.0).backoff_factor(0.25));
  EXPECT_EQ(scaler.get_scale(), 8.0) << "init_scale before the first scale()";
  const std::vector<Batch> batches = make_batches(1);
  const std::vector<double> expected = {8, 8, 32, 32, 32, 128, 32, 32, 32, 128};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    scaled_step(scaler, opt, params, batches[0], i % 2 == 0, i == 6 ? kInf : 0.0);
    EXPECT_EQ(scaler.get_scale(), expected[i]) << "after step " << i;
  }
  // The default options are PyTorch's.
  amp::GradScaler defaults;
  EXPECT_EQ(defaults.get_scale(), 65536.0);
  EXPECT_EQ(defaults.get_growth_factor(), 2.0);
  EXPECT_EQ(defaults.get_backoff_factor(), 0.5);
  EXPECT_EQ(defaults.get_growth_interval(), 2000);
  EXPECT_TRUE(defaults.is_enabled());
}

TEST(GradScaler, GrowthStopsWhereTheScaleWouldOverflowFloat32) {
  std::vector<Tensor> params = make_params();
  optim::SGD opt(params, optim::SGDOptions(0.0));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(3e38).growth_interval(1));
  const Batch b = make_batches(1)[0];
  scaled_step(scaler, opt, params, b, false);
  EXPECT_EQ(scaler.get_scale(), static_cast<double>(3e38f)) << "x2 overflows float32: the scale stays";
  EXPECT_EQ(snapshot(scaler.state_dict()).at("_growth_tracker"), std::vector<double>{0.0});
}

TEST(GradScaler, UnscaleThenClipGradNorm) {
  const Batch b = make_batches(1)[0];
  std::vector<Tensor> plain = make_params(), scaled = make_params();
  optim::SGD plain_opt(plain, optim::SGDOptions(0.1)), scaled_opt(scaled, optim::SGDOptions(0.1));
  loss_of(plain, b.x, b.y).backward();
  const Tensor plain_norm = nn::utils::clip_grad_norm_(plain, 0.05);
  plain_opt.step();

  amp::GradScaler scaler;
  scaler.scale(loss_of(scaled, b.x, b.y)).backward();
  scaler.unscale_(scaled_opt);
  const Tensor scaled_norm = nn::utils::clip_grad_norm_(scaled, 0.05);
  scaler.step(scaled_opt);
  scaler.update();
  // Scaling by a power of two is exact: the unscaled gradients, the norm and the step are the plain ones.
  EXPECT_EQ(scaled_norm.item<float>(), plain_norm.item<float>());
  ASSERT_GT(plain_norm.item<float>(), 0.05f) << "the case must clip";
  for (std::size_t i = 0; i < plain.size(); ++i) {
    expect_close(scaled[i].grad(), plain[i].grad(), 0, 0, "gradient " + std::to_string(i));
    expect_close(scaled[i], plain[i], 0, 0, "parameter " + std::to_string(i));
  }
  EXPECT_EQ(scaler.get_scale(), 65536.0);
}

/// Adam steps over `steps` batches, without the scaler or with it (unscale_ before every other step).
std::vector<std::vector<float>> train(bool with_scaler, DType compute, int steps, Device device = Device(kCPU)) {
  std::vector<Tensor> params = make_params(device);
  optim::Adam opt(params, optim::AdamOptions(1e-2));
  amp::GradScaler scaler(amp::GradScalerOptions().enabled(with_scaler));
  const std::vector<Batch> batches = make_batches(steps, device);
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    scaler.scale(loss_of(params, batches[i].x, batches[i].y, compute)).backward();
    if (i % 2 == 1) scaler.unscale_(opt);
    scaler.step(opt);
    scaler.update();
  }
  return values_of(params);
}

TEST(GradScaler, TrainingAgreesWithUnscaledTrainingWhenNothingOverflows) {
  // float32: the scale is a power of two, so every gradient is exactly the unscaled one.
  EXPECT_EQ(train(true, kFloat32, 5), train(false, kFloat32, 5));
  // float16 activations: the same up to float16's rounding of the differently scaled intermediate gradients.
  const auto scaled = train(true, kFloat16, 5), plain = train(false, kFloat16, 5);
  for (std::size_t p = 0; p < plain.size(); ++p) {
    for (std::size_t i = 0; i < plain[p].size(); ++i) {
      EXPECT_NEAR(scaled[p][i], plain[p][i], 2e-3 + 1e-3 * std::fabs(plain[p][i]))
          << "parameter " << p << "[" << i << "]";
    }
  }
}

TEST(GradScaler, DisabledPassesEverythingThrough) {
  amp::GradScaler scaler(amp::GradScalerOptions().enabled(false));
  EXPECT_FALSE(scaler.is_enabled());
  const Tensor loss = full({}, 3.0, TensorOptions(kFloat32));
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().empty());
  scaler.load_state_dict({});  // ignored, as PyTorch's
  std::vector<Tensor> params = make_params();
  optim::SGD opt(params, optim::SGDOptions(0.1));
  loss_of(params, make_batches(1)[0].x, make_batches(1)[0].y).backward();
  const auto before = values_of(params);
  scaler.unscale_(opt);
  scaler.step(opt);  // optimizer.step()
  scaler.update();
  EXPECT_NE(values_of(params), before);
}

TEST(GradScaler, StateDictRoundTripContinuesTheGrowthCount) {
  std::vector<Tensor> params = make_params();
  optim::SGD opt(params, optim::SGDOptions(0.0));
  const Batch b = make_batches(1)[0];
  amp::GradScaler a(amp::GradScalerOptions().init_scale(16.0).growth_interval(4).growth_factor(3.0));
  for (int i = 0; i < 3; ++i) scaled_step(a, opt, params, b, false);
  const std::map<std::string, Tensor> state = a.state_dict();
  const auto values = snapshot(state);
  EXPECT_EQ(values.at("scale"), std::vector<double>{16.0});
  EXPECT_EQ(values.at("growth_factor"), std::vector<double>{3.0});
  EXPECT_EQ(values.at("backoff_factor"), std::vector<double>{0.5});
  EXPECT_EQ(values.at("growth_interval"), std::vector<double>{4.0});
  EXPECT_EQ(values.at("_growth_tracker"), std::vector<double>{3.0});
  EXPECT_EQ(state.at("growth_interval").dtype(), kInt64);

  amp::GradScaler fresh, used(amp::GradScalerOptions().init_scale(2.0));
  scaled_step(used, opt, params, b, false);  // a scaler whose device tensors exist already
  for (amp::GradScaler* s : {&fresh, &used}) {
    s->load_state_dict(state);
    EXPECT_EQ(s->get_scale(), 16.0);
    EXPECT_EQ(s->get_growth_factor(), 3.0);
    EXPECT_EQ(s->get_growth_interval(), 4);
    scaled_step(*s, opt, params, b, false);
    EXPECT_EQ(s->get_scale(), 48.0) << "the fourth clean step grows the scale";
  }
}

TEST(GradScaler, SeveralOptimizersEachSkipOnTheirOwnInfsAndShareTheUpdate) {
  std::vector<Tensor> params = make_params();
  optim::SGD first({params[0], params[1]}, optim::SGDOptions(0.1));
  optim::SGD second({params[2], params[3]}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  const Batch b = make_batches(1)[0];
  scaler.scale(loss_of(params, b.x, b.y)).backward();
  poison(params, 2, kInf);  // a gradient of the second optimizer
  const auto before = values_of(params);
  scaler.step(first);
  scaler.unscale_(second);
  scaler.step(second);
  scaler.update();
  const auto after = values_of(params);
  EXPECT_NE(after[0], before[0]) << "the first optimizer's gradients are finite: it steps";
  EXPECT_EQ(after[2], before[2]);
  EXPECT_EQ(after[3], before[3]);
  EXPECT_EQ(scaler.get_scale(), 32768.0) << "one inf anywhere backs the scale off";
}

TEST(GradScaler, NonContiguousAndMissingGradients) {
  std::vector<Tensor> params = make_params();
  params.push_back(testing::random_tensor({4}, kFloat32).requires_grad_(true));  // never gets a gradient
  optim::SGD opt(params, optim::SGDOptions(0.1));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(4.0));
  const Batch b = make_batches(1)[0];
  scaler.scale(loss_of(params, b.x, b.y)).backward();
  const Tensor scaled0 = params[0].grad().clone();
  {
    NoGradGuard no_grad;
    params[0].mutable_grad() = params[0].grad().t().contiguous().t();  // the same values, column-major
  }
  ASSERT_FALSE(params[0].grad().is_contiguous());
  scaler.unscale_(opt);
  expect_close(params[0].grad(), scaled0 * 0.25, 0, 0, "the transposed gradient, unscaled in place");
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 4.0);
}

// ---- against PyTorch (tests/golden/gen_grad_scaler_golden.py) ---------------------------------------------------

Tensor golden_tensor(const nlohmann::json& values, const Shape& shape) {
  std::vector<float> v;
  for (const auto& row : values) {
    if (row.is_array()) {
      for (const auto& x : row) v.push_back(static_cast<float>(testing::golden_number(x)));
    } else {
      v.push_back(static_cast<float>(testing::golden_number(row)));
    }
  }
  return from_vector(v, shape);
}

TEST(GradScalerGolden, StepsMatchPyTorch) {
  const nlohmann::json golden = testing::read_golden("grad_scaler_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(golden, "grad_scaler_golden.json", "gen_grad_scaler_golden.py");
  for (const auto& c : golden["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    Tensor w = golden_tensor(c["w"], {3, 5}).requires_grad_(true), b = golden_tensor(c["b"], {3}).requires_grad_(true);
    std::unique_ptr<optim::Optimizer> opt;
    const std::string kind = c["optimizer"];
    if (kind == "SGD")
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{w, b}, optim::SGDOptions(0.05).momentum(0.9));
    if (kind == "Adam") opt = std::make_unique<optim::Adam>(std::vector<Tensor>{w, b}, optim::AdamOptions(0.01));
    if (kind == "AdamW") {
      opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{w, b},
                                           optim::AdamWOptions(0.01).weight_decay(0.1).amsgrad(true));
    }
    ASSERT_NE(opt, nullptr) << kind;
    const auto& o = c["options"];
    amp::GradScaler scaler(amp::GradScalerOptions()
                               .init_scale(o["init_scale"])
                               .growth_factor(o["growth_factor"])
                               .backoff_factor(o["backoff_factor"])
                               .growth_interval(o["growth_interval"]));
    const std::vector<int> unscale_steps = c["unscale_steps"];
    for (std::size_t step = 0; step < c["batches"].size(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto& batch = c["batches"][step];
      opt->zero_grad();
      const Tensor x = golden_tensor(batch["x"], {8, 5}), y = golden_tensor(batch["y"], {8, 3});
      scaler.scale((matmul(x, w.t()) + b - y).pow(2).mean()).backward();
      const std::string key = std::to_string(step);
      if (c["poison"].contains(key)) {
        poison({w, b}, c["poison"][key][0].get<std::size_t>(), testing::golden_number(c["poison"][key][1]));
      }
      if (std::find(unscale_steps.begin(), unscale_steps.end(), static_cast<int>(step)) != unscale_steps.end()) {
        scaler.unscale_(*opt);
        nn::utils::clip_grad_norm_({w, b}, 1.0);
      }
      scaler.step(*opt);
      scaler.update();
      EXPECT_EQ(scaler.get_scale(), c["scales"][step].get<double>());
      expect_close(w, golden_tensor(c["w_after"][step], {3, 5}), 1e-5, 1e-6, "w");
      expect_close(b, golden_tensor(c["b_after"][step], {3}), 1e-5, 1e-6, "b");
    }
  }
}

// ---- the kernels ---------------------------------------------------------------------------------------------

/// Gradients of every dtype the check takes, with `bad` (or nothing, when 0) at element `at` of the third.
std::vector<Tensor> kernel_grads(double bad, std::int64_t at) {
  std::vector<Tensor> grads = {
      testing::random_tensor({37}, kFloat32, false, -8, 8), testing::random_tensor({5, 9}, kFloat64, false, -8, 8),
      testing::random_tensor({1000}, kFloat32, false, -8, 8).to(kBFloat16),
      testing::random_tensor({19}, kFloat32, false, -8, 8).to(kFloat16), empty({0}, TensorOptions(kFloat32))};
  if (bad != 0.0 || std::isnan(bad)) grads[2].narrow(0, at, 1).fill_(bad);
  return grads;
}

TEST(GradScalerKernels, CheckAndUnscaleMatchAPlainLoop) {
  for (const double bad : {0.0, kInf, -kInf, kNaN}) {
    for (const bool unscale : {false, true}) {
      SCOPED_TRACE(std::to_string(bad) + (unscale ? " unscale" : " check"));
      const std::vector<Tensor> grads = kernel_grads(bad, 999);
      // PyTorch's arithmetic: double gradients times the float factor in double, the others in float32.
      const float inv = static_cast<float>(1.0 / 3.0);
      std::vector<Tensor> expected;
      for (const Tensor& g : grads) {
        const DType math = g.dtype() == kFloat64 ? kFloat64 : kFloat32;
        expected.push_back(unscale ? (g.to(math) * full({}, inv, TensorOptions(math))).to(g.dtype()) : g.clone());
      }
      Tensor found = zeros({}, TensorOptions(kFloat32));
      const Tensor scale = full({}, 3.0, TensorOptions(kFloat32));
      cpu::non_finite_check_and_unscale(grads, found, scale, unscale);
      EXPECT_EQ(found.item<float>(), bad == 0.0 ? 0.0f : 1.0f);
      for (std::size_t i = 0; i < grads.size(); ++i) expect_identical(grads[i], expected[i], std::to_string(i));
      // The flag is only ever set: a later clean check leaves an earlier inf recorded.
      cpu::non_finite_check_and_unscale({testing::random_tensor({3}, kFloat32)}, found, scale, false);
      EXPECT_EQ(found.item<float>(), bad == 0.0 ? 0.0f : 1.0f);
    }
  }
}

TEST(GradScalerKernels, UpdateScaleFollowsPyTorch) {
  float scale = 4.0f;
  std::int32_t tracker = 1;
  kernels::update_scale(scale, tracker, 0.0f, 2.0, 0.5, 3);
  EXPECT_EQ(scale, 4.0f);
  EXPECT_EQ(tracker, 2);
  kernels::update_scale(scale, tracker, 0.0f, 2.0, 0.5, 3);
  EXPECT_EQ(scale, 8.0f);
  EXPECT_EQ(tracker, 0);
  kernels::update_scale(scale, tracker, 2.0f, 2.0, 0.5, 3);  // found_inf summed over optimizers: any nonzero
  EXPECT_EQ(scale, 4.0f);
  EXPECT_EQ(tracker, 0);
  EXPECT_EQ(kernels::inv_scale_of(3.0f), static_cast<float>(1.0 / 3.0));
}

TEST(GradScalerKernels, CudaMatchesCpu) {
  MINIDL_REQUIRE_GPU();
#if MINIDL_CUDA_ENABLED  // the GPU backend's kernels exist in CUDA builds only
  const Device cuda0(kCUDA, 0);
  for (const double bad : {0.0, kInf, kNaN}) {
    for (const bool unscale : {false, true}) {
      for (const std::int64_t at : {0, 997, 999}) {  // in a 16-byte pack, and in the tail of a misaligned view
        SCOPED_TRACE(std::to_string(bad) + " at " + std::to_string(at) + (unscale ? " unscale" : " check"));
        std::vector<Tensor> grads = kernel_grads(bad, at), on_gpu;
        for (const Tensor& g : grads) on_gpu.push_back(g.to(cuda0));
        const Tensor base = testing::random_tensor({101}, kFloat32);  // a view 4 bytes into its storage
        grads.push_back(testing::storage_view(base, 1, {100}));
        on_gpu.push_back(testing::storage_view(base.to(cuda0), 1, {100}));
        Tensor found = zeros({}, TensorOptions(kFloat32)), gpu_found = found.to(cuda0);
        const Tensor scale = full({}, 1024.0, TensorOptions(kFloat32));
        cpu::non_finite_check_and_unscale(grads, found, scale, unscale);
        minidl::gpu::non_finite_check_and_unscale(on_gpu, gpu_found, scale.to(cuda0), unscale);
        EXPECT_EQ(gpu_found.item<float>(), found.item<float>());
        for (std::size_t i = 0; i < grads.size(); ++i) expect_identical(on_gpu[i], grads[i], std::to_string(i));
      }
    }
  }
  for (const float found : {0.0f, 1.0f}) {
    Tensor scale = full({}, 256.0, TensorOptions(kFloat32)), tracker = full({}, 4.0, TensorOptions(kInt32));
    Tensor gs = scale.to(cuda0), gt = tracker.to(cuda0);
    const Tensor flag = full({}, found, TensorOptions(kFloat32));
    cpu::update_scale(scale, tracker, flag, 2.0, 0.5, 5);
    minidl::gpu::update_scale(gs, gt, flag.to(cuda0), 2.0, 0.5, 5);
    EXPECT_EQ(gs.item<float>(), scale.item<float>());
    EXPECT_EQ(gt.item<std::int32_t>(), tracker.item<std::int32_t>());
  }
#endif
}

// ---- GPU: a whole scaled step in a CUDA graph ----------------------------------------------------------------

struct GraphRun {
  std::vector<std::vector<float>> params;
  std::map<std::string, std::vector<double>> optimizer;
  double scale = 0;
};

/// AdamW steps with the scaler on the GPU, eagerly or by replaying one captured step; batch 4's input holds an
/// inf, so that step overflows and must be skipped.
GraphRun train_on_gpu(bool graph, bool unscale_first) {
  const Device gpu(kCUDA, 0);
  std::vector<Tensor> params = make_params(gpu);
  optim::AdamW opt(params, optim::AdamWOptions(1e-2));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(256.0).growth_interval(3));
  std::vector<Batch> batches = make_batches(9, gpu);
  batches[4].x.narrow(0, 2, 1).fill_(kInf);
  auto step = [&](const Batch& b) {
    scaler.scale(loss_of(params, b.x, b.y)).backward();
    if (unscale_first) {
      scaler.unscale_(opt);
      nn::utils::clip_grad_norm_(params, 10.0);
    }
    scaler.step(opt);
    scaler.update();
  };
  Batch staged{batches[0].x.clone(), batches[0].y.clone()};
  cuda::CUDAGraph g;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    if (!graph || i < 2) {
      opt.zero_grad();
      step(batches[i]);
      continue;
    }
    staged.x.copy_(batches[i].x);
    staged.y.copy_(batches[i].y);
    if (!g.captured()) {
      opt.zero_grad();
      g.capture_begin();
      step(staged);
      g.capture_end();
    }
    g.replay();
  }
  cuda::synchronize();
  return {values_of(params), snapshot(opt.state_dict()), scaler.get_scale()};
}

TEST(GradScalerGpu, CapturedStepMatchesEagerStepsOverflowIncluded) {
  MINIDL_REQUIRE_GPU();
  for (const bool unscale_first : {false, true}) {
    SCOPED_TRACE(unscale_first ? "unscale_ and clipping" : "step unscales");
    const GraphRun eager = train_on_gpu(false, unscale_first), captured = train_on_gpu(true, unscale_first);
    EXPECT_EQ(captured.params, eager.params);
    EXPECT_EQ(captured.optimizer, eager.optimizer);
    EXPECT_EQ(captured.optimizer.at("0.step"), std::vector<double>{8.0}) << "9 steps, one skipped";
    // 256, grown after steps 0-2 (512), backed off at step 4 (256), grown after 5-7 (512).
    EXPECT_EQ(eager.scale, 512.0);
    EXPECT_EQ(captured.scale, eager.scale);
  }
}

TEST(GradScalerGpu, MatchesTheCpuStep) {
  MINIDL_REQUIRE_GPU();
  const Device gpu(kCUDA, 0);
  cuda::set_allow_tf32(false, false);
  std::vector<Tensor> cpu_params = make_params(), gpu_params = make_params(gpu);
  optim::Adam cpu_opt(cpu_params, optim::AdamOptions(1e-2)), gpu_opt(gpu_params, optim::AdamOptions(1e-2));
  amp::GradScaler cpu_scaler, gpu_scaler;
  const std::vector<Batch> cpu_batches = make_batches(4), gpu_batches = make_batches(4, gpu);
  for (int i = 0; i < 4; ++i) {
    scaled_step(cpu_scaler, cpu_opt, cpu_params, cpu_batches[i], i % 2 == 0, i == 2 ? kInf : 0.0);
    scaled_step(gpu_scaler, gpu_opt, gpu_params, gpu_batches[i], i % 2 == 0, i == 2 ? kInf : 0.0);
  }
  for (std::size_t p = 0; p < cpu_params.size(); ++p) {
    expect_close(gpu_params[p], cpu_params[p], 1e-5, 1e-6, "parameter " + std::to_string(p));
  }
  EXPECT_EQ(gpu_scaler.get_scale(), cpu_scaler.get_scale());
  EXPECT_EQ(snapshot(gpu_opt.state_dict()).at("0.step"), std::vector<double>{3.0});
}

// ---- misuse --------------------------------------------------------------------------------------------------

TEST(GradScaler, BadOptionsAreValueErrors) {
  EXPECT_ERROR(ValueError, amp::GradScaler(amp::GradScalerOptions().init_scale(0.0)), "GradScaler", "init_scale");
  EXPECT_ERROR(ValueError, amp::GradScaler(amp::GradScalerOptions().init_scale(kInf)), "init_scale");
  EXPECT_ERROR(ValueError, amp::GradScaler(amp::GradScalerOptions().growth_factor(1.0)), "growth_factor", "> 1.0");
  EXPECT_ERROR(ValueError, amp::GradScaler(amp::GradScalerOptions().backoff_factor(1.0)), "backoff_factor");
  EXPECT_ERROR(ValueError, amp::GradScaler(amp::GradScalerOptions().backoff_factor(0.0)), "backoff_factor");
  EXPECT_ERROR(ValueError, amp::GradScaler(amp::GradScalerOptions().growth_interval(0)), "growth_interval");
  amp::GradScaler scaler;
  EXPECT_ERROR(ValueError, scaler.set_growth_factor(0.5), "growth_factor");
  EXPECT_ERROR(ValueError, scaler.set_backoff_factor(2.0), "backoff_factor");
  EXPECT_ERROR(ValueError, scaler.set_growth_interval(-1), "growth_interval");
  EXPECT_EQ(scaler.get_growth_factor(), 2.0) << "a refused setting changes nothing";
}

TEST(GradScaler, CallsOutOfOrderAreValueErrors) {
  std::vector<Tensor> params = make_params();
  optim::SGD opt(params, optim::SGDOptions(0.1));
  const Batch b = make_batches(1)[0];
  amp::GradScaler scaler;
  // Nothing scaled yet.
  EXPECT_ERROR(ValueError, scaler.unscale_(opt), "unscale_", "scale(loss)");
  EXPECT_ERROR(ValueError, scaler.step(opt), "step", "scale(loss)");
  EXPECT_ERROR(ValueError, scaler.update(), "update", "scale(loss)");
  EXPECT_ERROR(ValueError, scaler.update(128.0), "update", "scale(loss)");
  // A scaled loss but no backward: no gradient to check.
  Tensor loss = scaler.scale(loss_of(params, b.x, b.y));
  EXPECT_ERROR(ValueError, scaler.step(opt), "step", "no inf checks were recorded");
  EXPECT_ERROR(ValueError, scaler.update(), "update", "no inf checks were recorded");
  loss.backward();
  scaler.unscale_(opt);
  EXPECT_ERROR(ValueError, scaler.unscale_(opt), "unscale_() has already been called");
  scaler.step(opt);
  EXPECT_ERROR(ValueError, scaler.step(opt), "step() has already been called");
  EXPECT_ERROR(ValueError, scaler.unscale_(opt), "after step()");
  scaler.update();
  scaler.unscale_(opt);  // a new iteration
  scaler.update(128.0);
  EXPECT_EQ(scaler.get_scale(), 128.0);
  scaler.update(full({1}, 64.0, TensorOptions(kFloat32)));
  EXPECT_EQ(scaler.get_scale(), 64.0);
  EXPECT_ERROR(ValueError, scaler.update(-1.0), "update", "finite and > 0");
  EXPECT_ERROR(ValueError, scaler.update(full({2}, 64.0, TensorOptions(kFloat32))), "new_scale", "one-element");
  EXPECT_ERROR(ValueError, scaler.update(full({}, 64.0, TensorOptions(kFloat64))), "new_scale", "float32");
  EXPECT_ERROR(ValueError, scaler.update(full({}, 64.0, TensorOptions(kFloat32)).requires_grad_(true)), "new_scale",
               "require grad");
  EXPECT_ERROR(ValueError, scaler.scale(Tensor()), "scale", "undefined");
  EXPECT_ERROR(TypeError, scaler.scale(full({}, 1.0, TensorOptions(kInt64))), "scale", "floating", "int64");
}

TEST(GradScaler, Float16GradientsAndBadStateAreRefused) {
  Tensor p = testing::random_tensor({4}, kFloat32).requires_grad_(true);
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  scaler.scale(p.sum()).backward();
  {
    NoGradGuard no_grad;
    p.mutable_grad() = p.grad().to(kFloat16);
  }
  EXPECT_ERROR(ValueError, scaler.unscale_(opt), "unscale_", "parameter 0", "float16");

  EXPECT_ERROR(ValueError, scaler.load_state_dict({}), "load_state_dict", "empty");
  std::map<std::string, Tensor> state = scaler.state_dict();
  state.erase("backoff_factor");
  EXPECT_ERROR(ValueError, scaler.load_state_dict(state), "load_state_dict", "'backoff_factor'");
  state = scaler.state_dict();
  state["growth_factor"] = full({}, 0.5, TensorOptions(kFloat64));
  EXPECT_ERROR(ValueError, scaler.load_state_dict(state), "growth_factor");
  state = scaler.state_dict();
  state["_growth_tracker"] = full({}, 1.5, TensorOptions(kFloat64));
  EXPECT_ERROR(ValueError, scaler.load_state_dict(state), "_growth_tracker");
  EXPECT_EQ(scaler.get_growth_factor(), 2.0) << "a refused state changes nothing";

  EXPECT_ERROR(TypeError, opt.scaled_step(Tensor(), full({}, 0.0, TensorOptions(kFloat64))), "scaled_step", "found_inf",
               "float32");
  EXPECT_ERROR(ValueError, opt.scaled_step(Tensor(), Tensor()), "scaled_step", "found_inf", "undefined");
}

}  // namespace
}  // namespace minidl
