// Every layer and loss on CUDA against the CPU backend, float32 with TF32 off: forward values and the gradients
// of the input and of every parameter (the same random upstream gradient on both devices), at odd sizes
// (7x5 images, batch 1 and 3, stride 2, padding 1, groups 2). Also: batch-norm running statistics, dropout's
// mask rule on the GPU (its random stream differs from the CPU's, so masks are checked by their definition),
// and a whole model moved with to(Device("cuda")) training a few steps like its CPU twin.
//
// Tolerance: rtol 1e-4, atol 1e-5 per element. Convolution and linear outputs and gradients are sums of up to
// hundreds of products that cuDNN/cuBLAS add in a different order (blocked GEMMs, Winograd, split reductions)
// than the CPU backend; their rounding error grows with the sum of the products' magnitudes, not with the
// possibly cancelling result. For those, each element may also differ by kSumRtol times the same computation
// on |inputs| and |upstream gradient| (as tests/test_gpu_kernels.cpp does): about 30 float roundoffs of that
// sum, while a wrong tap still shows as an error of the order of the result.
//
// The tests use only the public API, so they compile in every build; without a usable device they skip.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;
using minidl::testing::random_tensor;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using ModuleFactory = std::function<std::shared_ptr<nn::Module>()>;

constexpr double kRtol = 1e-4, kAtol = 1e-5, kSumRtol = 4e-6;

const Device kGpu("cuda");

/// Float32 on both backends, without TF32, so the GPU is compared with full single precision.
void setup_gpu() { cuda::set_allow_tf32(false, false); }

/// |got - want| <= atol + rtol * |want| + sum_rtol * magnitude for every element (magnitude may be undefined).
void expect_agree(const Tensor& got, const Tensor& want, const Tensor& magnitude, double sum_rtol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": GPU result undefined";
  ASSERT_TRUE(want.defined()) << what << ": CPU result undefined";
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(got.is_cuda()) << what << ": GPU result is on " << got.device();
  const std::vector<double> g = got.detach().cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> w = want.detach().to(kFloat64).to_vector<double>();
  const std::vector<double> m = magnitude.defined() ? magnitude.detach().to(kFloat64).to_vector<double>()
                                                    : std::vector<double>(w.size(), 0.0);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double tol = kAtol + kRtol * std::fabs(w[i]) + sum_rtol * m[i];
    if (!(std::fabs(g[i] - w[i]) <= tol)) {
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: GPU " << g[i] << ", CPU " << w[i] << " (tolerance " << tol << ")";
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << w.size() << " elements differ";
}

Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}

/// A leaf copy of `t` on `device` (float32).
Tensor leaf_on(const Tensor& t, Device device) { return leaf(t.detach().to(device).clone().detach()); }

/// Float64 leaf |t| on the CPU, for the magnitude computation.
Tensor abs_leaf(const Tensor& t) { return leaf(abs(t.detach().to(kFloat64))); }

/// Evaluates fn on CPU and GPU copies of `inputs` (float32; those that require grad become leaves on each side),
/// back-propagates the same random upstream gradient, and compares the output and every input gradient. With
/// sum_rtol > 0 (multilinear fn only: conv, linear), tolerances grow with fn evaluated on |inputs| and |grad|.
void compare_fn(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs, double sum_rtol = 0.0) {
  std::vector<Tensor> cpu_in, gpu_in, mag_in;
  for (const Tensor& t : inputs) {
    const bool grad = t.requires_grad();
    cpu_in.push_back(grad ? leaf_on(t, Device(kCPU)) : t);
    gpu_in.push_back(grad ? leaf_on(t, kGpu) : t.to(kGpu));
    mag_in.push_back(grad ? abs_leaf(t) : (is_floating_point(t.dtype()) ? abs(t.to(kFloat64)) : t));
  }
  const Tensor y_cpu = fn(cpu_in), y_gpu = fn(gpu_in);
  Tensor y_mag;
  const Tensor g = random_tensor(y_cpu.sizes(), kFloat32);
  if (sum_rtol > 0) {
    y_mag = fn(mag_in);
    y_mag.backward(abs(g.to(kFloat64)));
  }
  expect_agree(y_gpu, y_cpu, y_mag, sum_rtol, what + ": forward");
  y_cpu.backward(g);
  y_gpu.backward(g.to(kGpu));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    expect_agree(gpu_in[i].grad(), cpu_in[i].grad(), sum_rtol > 0 ? mag_in[i].grad() : Tensor(), sum_rtol,
                 detail::str(what, ": gradient of input ", i));
  }
}

/// Copies every parameter and buffer of `src` into `dst` (same architecture).
void copy_state(const nn::Module& src, nn::Module& dst) {
  NoGradGuard no_grad;
  const auto sp = src.named_parameters(), sb = src.named_buffers();
  auto dp = dst.named_parameters(), db = dst.named_buffers();
  ASSERT_EQ(sp.size(), dp.size());
  ASSERT_EQ(sb.size(), db.size());
  for (std::size_t i = 0; i < sp.size(); ++i) dp[i].second.copy_(sp[i].second);
  for (std::size_t i = 0; i < sb.size(); ++i) db[i].second.copy_(sb[i].second);
}

/// Compares every parameter (and its gradient, when `grads`) and every buffer of two twins.
void compare_state(const nn::Module& gpu, const nn::Module& cpu, const std::string& what, bool grads = true) {
  const auto gp = gpu.named_parameters(), cp = cpu.named_parameters();
  for (std::size_t i = 0; i < cp.size(); ++i) {
    expect_agree(gp[i].second, cp[i].second, Tensor(), 0.0, what + ": parameter " + cp[i].first);
    if (grads) expect_agree(gp[i].second.grad(), cp[i].second.grad(), Tensor(), 0.0, what + ": gradient of " + cp[i].first);
  }
  const auto gb = gpu.named_buffers(), cb = cpu.named_buffers();
  for (std::size_t i = 0; i < cb.size(); ++i) {
    expect_agree(gb[i].second, cb[i].second, Tensor(), 0.0, what + ": buffer " + cb[i].first);
  }
}

/// Builds a module twice, gives both the same state, moves one to the GPU, runs both on `x` (float32 CPU) with
/// the same upstream gradient, and compares the output, the input gradient, every parameter gradient and the
/// buffers afterwards (batch-norm running statistics).
void compare_module(const std::string& what, const ModuleFactory& make, const Tensor& x, double sum_rtol = 0.0,
                    bool training = true) {
  const std::shared_ptr<nn::Module> cpu = make(), gpu = make();
  copy_state(*cpu, *gpu);
  gpu->to(kGpu);
  cpu->train(training);
  gpu->train(training);
  const Tensor x_cpu = leaf_on(x, Device(kCPU)), x_gpu = leaf_on(x, kGpu);
  const Tensor y_cpu = cpu->forward(x_cpu), y_gpu = gpu->forward(x_gpu);
  const Tensor g = random_tensor(y_cpu.sizes(), kFloat32);
  // Magnitudes for multilinear layers: the same layer in float64 on |x|, |parameters| and |g|.
  Tensor y_mag, x_mag;
  std::shared_ptr<nn::Module> mag;
  if (sum_rtol > 0) {
    mag = make();
    copy_state(*cpu, *mag);
    mag->to(kFloat64);
    {
      NoGradGuard no_grad;
      for (Tensor& p : mag->parameters()) p.copy_(abs(p));
    }
    mag->train(training);
    x_mag = abs_leaf(x);
    y_mag = mag->forward(x_mag);
    y_mag.backward(abs(g.to(kFloat64)));
  }
  expect_agree(y_gpu, y_cpu, y_mag, sum_rtol, what + ": forward");
  y_cpu.backward(g);
  y_gpu.backward(g.to(kGpu));
  expect_agree(x_gpu.grad(), x_cpu.grad(), x_mag.defined() ? x_mag.grad() : Tensor(), sum_rtol,
               what + ": input gradient");
  const auto gp = gpu->named_parameters(), cp = cpu->named_parameters();
  for (std::size_t i = 0; i < cp.size(); ++i) {
    EXPECT_TRUE(gp[i].second.is_cuda()) << what << ": " << cp[i].first;
    expect_agree(gp[i].second.grad(), cp[i].second.grad(), mag ? mag->parameters()[i].grad() : Tensor(), sum_rtol,
                 what + ": gradient of " + cp[i].first);
  }
  const auto gb = gpu->named_buffers(), cb = cpu->named_buffers();
  for (std::size_t i = 0; i < cb.size(); ++i) {
    expect_agree(gb[i].second, cb[i].second, Tensor(), 0.0, what + ": buffer " + cb[i].first);
  }
}

/// A random permutation of evenly spaced values: no ties inside pooling windows.
Tensor distinct(const Shape& s) {
  const std::vector<double> u = uniform(s, 0.0, 1.0, kFloat64).to_vector<double>();
  std::vector<std::size_t> order(u.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return u[a] < u[b]; });
  std::vector<float> v(u.size());
  for (std::size_t r = 0; r < order.size(); ++r) v[order[r]] = static_cast<float>(-1.0 + 2.0 * (r + 0.5) / u.size());
  return from_vector(v, s);
}

Tensor rnd(const Shape& s, double lo = -1.0, double hi = 1.0) { return random_tensor(s, kFloat32, false, lo, hi); }

std::string reduction_str(nn::Reduction r) {
  return r == nn::Reduction::None ? "none" : r == nn::Reduction::Sum ? "sum" : "mean";
}

// ---- linear and conv ------------------------------------------------------------------------------------------

TEST(LayersGpu, Linear) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  for (bool bias : {true, false}) {
    const auto make = [bias] { return nn::Linear(nn::LinearOptions(7, 5).bias(bias)).ptr(); };
    const std::string b = bias ? " with bias" : " without bias";
    compare_module("Linear(7, 5) batch 1" + b, make, rnd({1, 7}), kSumRtol);
    compare_module("Linear(7, 5) batch 3" + b, make, rnd({3, 7}), kSumRtol);
    compare_module("Linear(7, 5) 3-D input" + b, make, rnd({2, 3, 7}), kSumRtol);
  }
  compare_module("Linear(300, 129) batch 33", [] { return nn::Linear(300, 129).ptr(); }, rnd({33, 300}), kSumRtol);
  compare_module("LinearReLU(300, 129) batch 33", [] { return nn::LinearReLU(300, 129).ptr(); }, rnd({33, 300}),
                 kSumRtol);
}

TEST(LayersGpu, Conv2d) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  struct Case {
    std::int64_t n, c, k;
    nn::ExpandingArray2 kernel, stride, padding, dilation;
    std::int64_t groups;
    bool bias;
  };
  const Case cases[] = {
      {1, 3, 5, 3, 1, 0, 1, 1, true},
      {3, 3, 5, {3, 2}, 1, 0, 1, 1, true},
      {3, 2, 4, 3, 2, 1, 1, 1, true},
      {1, 4, 6, 3, 1, 1, 1, 2, true},
      {3, 4, 6, 3, 2, 1, 1, 2, false},
      {3, 2, 2, 2, 1, 1, 2, 1, true},
      {3, 4, 2, {3, 2}, {2, 1}, {1, 0}, 2, 2, false},
      {3, 16, 32, 3, 1, 1, 1, 1, true},  // longer reductions
  };
  for (const Case& c : cases) {
    const auto make = [c] {
      return nn::Conv2d(nn::Conv2dOptions(c.c, c.k, c.kernel)
                            .stride(c.stride)
                            .padding(c.padding)
                            .dilation(c.dilation)
                            .groups(c.groups)
                            .bias(c.bias))
          .ptr();
    };
    std::ostringstream what;
    make()->pretty_print(what);
    compare_module(what.str() + detail::str(" batch ", c.n), make, rnd({c.n, c.c, 7, 5}), kSumRtol);
    const auto make_fused = [&make] { return nn::ConvReLU2d(make()->options).ptr(); };
    compare_module("fused ReLU, " + what.str() + detail::str(" batch ", c.n), make_fused, rnd({c.n, c.c, 7, 5}),
                   kSumRtol);
  }
}

// ---- pooling ----------------------------------------------------------------------------------------------------

TEST(LayersGpu, Pooling) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  for (std::int64_t n : {1, 3}) {
    const std::string b = detail::str(" batch ", n);
    compare_module("MaxPool2d(2)" + b, [] { return nn::MaxPool2d(nn::MaxPool2dOptions(2)).ptr(); }, distinct({n, 3, 7, 5}));
    compare_module("MaxPool2d(3, stride 2, padding 1)" + b,
                   [] { return nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)).ptr(); }, distinct({n, 3, 7, 5}));
    compare_module("MaxPool2d(2x3, stride 1x2)" + b,
                   [] { return nn::MaxPool2d(nn::MaxPool2dOptions({2, 3}).stride({1, 2})).ptr(); }, distinct({n, 3, 7, 5}));
    compare_module("AvgPool2d(2)" + b, [] { return nn::AvgPool2d(nn::AvgPool2dOptions(2)).ptr(); }, rnd({n, 3, 7, 5}));
    compare_module("AvgPool2d(3, stride 2, padding 1)" + b,
                   [] { return nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1)).ptr(); }, rnd({n, 3, 7, 5}));
    compare_module("AdaptiveAvgPool2d(1)" + b, [] { return nn::AdaptiveAvgPool2d(1).ptr(); }, rnd({n, 3, 7, 5}));
    compare_module("AdaptiveAvgPool2d(2)" + b, [] { return nn::AdaptiveAvgPool2d(2).ptr(); }, rnd({n, 3, 6, 4}));
  }
}

// ---- batch norm ----------------------------------------------------------------------------------------------

ModuleFactory batch_norm(std::int64_t rank, std::int64_t c, bool affine, bool track = true) {
  return [=]() -> std::shared_ptr<nn::Module> {
    const nn::BatchNormOptions o = nn::BatchNormOptions(c).affine(affine).track_running_stats(track);
    std::shared_ptr<nn::BatchNormImplBase> bn;
    if (rank == 4) {
      bn = nn::BatchNorm2d(o).ptr();
    } else {
      bn = nn::BatchNorm1d(o).ptr();
    }
    if (affine) {  // the twins get the same values through copy_state
      nn::init::uniform_(bn->weight, 0.5, 1.5);
      nn::init::uniform_(bn->bias, -0.5, 0.5);
    }
    if (track) {
      nn::init::uniform_(bn->running_mean, -0.5, 0.5);
      nn::init::uniform_(bn->running_var, 0.5, 1.5);
    }
    return bn;
  };
}

TEST(LayersGpu, BatchNormTrain) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  for (bool affine : {true, false}) {
    const std::string a = affine ? " affine" : " no affine";
    compare_module("BatchNorm1d 2-D" + a, batch_norm(2, 5, affine), rnd({3, 5}, -2.0, 3.0));
    compare_module("BatchNorm1d 3-D" + a, batch_norm(3, 3, affine), rnd({3, 3, 7}, -2.0, 3.0));
    compare_module("BatchNorm2d batch 1" + a, batch_norm(4, 3, affine), rnd({1, 3, 7, 5}, -2.0, 3.0));
    compare_module("BatchNorm2d batch 3" + a, batch_norm(4, 3, affine), rnd({3, 3, 7, 5}, -2.0, 3.0));
    compare_module("BatchNorm2d untracked" + a, batch_norm(4, 3, affine, false), rnd({3, 3, 7, 5}, -2.0, 3.0));
  }
}

TEST(LayersGpu, BatchNormEval) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  for (bool affine : {true, false}) {
    const std::string a = affine ? " affine" : " no affine";
    compare_module("BatchNorm1d eval" + a, batch_norm(2, 5, affine), rnd({3, 5}, -2.0, 3.0), 0.0, false);
    compare_module("BatchNorm2d eval" + a, batch_norm(4, 3, affine), rnd({3, 3, 7, 5}, -2.0, 3.0), 0.0, false);
    compare_module("BatchNorm2d eval untracked" + a, batch_norm(4, 3, affine, false), rnd({3, 3, 7, 5}), 0.0, false);
  }
}

TEST(LayersGpu, BatchNormRunningStatsOverSteps) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  const std::shared_ptr<nn::Module> cpu = batch_norm(4, 4, true)(), gpu = batch_norm(4, 4, true)();
  copy_state(*cpu, *gpu);
  gpu->to(kGpu);
  for (int step = 0; step < 4; ++step) {
    const Tensor x = rnd({3, 4, 7, 5}, -1.0 + step, 2.0 + step);
    cpu->forward(x);
    gpu->forward(x.to(kGpu));
    compare_state(*gpu, *cpu, detail::str("after step ", step), false);
  }
  auto* bn = dynamic_cast<nn::BatchNormImplBase*>(gpu.get());
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->num_batches_tracked.item<std::int64_t>(), 4);
}

// ---- dropout: the GPU mask follows the rule ---------------------------------------------------------------------

TEST(LayersGpu, DropoutMaskRule) {
  MINIDL_REQUIRE_GPU();
  const std::int64_t n = 100000;
  const double p = 0.3;
  const float scale = 1.0f / (1.0f - static_cast<float>(p));
  const Tensor x = leaf(rnd({n}, 0.5, 1.5).to(kGpu));
  manual_seed(31);
  const Tensor y = F::dropout(x, p, true);
  const Tensor g = rnd({n});
  y.backward(g.to(kGpu));
  const std::vector<float> xv = x.detach().cpu().to_vector<float>(), yv = y.detach().cpu().to_vector<float>();
  const std::vector<float> gv = g.to_vector<float>(), dv = x.grad().cpu().to_vector<float>();
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool k = yv[i] != 0.0f;
    kept += k;
    ASSERT_EQ(yv[i], k ? xv[i] * scale : 0.0f) << "element " << i;
    ASSERT_EQ(dv[i], k ? gv[i] * scale : 0.0f) << "gradient element " << i;
  }
  EXPECT_NEAR(static_cast<double>(kept), n * (1.0 - p), 5.0 * std::sqrt(n * p * (1.0 - p)));
  manual_seed(31);
  EXPECT_EQ(F::dropout(x, p, true).cpu().to_vector<float>(), yv) << "same seed, same mask";
  EXPECT_EQ(F::dropout(x, p, false).cpu().to_vector<float>(), xv) << "eval mode is the identity";
  // The fused kernel makes the draws rand() makes from the same seed: element i is kept exactly when its draw
  // is at least p (kernels::DropoutMask), as in the composed rand + mask + multiply.
  manual_seed(31);
  const std::vector<float> u = rand({n}, kGpu).cpu().to_vector<float>();
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(yv[i] != 0.0f, u[i] >= static_cast<float>(p)) << "element " << i;
}

TEST(LayersGpu, Dropout2dMaskRule) {
  MINIDL_REQUIRE_GPU();
  const std::int64_t N = 100, C = 40, HW = 7 * 5;
  const double p = 0.4;
  const float scale = 1.0f / (1.0f - static_cast<float>(p));
  const Tensor x = leaf(rnd({N, C, 7, 5}, 0.5, 1.5).to(kGpu));
  manual_seed(32);
  const Tensor y = F::dropout2d(x, p, true);
  const Tensor g = rnd({N, C, 7, 5});
  y.backward(g.to(kGpu));
  const std::vector<float> xv = x.detach().cpu().to_vector<float>(), yv = y.detach().cpu().to_vector<float>();
  const std::vector<float> gv = g.to_vector<float>(), dv = x.grad().cpu().to_vector<float>();
  std::int64_t kept = 0;
  for (std::int64_t plane = 0; plane < N * C; ++plane) {
    const bool k = yv[plane * HW] != 0.0f;
    kept += k;
    for (std::int64_t i = plane * HW; i < (plane + 1) * HW; ++i) {
      ASSERT_EQ(yv[i], k ? xv[i] * scale : 0.0f) << "plane " << plane << " element " << i;
      ASSERT_EQ(dv[i], k ? gv[i] * scale : 0.0f) << "gradient, plane " << plane << " element " << i;
    }
  }
  const double planes = static_cast<double>(N * C);
  EXPECT_NEAR(static_cast<double>(kept), planes * (1.0 - p), 5.0 * std::sqrt(planes * p * (1.0 - p)));
}

// ---- activations, shape modules, losses ----------------------------------------------------------------------------

TEST(LayersGpu, ActivationAndShapeModules) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  const Tensor x = rnd({3, 4, 7, 5}, -3.0, 3.0);
  compare_module("ReLU", [] { return nn::ReLU().ptr(); }, x);
  compare_module(
      "LeakyReLU(0.2)", [] { return nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)).ptr(); }, x);
  compare_module("GELU", [] { return nn::GELU().ptr(); }, x);
  compare_module("Sigmoid", [] { return nn::Sigmoid().ptr(); }, x);
  compare_module("Tanh", [] { return nn::Tanh().ptr(); }, x);
  compare_module("Flatten", [] { return nn::Flatten().ptr(); }, x);
  compare_module("Softmax(1)", [] { return nn::Softmax(1).ptr(); }, rnd({3, 7}, -3.0, 3.0));
  compare_module("Softmax(-1) 4-D", [] { return nn::Softmax(-1).ptr(); }, x);
  compare_module("LogSoftmax(1)", [] { return nn::LogSoftmax(1).ptr(); }, rnd({3, 7}, -3.0, 3.0));
  compare_module("LogSoftmax(1) 4-D", [] { return nn::LogSoftmax(1).ptr(); }, x);
}

TEST(LayersGpu, Losses) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  const Tensor target = from_vector<std::int64_t>({6, 0, 3}, {3});
  const Tensor target1 = from_vector<std::int64_t>({4}, {1});
  for (nn::Reduction r : {nn::Reduction::None, nn::Reduction::Mean, nn::Reduction::Sum}) {
    for (double eps : {0.0, 0.1}) {
      const std::string w = detail::str("cross_entropy(reduction=", reduction_str(r), ", label_smoothing=", eps, ")");
      compare_fn(w + " batch 3", [=](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1], r, eps); },
                 {leaf(rnd({3, 7}, -4.0, 4.0)), target});
      compare_fn(w + " batch 1", [=](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1], r, eps); },
                 {leaf(rnd({1, 7}, -4.0, 4.0)), target1});
      // The example's batch (all its samples at once in the reduced loss's one block), more classes than a
      // warp has lanes, and more samples than that block takes (4096: per-sample losses, then a block's sum).
      for (const std::int64_t n : {64, 5000}) {
        const Tensor targets = (rand({n}) * 40.0).to(kInt64);
        compare_fn(detail::str(w, " batch ", n, ", 40 classes"),
                   [=](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1], r, eps); },
                   {leaf(rnd({n, 40}, -4.0, 4.0)), targets});
      }
    }
    compare_fn("nll_loss(log_softmax, " + reduction_str(r) + ")",
               [=](const std::vector<Tensor>& in) { return F::nll_loss(F::log_softmax(in[0], 1), in[1], r); },
               {leaf(rnd({3, 7}, -4.0, 4.0)), target});
    compare_fn("mse_loss(" + reduction_str(r) + ")",
               [=](const std::vector<Tensor>& in) { return F::mse_loss(in[0], in[1], r); },
               {leaf(rnd({3, 7, 5})), leaf(rnd({3, 7, 5}))});
  }
}

// ---- a whole model on the GPU -------------------------------------------------------------------------------------

/// conv -> batch norm -> relu -> grouped strided conv -> relu -> max pool -> flatten -> linear.
struct SmallNet : nn::Module {
  SmallNet()
      : nn::Module("SmallNet"),
        conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(2, 6, 3).padding(1)))),
        bn1(register_module("bn1", nn::BatchNorm2d(nn::BatchNormOptions(6)))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(6, 8, 3).stride(2).padding(1).groups(2)))),
        fc(register_module("fc", nn::Linear(8 * 2 * 1, 5))) {}
  Tensor forward(const Tensor& x) override {
    const Tensor h = F::relu(bn1(conv1(x)));                  // (N, 6, 7, 5)
    return fc(F::max_pool2d(F::relu(conv2(h)), 2).flatten(1));  // conv2: (N, 8, 4, 3), pool: (N, 8, 2, 1)
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::Linear fc;
};

TEST(LayersGpu, ModuleMovedToCudaTrainsLikeCpu) {
  MINIDL_REQUIRE_GPU();
  setup_gpu();
  auto cpu = std::make_shared<SmallNet>(), gpu = std::make_shared<SmallNet>();
  copy_state(*cpu, *gpu);
  const std::vector<Tensor> handles = gpu->parameters();  // taken before the move: must follow it
  const Tensor running_mean = gpu->bn1->running_mean;
  gpu->to(Device("cuda"));
  for (const auto& [n, p] : gpu->named_parameters()) EXPECT_TRUE(p.is_cuda()) << n;
  for (const auto& [n, b] : gpu->named_buffers()) EXPECT_TRUE(b.is_cuda()) << n;
  EXPECT_TRUE(running_mean.is_cuda());
  const double lr = 0.1;
  const Tensor target = from_vector<std::int64_t>({4, 0, 2}, {3});
  for (int step = 0; step < 5; ++step) {
    const Tensor x = rnd({3, 2, 7, 5});
    const Tensor loss_cpu = F::cross_entropy(cpu->forward(x), target);
    const Tensor loss_gpu = F::cross_entropy(gpu->forward(x.to(kGpu)), target.to(kGpu));
    const std::string what = detail::str("step ", step);
    expect_agree(loss_gpu, loss_cpu, Tensor(), 0.0, what + ": loss");
    loss_cpu.backward();
    loss_gpu.backward();
    compare_state(*gpu, *cpu, what);
    {
      NoGradGuard no_grad;
      for (nn::Module* m : {static_cast<nn::Module*>(cpu.get()), static_cast<nn::Module*>(gpu.get())}) {
        for (Tensor& p : m->parameters()) p.add_(p.grad(), -lr);
      }
    }
    cpu->zero_grad();
    gpu->zero_grad();
    for (const Tensor& h : handles) EXPECT_FALSE(h.grad().defined());
  }
  compare_state(*gpu, *cpu, "after 5 steps", false);
  // The handles taken before to() are the trained parameters.
  const auto named = gpu->named_parameters();
  for (std::size_t i = 0; i < handles.size(); ++i) EXPECT_TRUE(handles[i].is_same(named[i].second)) << named[i].first;
  // Eval mode (running statistics) agrees too.
  cpu->eval();
  gpu->eval();
  const Tensor x = rnd({3, 2, 7, 5});
  expect_agree(gpu->forward(x.to(kGpu)), cpu->forward(x), Tensor(), 0.0, "eval forward after training");
}

}  // namespace
