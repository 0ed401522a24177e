// Every layer and loss of minidl::nn against finite differences (gradcheck: float64, CPU, central differences,
// every Jacobian element), for the input and every parameter. Tensors are small because gradcheck builds full
// Jacobians. Inputs stay where each function is smooth: no ties inside max-pool windows, away from the kinks of
// relu/leaky_relu. Random layers (dropout) reseed the generator inside the checked function, so every
// evaluation draws the same mask and the function is deterministic.
#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}

Tensor rnd(const Shape& s, double lo = -1.0, double hi = 1.0) { return leaf(uniform(s, lo, hi, kFloat64)); }

/// |x| in [0.2, 1] with a random sign: a step of eps never crosses the kink at 0.
Tensor away_from_zero(const Shape& s) {
  std::vector<double> v = uniform(s, -1.0, 1.0, kFloat64).to_vector<double>();
  for (double& x : v) x = x >= 0 ? 0.2 + 0.8 * x : -0.2 + 0.8 * x;
  return leaf(from_vector(v, s));
}

/// A random permutation of evenly spaced values in [-1, 1]: every max-pool window has one clear winner.
Tensor distinct(const Shape& s) {
  const std::vector<double> u = uniform(s, 0.0, 1.0, kFloat64).to_vector<double>();
  std::vector<std::size_t> order(u.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return u[a] < u[b]; });
  std::vector<double> v(u.size());
  for (std::size_t r = 0; r < order.size(); ++r) v[order[r]] = -1.0 + 2.0 * (r + 0.5) / static_cast<double>(u.size());
  return leaf(from_vector(v, s));
}

Tensor labels(const std::vector<std::int64_t>& v) { return from_vector(v, {static_cast<std::int64_t>(v.size())}); }

/// Runs gradcheck and reports its message (input, element, both values) on failure.
void check(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs) {
  try {
    EXPECT_TRUE(gradcheck(fn, inputs)) << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

/// Checks a module's forward with respect to `x` and every parameter of the module (converted to float64).
void check_module(const std::string& what, const std::shared_ptr<nn::Module>& m, const Tensor& x) {
  m->to(kFloat64);
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : m->parameters()) inputs.push_back(p);
  check(what + " on " + shape_str(x.sizes()), [m](const std::vector<Tensor>& in) { return m->forward(in[0]); }, inputs);
}

std::string reduction_str(nn::Reduction r) {
  return r == nn::Reduction::None ? "none" : r == nn::Reduction::Sum ? "sum" : "mean";
}
const nn::Reduction kReductions[] = {nn::Reduction::None, nn::Reduction::Mean, nn::Reduction::Sum};

// ---- linear -------------------------------------------------------------------------------------------------

TEST(LayersGradcheck, Linear) {
  for (bool bias : {true, false}) {
    const std::string b = bias ? "with bias" : "without bias";
    check_module("Linear(4, 5) " + b, nn::Linear(nn::LinearOptions(4, 5).bias(bias)).ptr(), rnd({3, 4}));
    check_module("Linear(4, 5) 3-D input " + b, nn::Linear(nn::LinearOptions(4, 5).bias(bias)).ptr(), rnd({2, 3, 4}));
    check_module("Linear(4, 3) 1-D input " + b, nn::Linear(nn::LinearOptions(4, 3).bias(bias)).ptr(), rnd({4}));
  }
}

// The fused Linear + ReLU (a random pre-activation lands within gradcheck's step of the kink with probability
// about 1e-6 per element).
TEST(LayersGradcheck, LinearReLU) {
  for (bool bias : {true, false}) {
    const std::string b = bias ? "with bias" : "without bias";
    check_module("LinearReLU(4, 5) " + b, nn::LinearReLU(nn::LinearOptions(4, 5).bias(bias)).ptr(), rnd({3, 4}));
    check_module("LinearReLU(4, 5) 3-D input " + b, nn::LinearReLU(nn::LinearOptions(4, 5).bias(bias)).ptr(),
                 rnd({2, 3, 4}));
  }
}

TEST(LayersGradcheck, LinearOnlyParameters) {
  // The input does not require grad: only the weight and bias paths of the backward run.
  nn::Linear fc(3, 2);
  fc->to(kFloat64);
  const Tensor x = uniform({4, 3}, -1.0, 1.0, kFloat64);
  check("Linear weight/bias only", [fc](const std::vector<Tensor>& in) { return fc(in[0]); }, {x, fc->weight, fc->bias});
}

// ---- conv2d -------------------------------------------------------------------------------------------------

struct ConvCase {
  std::int64_t n, c, k;
  nn::ExpandingArray2 kernel, stride, padding, dilation;
  std::int64_t groups;
  bool bias;
};

std::string conv_str(const ConvCase& cc) {
  return detail::str("conv2d(N=", cc.n, ", C=", cc.c, ", K=", cc.k, ", kernel=", cc.kernel.h, "x", cc.kernel.w,
                     ", stride=", cc.stride.h, "x", cc.stride.w, ", padding=", cc.padding.h, "x", cc.padding.w,
                     ", dilation=", cc.dilation.h, "x", cc.dilation.w, ", groups=", cc.groups, ", bias=", cc.bias, ")");
}

TEST(LayersGradcheck, Conv2d) {
  const ConvCase cases[] = {
      {1, 2, 3, {3, 3}, 1, 0, 1, 1, true},            // plain
      {3, 2, 3, {3, 2}, 1, 0, 1, 1, true},            // batch 3, non-square kernel
      {1, 2, 2, 3, 2, 1, 1, 1, true},                 // stride 2, padding 1
      {3, 2, 2, {2, 3}, {2, 1}, {1, 0}, 1, 1, false},  // asymmetric stride/padding, no bias
      {1, 2, 2, 2, 1, 1, 2, 1, true},                 // dilation 2, padding 1
      {3, 4, 4, 3, 1, 1, 1, 2, true},                 // groups 2
      {3, 4, 2, {3, 2}, 2, 1, 2, 2, false},           // everything at once
      {2, 8, 8, 3, 1, 1, 1, 1, true},                 // Winograd's path (3x3, stride 1, >= 8 channels)
      {1, 16, 16, 3, 1, {0, 2}, 1, 2, false},         // Winograd's path, groups 2, padding 0x2
  };
  for (const ConvCase& cc : cases) {
    nn::Conv2d conv(nn::Conv2dOptions(cc.c, cc.k, cc.kernel)
                        .stride(cc.stride)
                        .padding(cc.padding)
                        .dilation(cc.dilation)
                        .groups(cc.groups)
                        .bias(cc.bias));
    check_module(conv_str(cc), conv.ptr(), rnd({cc.n, cc.c, 7, 5}));
    nn::ConvReLU2d fused(conv->options);
    check_module("fused ReLU " + conv_str(cc), fused.ptr(), rnd({cc.n, cc.c, 7, 5}));
  }
}

// ---- pooling ------------------------------------------------------------------------------------------------

TEST(LayersGradcheck, MaxPool2d) {
  for (std::int64_t n : {1, 3}) {
    check_module("MaxPool2d(2)", nn::MaxPool2d(nn::MaxPool2dOptions(2)).ptr(), distinct({n, 2, 7, 5}));
    check_module("MaxPool2d(3, stride 2, padding 1)",
                 nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)).ptr(), distinct({n, 2, 7, 5}));
    check_module("MaxPool2d(2x3, stride 1x2)", nn::MaxPool2d(nn::MaxPool2dOptions({2, 3}).stride({1, 2})).ptr(),
                 distinct({n, 2, 7, 5}));
  }
}

TEST(LayersGradcheck, AvgPool2d) {
  for (std::int64_t n : {1, 3}) {
    check_module("AvgPool2d(2)", nn::AvgPool2d(nn::AvgPool2dOptions(2)).ptr(), rnd({n, 2, 7, 5}));
    check_module("AvgPool2d(3, stride 2, padding 1)",
                 nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1)).ptr(), rnd({n, 2, 7, 5}));
    check_module("AvgPool2d(2x3, stride 1x2, padding 1x1)",
                 nn::AvgPool2d(nn::AvgPool2dOptions({2, 3}).stride({1, 2}).padding(1)).ptr(), rnd({n, 2, 7, 5}));
  }
}

TEST(LayersGradcheck, AdaptiveAvgPool2d) {
  check_module("AdaptiveAvgPool2d(1)", nn::AdaptiveAvgPool2d(1).ptr(), rnd({3, 2, 7, 5}));
  check_module("AdaptiveAvgPool2d(2)", nn::AdaptiveAvgPool2d(2).ptr(), rnd({3, 2, 6, 4}));
  check_module("AdaptiveAvgPool2d(2x1)", nn::AdaptiveAvgPool2d(nn::ExpandingArray2(2, 1)).ptr(), rnd({1, 2, 6, 5}));
}

// ---- batch norm ---------------------------------------------------------------------------------------------

/// Random scale and shift, so the affine part of the backward is exercised with values other than 1 and 0.
void randomize_affine(nn::BatchNormImplBase& bn) {
  if (!bn.options.affine()) return;
  nn::init::uniform_(bn.weight, 0.5, 1.5);
  nn::init::uniform_(bn.bias, -0.5, 0.5);
}

TEST(LayersGradcheck, BatchNormTrain) {
  for (bool affine : {true, false}) {
    const std::string a = affine ? " affine" : " no affine";
    nn::BatchNorm1d bn2(nn::BatchNormOptions(3).affine(affine));
    randomize_affine(*bn2);
    check_module("BatchNorm1d 2-D" + a, bn2.ptr(), rnd({5, 3}));
    nn::BatchNorm1d bn3(nn::BatchNormOptions(2).affine(affine));
    randomize_affine(*bn3);
    check_module("BatchNorm1d 3-D" + a, bn3.ptr(), rnd({3, 2, 4}));
    nn::BatchNorm2d bn4(nn::BatchNormOptions(3).affine(affine));
    randomize_affine(*bn4);
    check_module("BatchNorm2d" + a, bn4.ptr(), rnd({2, 3, 3, 2}));
    nn::BatchNorm2d untracked(nn::BatchNormOptions(2).affine(affine).track_running_stats(false));
    randomize_affine(*untracked);
    check_module("BatchNorm2d without running stats" + a, untracked.ptr(), rnd({2, 2, 3, 2}));
  }
}

TEST(LayersGradcheck, BatchNormEval) {
  for (bool affine : {true, false}) {
    nn::BatchNorm2d bn(nn::BatchNormOptions(3).affine(affine));
    randomize_affine(*bn);
    bn->to(kFloat64);
    nn::init::uniform_(bn->running_mean, -0.5, 0.5);
    nn::init::uniform_(bn->running_var, 0.5, 1.5);
    bn->eval();
    check_module(std::string("BatchNorm2d eval") + (affine ? " affine" : " no affine"), bn.ptr(), rnd({2, 3, 3, 2}));
    nn::BatchNorm1d bn1(nn::BatchNormOptions(3).affine(affine));
    randomize_affine(*bn1);
    bn1->to(kFloat64);
    nn::init::uniform_(bn1->running_mean, -0.5, 0.5);
    nn::init::uniform_(bn1->running_var, 0.5, 1.5);
    bn1->eval();
    check_module(std::string("BatchNorm1d eval") + (affine ? " affine" : " no affine"), bn1.ptr(), rnd({4, 3}));
  }
  // Eval mode without running statistics normalises with the batch statistics (PyTorch).
  nn::BatchNorm2d untracked(nn::BatchNormOptions(2).track_running_stats(false));
  randomize_affine(*untracked);
  untracked->eval();
  check_module("BatchNorm2d eval without running stats", untracked.ptr(), rnd({2, 2, 3, 2}));
}

TEST(LayersGradcheck, BatchNormFunctionalWithoutRunningStats) {
  const Tensor w = rnd({2}, 0.5, 1.5), b = rnd({2});
  check("batch_norm(training, no running stats)",
        [](const std::vector<Tensor>& in) { return F::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
        {rnd({3, 2, 4}), w, b});
}

// ---- dropout ------------------------------------------------------------------------------------------------

TEST(LayersGradcheck, DropoutFixedMask) {
  check("dropout(p=0.4)",
        [](const std::vector<Tensor>& in) {
          manual_seed(1234);
          return F::dropout(in[0], 0.4, true);
        },
        {rnd({4, 6})});
  nn::Dropout drop(0.3);
  check("Dropout(0.3) module",
        [drop](const std::vector<Tensor>& in) {
          manual_seed(99);
          return drop(in[0]);
        },
        {rnd({3, 5})});
}

// Dropout's backward masks the incoming gradient in that gradient's own buffer when nothing else holds it
// (ops::binary_grad_reusing), otherwise into a new one: both give gradient * mask, and a gradient the caller
// still holds is left as it was.
TEST(LayersGradcheck, DropoutBackwardLeavesAHeldGradientAlone) {
  const Tensor x = leaf(uniform({8, 16}, 0.5, 1.5, kFloat32));  // never zero: the mask is y / x
  manual_seed(77);
  const Tensor y = F::dropout(x, 0.5, true);
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  const Tensor held = uniform({8, 16}, -1.0, 1.0, kFloat32);
  const std::vector<float> gv = held.to_vector<float>();
  y.backward(held);
  EXPECT_EQ(held.to_vector<float>(), gv) << "the caller's gradient was overwritten";
  const std::vector<float> dx = x.grad().to_vector<float>();
  for (std::size_t i = 0; i < xv.size(); ++i) EXPECT_FLOAT_EQ(dx[i], gv[i] * (yv[i] / xv[i])) << "element " << i;

  const Tensor x2 = leaf(uniform({8, 16}, 0.5, 1.5, kFloat32));
  manual_seed(78);
  const Tensor y2 = F::dropout(x2, 0.5, true);
  mul(y2, held).sum().backward();  // mul's backward hands dropout a gradient no one else holds
  const std::vector<float> x2v = x2.to_vector<float>(), y2v = y2.to_vector<float>(), dx2 = x2.grad().to_vector<float>();
  for (std::size_t i = 0; i < x2v.size(); ++i) EXPECT_FLOAT_EQ(dx2[i], gv[i] * (y2v[i] / x2v[i])) << "element " << i;
  EXPECT_EQ(held.to_vector<float>(), gv);
}

TEST(LayersGradcheck, Dropout2dFixedMask) {
  check("dropout2d(p=0.5)",
        [](const std::vector<Tensor>& in) {
          manual_seed(4321);
          return F::dropout2d(in[0], 0.5, true);
        },
        {rnd({2, 4, 3, 2})});
  nn::Dropout2d drop(0.3);
  check("Dropout2d(0.3) module",
        [drop](const std::vector<Tensor>& in) {
          manual_seed(7);
          return drop(in[0]);
        },
        {rnd({3, 2, 2, 3})});
}

// ---- activations and shape modules --------------------------------------------------------------------------

TEST(LayersGradcheck, ActivationModules) {
  check_module("ReLU", nn::ReLU().ptr(), away_from_zero({3, 4}));
  check_module("LeakyReLU(0.2)", nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)).ptr(),
               away_from_zero({3, 4}));
  check_module("GELU", nn::GELU().ptr(), rnd({3, 4}, -2.0, 2.0));
  check_module("Sigmoid", nn::Sigmoid().ptr(), rnd({3, 4}, -3.0, 3.0));
  check_module("Tanh", nn::Tanh().ptr(), rnd({3, 4}, -2.0, 2.0));
}

TEST(LayersGradcheck, FlattenSoftmaxModules) {
  check_module("Flatten()", nn::Flatten().ptr(), rnd({2, 3, 2, 2}));
  check_module("Flatten(0, 2)", nn::Flatten(0, 2).ptr(), rnd({2, 3, 2, 2}));
  check_module("Softmax(1)", nn::Softmax(1).ptr(), rnd({3, 5}, -2.0, 2.0));
  check_module("Softmax(-1) 3-D", nn::Softmax(-1).ptr(), rnd({2, 3, 4}, -2.0, 2.0));
  check_module("LogSoftmax(1)", nn::LogSoftmax(1).ptr(), rnd({3, 5}, -2.0, 2.0));
  check_module("LogSoftmax(0)", nn::LogSoftmax(0).ptr(), rnd({4, 3}, -2.0, 2.0));
}

// ---- losses -------------------------------------------------------------------------------------------------

TEST(LayersGradcheck, CrossEntropy) {
  const Tensor target = labels({0, 3, 4, 1});
  for (nn::Reduction r : kReductions) {
    for (double smoothing : {0.0, 0.1}) {
      check(detail::str("cross_entropy(reduction=", reduction_str(r), ", label_smoothing=", smoothing, ")"),
            [=](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], target, r, smoothing); },
            {rnd({4, 5}, -2.0, 2.0)});
    }
  }
}

TEST(LayersGradcheck, NllLossOnLogSoftmax) {
  const Tensor target = labels({2, 0, 1, 2, 1});
  for (nn::Reduction r : kReductions) {
    check("nll_loss(log_softmax, reduction=" + reduction_str(r) + ")",
          [=](const std::vector<Tensor>& in) { return F::nll_loss(F::log_softmax(in[0], 1), target, r); },
          {rnd({5, 3}, -2.0, 2.0)});
  }
  // Directly on a leaf of log-probabilities: the gradient is -onehot (scaled by the reduction).
  check("nll_loss on a leaf", [=](const std::vector<Tensor>& in) { return F::nll_loss(in[0], target); },
        {rnd({5, 3}, -3.0, -0.1)});
}

TEST(LayersGradcheck, MseLoss) {
  for (nn::Reduction r : kReductions) {
    check("mse_loss(reduction=" + reduction_str(r) + ")",
          [=](const std::vector<Tensor>& in) { return F::mse_loss(in[0], in[1], r); }, {rnd({3, 4}), rnd({3, 4})});
  }
}

// ---- a whole small network ----------------------------------------------------------------------------------

TEST(LayersGradcheck, SmallCnnEndToEnd) {
  // conv -> batch norm -> relu -> max pool -> flatten -> linear -> cross entropy, every parameter checked.
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 2, 3).padding(1)), nn::BatchNorm2d(nn::BatchNormOptions(2)),
                     nn::Tanh(), nn::AvgPool2d(nn::AvgPool2dOptions(2)), nn::Flatten(), nn::Linear(2 * 3 * 2, 3));
  net->to(kFloat64);
  const Tensor target = labels({2, 0});
  std::vector<Tensor> inputs{rnd({2, 1, 7, 5})};
  for (const Tensor& p : net->parameters()) inputs.push_back(p);
  check("small CNN", [=](const std::vector<Tensor>& in) { return F::cross_entropy(net(in[0]), target); }, inputs);
}

}  // namespace
