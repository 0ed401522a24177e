// The normalisation layers: layer_norm, rms_norm, group_norm, instance_norm, normalize and their modules. Values
// and gradients against references composed from minidl's own differentiable ops, float64 gradcheck of every
// functional and module, strided and empty inputs, the CPU kernels against the CUDA ones (skipped without a GPU),
// PyTorch's results (tests/golden/normalization_golden.json), module defaults and printing, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "golden_file.h"
#include "minidl/minidl.h"
#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;
using json = nlohmann::json;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

namespace {

// ---- references composed from ops --------------------------------------------------------------------------

std::vector<std::int64_t> last_dims(std::int64_t dim, std::int64_t k) {
  std::vector<std::int64_t> d;
  for (std::int64_t i = dim - k; i < dim; ++i) d.push_back(i);
  return d;
}

/// (x - mean) / sqrt(var + eps) over the last k dims (without centering: x / sqrt(mean(x^2) + eps)), affine.
Tensor ref_rows(const Tensor& x, std::int64_t k, const Tensor& w, const Tensor& b, double eps, bool centered) {
  const auto dims = last_dims(x.dim(), k);
  const Tensor xc = centered ? x - x.mean(dims, true) : x;
  Tensor y = xc / sqrt((xc * xc).mean(dims, true) + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

Shape channel_shape(std::int64_t c, std::int64_t dims) {
  Shape s(static_cast<std::size_t>(dims), 1);
  s[1] = c;
  return s;
}

Tensor ref_group_norm(const Tensor& x, std::int64_t groups, const Tensor& w, const Tensor& b, double eps) {
  const std::int64_t N = x.size(0), C = x.size(1);
  Tensor y = ref_rows(x.reshape({N, groups, -1}), 1, Tensor(), Tensor(), eps, true).reshape(x.sizes());
  if (w.defined()) y = y * w.reshape(channel_shape(C, x.dim()));
  if (b.defined()) y = y + b.reshape(channel_shape(C, x.dim()));
  return y;
}

/// Leaf copies of `ts` (undefined stays undefined) that require grad.
std::vector<Tensor> leaves(const std::vector<Tensor>& ts) {
  std::vector<Tensor> r;
  for (const Tensor& t : ts) r.push_back(t.defined() ? t.detach().clone().requires_grad_(true) : Tensor());
  return r;
}

/// Runs fn and ref on separate leaf copies of `in`, backward with one random upstream gradient, and compares the
/// outputs and every input's gradient.
template <class Fn, class Ref>
void expect_matches_reference(const std::vector<Tensor>& in, Fn fn, Ref ref, double tol, const std::string& what) {
  std::vector<Tensor> a = leaves(in), b = leaves(in);
  const Tensor ya = fn(a), yb = ref(b);
  expect_close(ya, yb, tol, tol, what + " output");
  const Tensor g = random_tensor(ya.sizes(), ya.dtype()).to(ya.device());
  ya.backward(g);
  yb.backward(g);
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!in[i].defined()) continue;
    expect_close(a[i].grad(), b[i].grad(), tol, tol, what + " gradient of input " + std::to_string(i));
  }
}

double tol_of(DType d) { return d == kFloat64 ? 1e-10 : 2e-5; }

// ---- values and gradients against the references ------------------------------------------------------------

TEST(Normalization, LayerNormMatchesComposedReference) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Shape& shape : {Shape{5, 7}, Shape{2, 3, 4, 5}, Shape{3, 768}, Shape{2, 3, 4}}) {
      for (std::int64_t k = 1; k <= std::min<std::int64_t>(3, static_cast<std::int64_t>(shape.size())); ++k) {
        const Shape ns(shape.end() - k, shape.end());
        const std::vector<std::int64_t> nsv(ns.begin(), ns.end());
        for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight and bias
          const Tensor x = random_tensor(shape, dt), w = affine ? random_tensor(ns, dt) : Tensor();
          const Tensor b = affine == 2 ? random_tensor(ns, dt) : Tensor();
          expect_matches_reference(
              {x, w, b}, [&](const std::vector<Tensor>& v) { return F::layer_norm(v[0], nsv, v[1], v[2], 1e-5); },
              [&](const std::vector<Tensor>& v) { return ref_rows(v[0], k, v[1], v[2], 1e-5, true); }, tol_of(dt),
              "layer_norm " + shape_str(shape) + " over " + shape_str(ns) + " affine " + std::to_string(affine));
        }
      }
    }
  }
}

TEST(Normalization, RmsNormMatchesComposedReferenceAndDefaultsEpsToMachineEpsilon) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Shape& shape : {Shape{4, 9}, Shape{2, 3, 8}}) {
      const Tensor x = random_tensor(shape, dt), w = random_tensor({shape.back()}, dt);
      expect_matches_reference(
          {x, w}, [&](const std::vector<Tensor>& v) { return F::rms_norm(v[0], {shape.back()}, v[1], 1e-6); },
          [&](const std::vector<Tensor>& v) { return ref_rows(v[0], 1, v[1], Tensor(), 1e-6, false); }, tol_of(dt),
          "rms_norm " + shape_str(shape));
      const double finfo = dt == kFloat64 ? std::numeric_limits<double>::epsilon()
                                          : static_cast<double>(std::numeric_limits<float>::epsilon());
      // Rows of tiny values show the eps: the default must be the dtype's machine epsilon.
      const Tensor small = x * 1e-4;
      expect_close(F::rms_norm(small, F::RMSNormFuncOptions({shape.back()})),
                   ref_rows(small, 1, Tensor(), Tensor(), finfo, false), tol_of(dt), tol_of(dt), "rms_norm eps=None");
    }
  }
}

TEST(Normalization, GroupNormAndInstanceNormMatchComposedReference) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (std::int64_t groups : {1, 2, 6}) {
      const Tensor x = random_tensor({3, 6, 4, 5}, dt), w = random_tensor({6}, dt), b = random_tensor({6}, dt);
      expect_matches_reference(
          {x, w, b}, [&](const std::vector<Tensor>& v) { return F::group_norm(v[0], groups, v[1], v[2], 1e-5); },
          [&](const std::vector<Tensor>& v) { return ref_group_norm(v[0], groups, v[1], v[2], 1e-5); }, tol_of(dt),
          "group_norm groups=" + std::to_string(groups));
    }
    const Tensor x = random_tensor({2, 3, 7}, dt), w = random_tensor({3}, dt), b = random_tensor({3}, dt);
    expect_matches_reference(
        {x, w, b},
        [&](const std::vector<Tensor>& v) {
          return F::instance_norm(v[0], F::InstanceNormFuncOptions().weight(v[1]).bias(v[2]).eps(1e-5));
        },
        [&](const std::vector<Tensor>& v) { return ref_group_norm(v[0], 3, v[1], v[2], 1e-5); }, tol_of(dt),
        "instance_norm");
  }
}

TEST(Normalization, InstanceNormRunningStatisticsFollowPyTorchsUpdate) {
  const Tensor x = random_tensor({4, 3, 5, 2}, kFloat64);
  Tensor rm = random_tensor({3}, kFloat64), rv = random_tensor({3}, kFloat64, false, 0.5, 1.5);
  const Tensor rm0 = rm.clone(), rv0 = rv.clone();
  F::instance_norm(x, rm, rv, Tensor(), Tensor(), true, 0.3, 1e-5);
  const Tensor flat = x.reshape({4, 3, 10});
  expect_close(rm, rm0 * 0.7 + flat.mean({2}).mean({0}) * 0.3, 1e-12, 1e-12, "running_mean");
  expect_close(rv, rv0 * 0.7 + flat.var({2}, true).mean({0}) * 0.3, 1e-12, 1e-12, "running_var");
  // Without the input's statistics the running ones normalise.
  const Tensor y = F::instance_norm(x, rm, rv, Tensor(), Tensor(), false, 0.3, 1e-5);
  expect_close(y, (x - rm.reshape({1, 3, 1, 1})) / sqrt(rv.reshape({1, 3, 1, 1}) + 1e-5), 1e-12, 1e-12,
               "instance_norm with running statistics");
}

TEST(Normalization, NormalizeGivesUnitNormsAlongDim) {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({3, 4, 5}, dt);
    for (double p : {1.0, 2.0, 3.0}) {
      for (std::int64_t dim : {0, 1, -1}) {
        const Tensor y = F::normalize(x, F::NormalizeFuncOptions().p(p).dim(dim));
        const Tensor norms = y.abs().pow(p).sum({dim}).pow(1.0 / p);
        expect_close(norms, ones(norms.sizes(), TensorOptions(dt)), tol_of(dt) * 10, tol_of(dt) * 10, "normalize");
        expect_close(y * x.abs().pow(p).sum({dim}, true).pow(1.0 / p), x, tol_of(dt) * 10, tol_of(dt) * 10,
                     "normalize direction");
      }
    }
    // A zero vector stays zero (the norm is clamped to eps).
    expect_close(F::normalize(zeros({2, 3}, TensorOptions(dt))), zeros({2, 3}, TensorOptions(dt)), 0, 0, "zeros");
  }
}

// ---- gradcheck -----------------------------------------------------------------------------------------------

TEST(Normalization, GradcheckFunctionals) {
  for (const Shape& shape : {Shape{3, 5}, Shape{2, 3, 4}}) {
    for (std::int64_t k = 1; k <= static_cast<std::int64_t>(shape.size()) - 1; ++k) {
      const Shape ns(shape.end() - k, shape.end());
      const std::vector<std::int64_t> nsv(ns.begin(), ns.end());
      const Tensor x = random_tensor(shape, kFloat64, true), w = random_tensor(ns, kFloat64, true);
      const Tensor b = random_tensor(ns, kFloat64, true);
      EXPECT_TRUE(
          gradcheck([&](const std::vector<Tensor>& v) { return F::layer_norm(v[0], nsv, v[1], v[2]); }, {x, w, b}));
      EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return F::layer_norm(v[0], nsv); }, {x}));
      EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return F::rms_norm(v[0], nsv, v[1], 1e-5); }, {x, w}));
      EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return F::rms_norm(v[0], nsv); }, {x}));
    }
  }
  const Tensor x = random_tensor({2, 4, 3}, kFloat64, true), w = random_tensor({4}, kFloat64, true);
  const Tensor b = random_tensor({4}, kFloat64, true);
  for (std::int64_t groups : {1, 2, 4}) {
    EXPECT_TRUE(
        gradcheck([&](const std::vector<Tensor>& v) { return F::group_norm(v[0], groups, v[1], v[2]); }, {x, w, b}));
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return F::group_norm(v[0], groups); }, {x}));
  }
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& v) { return F::instance_norm(v[0], Tensor(), Tensor(), v[1], v[2]); }, {x, w, b}));
  const Tensor rm = random_tensor({4}, kFloat64), rv = random_tensor({4}, kFloat64, false, 0.5, 1.5);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return F::instance_norm(v[0], rm, rv, v[1], v[2], false); },
                        {x, w, b}));
  for (double p : {1.0, 2.0, 3.0}) {
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) { return F::normalize(v[0], F::NormalizeFuncOptions().p(p).dim(1)); }, {x}));
  }
}

TEST(Normalization, GradcheckModules) {
  const Tensor x = random_tensor({2, 4, 3}, kFloat64, true);
  auto check = [&](nn::Module& m, const Tensor& input) {
    m.to(kFloat64);
    std::vector<Tensor> inputs{input};
    for (const Tensor& p : m.parameters()) {
      NoGradGuard g;
      Tensor q = p;
      q.copy_(random_tensor(p.sizes(), kFloat64));  // away from the ones / zeros start
      inputs.push_back(p);
    }
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return m.forward(v[0]); }, inputs)) << m.name();
  };
  nn::LayerNorm ln(nn::LayerNormOptions({4, 3}));
  check(*ln, x);
  nn::LayerNorm ln_nobias(nn::LayerNormOptions({3}).bias(false));
  check(*ln_nobias, x);
  nn::LayerNorm ln_plain(nn::LayerNormOptions({3}).elementwise_affine(false));
  check(*ln_plain, x);
  nn::RMSNorm rms(nn::RMSNormOptions({3}).eps(1e-5));
  check(*rms, x);
  nn::GroupNorm gn(2, 4);
  check(*gn, x);
  nn::InstanceNorm1d in1(nn::InstanceNormOptions(4).affine(true));
  check(*in1, x);
  nn::InstanceNorm2d in2(nn::InstanceNormOptions(4).affine(true).track_running_stats(true));
  check(*in2, random_tensor({2, 4, 2, 3}, kFloat64, true));
  in2->eval();
  check(*in2, random_tensor({2, 4, 2, 3}, kFloat64, true));
}

// ---- views, empty inputs, dtypes -------------------------------------------------------------------------------

TEST(Normalization, StridedInputsMatchContiguousCopies) {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor base = random_tensor({6, 8, 5}, dt);
    const Tensor t = base.transpose(0, 2);                   // (5, 8, 6), strided
    const Tensor s = base.slice(2, 1, 5).slice(0, 0, 6, 2);  // (3, 8, 4), sliced
    const Tensor w = random_tensor({6}, dt), b = random_tensor({6}, dt);
    expect_close(F::layer_norm(t, {6}, w, b), F::layer_norm(t.contiguous(), {6}, w, b), 0, 0, "layer_norm strided");
    expect_close(F::rms_norm(s, {8, 4}), F::rms_norm(s.contiguous(), {8, 4}), 0, 0, "rms_norm sliced");
    expect_close(F::group_norm(t, 4), F::group_norm(t.contiguous(), 4), 0, 0, "group_norm strided");
    expect_close(F::instance_norm(s), F::instance_norm(s.contiguous()), 0, 0, "instance_norm sliced");
    expect_close(F::normalize(t), F::normalize(t.contiguous()), 0, 0, "normalize strided");
    // Strided weight.
    const Tensor w2 = random_tensor({6, 2}, dt).select(1, 1);
    expect_close(F::layer_norm(t, {6}, w2), F::layer_norm(t, {6}, w2.contiguous()), 0, 0, "strided weight");
  }
}

TEST(Normalization, EmptyBatchGivesEmptyOutputsAndZeroParameterGradients) {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({0, 5}, dt, true);
    const Tensor w = random_tensor({5}, dt, true), b = random_tensor({5}, dt, true);
    Tensor y = F::layer_norm(x, {5}, w, b);
    EXPECT_EQ(y.sizes(), (Shape{0, 5}));
    y.sum().backward();
    expect_close(w.grad(), zeros({5}, TensorOptions(dt)), 0, 0, "empty layer_norm dweight");
    expect_close(b.grad(), zeros({5}, TensorOptions(dt)), 0, 0, "empty layer_norm dbias");
    EXPECT_EQ(x.grad().sizes(), (Shape{0, 5}));
    const Tensor xg = random_tensor({0, 4, 3}, dt, true);
    Tensor yg = F::group_norm(xg, 2);
    EXPECT_EQ(yg.sizes(), (Shape{0, 4, 3}));
    yg.sum().backward();
    EXPECT_EQ(xg.grad().sizes(), (Shape{0, 4, 3}));
    EXPECT_EQ(F::instance_norm(random_tensor({0, 4, 3}, dt)).sizes(), (Shape{0, 4, 3}));
    EXPECT_EQ(F::rms_norm(random_tensor({2, 0, 3}, dt), {3}).sizes(), (Shape{2, 0, 3}));
  }
}

// ---- modules ----------------------------------------------------------------------------------------------------

TEST(Normalization, ModulesStartAsPyTorchAndPrintAsLibTorch) {
  nn::LayerNorm ln(nn::LayerNormOptions({2, 3}));
  ASSERT_EQ(ln->named_parameters().size(), 2u);
  expect_close(ln->weight, ones({2, 3}), 0, 0, "LayerNorm weight");
  expect_close(ln->bias, zeros({2, 3}), 0, 0, "LayerNorm bias");
  nn::RMSNorm rms(nn::RMSNormOptions({4}));
  ASSERT_EQ(rms->named_parameters().size(), 1u);
  expect_close(rms->weight, ones({4}), 0, 0, "RMSNorm weight");
  nn::GroupNorm gn(nn::GroupNormOptions(2, 6).eps(1e-3));
  expect_close(gn->weight, ones({6}), 0, 0, "GroupNorm weight");
  nn::InstanceNorm2d in(nn::InstanceNorm2dOptions(3));
  EXPECT_TRUE(in->parameters().empty());
  EXPECT_TRUE(in->buffers().empty());
  nn::InstanceNorm1d in1(nn::InstanceNormOptions(3).affine(true).track_running_stats(true));
  EXPECT_EQ(in1->parameters().size(), 2u);
  EXPECT_EQ(in1->buffers().size(), 3u);
  EXPECT_TRUE(nn::LayerNorm(nn::LayerNormOptions({3}).elementwise_affine(false))->parameters().empty());
  EXPECT_EQ(nn::LayerNorm(nn::LayerNormOptions({3}).bias(false))->parameters().size(), 1u);

  nn::Sequential seq(ln, nn::LayerNorm(nn::LayerNormOptions({3}).eps(1e-6).elementwise_affine(false)), rms,
                     nn::RMSNorm(nn::RMSNormOptions({4, 5}).eps(1e-6).elementwise_affine(false)), gn, in, in1);
  std::ostringstream os;
  os << *seq;
  const std::string s = os.str();
  for (const char* part :
       {"(0): LayerNorm([2, 3], eps=1e-05, elementwise_affine=true)",
        "(1): LayerNorm([3], eps=1e-06, elementwise_affine=false)",
        "(2): RMSNorm([4], eps=None, elementwise_affine=true)",
        "(3): RMSNorm([4, 5], eps=1e-06, elementwise_affine=false)", "(4): GroupNorm(2, 6, eps=0.001, affine=true)",
        "(5): InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=false, track_running_stats=false)",
        "(6): InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)"}) {
    EXPECT_NE(s.find(part), std::string::npos) << "missing \"" << part << "\" in:\n" << s;
  }
}

TEST(Normalization, ModulesMatchTheirFunctionals) {
  const Tensor x = random_tensor({2, 6, 4, 5}, kFloat32);
  nn::LayerNorm ln(nn::LayerNormOptions({4, 5}).eps(1e-4));
  expect_close(ln(x), F::layer_norm(x, F::LayerNormFuncOptions({4, 5}).weight(ln->weight).bias(ln->bias).eps(1e-4)), 0,
               0, "LayerNorm");
  nn::RMSNorm rms(nn::RMSNormOptions({5}));
  expect_close(rms(x), F::rms_norm(x, F::RMSNormFuncOptions({5}).weight(rms->weight)), 0, 0, "RMSNorm");
  nn::GroupNorm gn(3, 6);
  expect_close(gn(x), F::group_norm(x, F::GroupNormFuncOptions(3).weight(gn->weight).bias(gn->bias)), 0, 0,
               "GroupNorm");
  nn::InstanceNorm2d in(nn::InstanceNormOptions(6).track_running_stats(true).momentum(0.5));
  const Tensor y = in(x);
  expect_close(y, ref_group_norm(x, 6, Tensor(), Tensor(), 1e-5), 2e-5, 2e-5, "InstanceNorm2d training");
  EXPECT_EQ(in->num_batches_tracked.item<std::int64_t>(), 1);
  const Tensor flat = x.reshape({2, 6, 20});
  expect_close(in->running_mean, flat.mean({2}).mean({0}) * 0.5, 1e-6, 1e-6, "InstanceNorm2d running_mean");
  in->eval();
  expect_close(in(x), (x - in->running_mean.reshape({1, 6, 1, 1})) / sqrt(in->running_var.reshape({1, 6, 1, 1}) + 1e-5),
               1e-5, 1e-5, "InstanceNorm2d eval");
  // Unbatched input.
  nn::InstanceNorm1d in1(3);
  const Tensor u = random_tensor({3, 7}, kFloat32);
  expect_close(in1(u), in1(u.unsqueeze(0)).squeeze(0), 0, 0, "InstanceNorm1d unbatched");
}

// ---- bad input -----------------------------------------------------------------------------------------------

TEST(Normalization, BadInputGivesTypedErrorsNamingTheOp) {
  const Tensor x = random_tensor({2, 3}, kFloat32);
  EXPECT_ERROR(ValueError, F::layer_norm(x, {4}), "layer_norm", "normalized_shape=[4]", "[2, 3]");
  EXPECT_ERROR(ValueError, F::layer_norm(x, {2, 3, 1}), "layer_norm", "normalized_shape");
  EXPECT_ERROR(ValueError, F::layer_norm(x, {}), "layer_norm", "normalized_shape");
  EXPECT_ERROR(ValueError, F::layer_norm(x, {3}, random_tensor({4}, kFloat32)), "layer_norm", "weight", "[3]", "[4]");
  EXPECT_ERROR(ValueError, F::layer_norm(x, {3}, Tensor(), random_tensor({2, 3}, kFloat32)), "layer_norm", "bias");
  EXPECT_ERROR(ValueError, F::layer_norm(x, {3}, Tensor(), Tensor(), -1.0), "layer_norm", "eps");
  EXPECT_ERROR(TypeError, F::layer_norm(x, {3}, random_tensor({3}, kFloat64)), "layer_norm");
  EXPECT_ERROR(TypeError, F::layer_norm(ones({2, 3}, TensorOptions(kInt64)), {3}), "layer_norm", "int64");
  EXPECT_ERROR(ValueError, F::rms_norm(x, {2}), "rms_norm", "normalized_shape");
  EXPECT_ERROR(ValueError, F::rms_norm(x, {3}, random_tensor({2}, kFloat32)), "rms_norm", "weight");
  const Tensor c = random_tensor({2, 6, 4}, kFloat32);
  EXPECT_ERROR(ValueError, F::group_norm(c, 4), "group_norm", "divisible", "num_groups=4");
  EXPECT_ERROR(ValueError, F::group_norm(c, 0), "group_norm", "num_groups");
  EXPECT_ERROR(ValueError, F::group_norm(c, 3, random_tensor({3}, kFloat32)), "group_norm", "weight", "[6]");
  EXPECT_ERROR(ValueError, F::group_norm(random_tensor({6}, kFloat32), 3), "group_norm", "(N, C, *)");
  EXPECT_ERROR(ValueError, F::instance_norm(random_tensor({2, 6, 1}, kFloat32)), "instance_norm", "spatial");
  EXPECT_ERROR(ValueError, F::instance_norm(c, random_tensor({5}, kFloat32), random_tensor({5}, kFloat32)),
               "instance_norm", "running_mean", "[6]");
  EXPECT_ERROR(ValueError, F::instance_norm(c, random_tensor({6}, kFloat32)), "instance_norm", "running_var");
  EXPECT_ERROR(ValueError, F::instance_norm(c, Tensor(), Tensor(), Tensor(), Tensor(), false), "instance_norm",
               "use_input_stats");
  EXPECT_ERROR(ValueError, F::instance_norm(c, Tensor(), Tensor(), Tensor(), Tensor(), true, 2.0), "instance_norm",
               "momentum");
  EXPECT_ERROR(IndexError, F::normalize(c, F::NormalizeFuncOptions().dim(3)), "normalize");
  // Modules.
  EXPECT_ERROR(ValueError, nn::GroupNorm(4, 6), "GroupNorm", "divisible");
  EXPECT_ERROR(ValueError, nn::LayerNorm(nn::LayerNormOptions({})), "LayerNorm", "normalized_shape");
  EXPECT_ERROR(ValueError, nn::RMSNorm(nn::RMSNormOptions({-1})), "RMSNorm", "normalized_shape");
  EXPECT_ERROR(ValueError, nn::InstanceNorm1d(0), "InstanceNorm1d", "num_features");
  EXPECT_ERROR(ValueError, nn::LayerNorm(nn::LayerNormOptions({4}))(x), "layer_norm", "normalized_shape=[4]");
  EXPECT_ERROR(ValueError, nn::GroupNorm(2, 4)(c), "GroupNorm", "(N, 4, *)");
  EXPECT_ERROR(ValueError, nn::InstanceNorm2d(nn::InstanceNormOptions(6).affine(true))(x), "InstanceNorm2d", "4D");
  EXPECT_ERROR(ValueError, nn::InstanceNorm1d(nn::InstanceNormOptions(5).affine(true))(c), "InstanceNorm1d",
               "num_features");
}

// ---- CPU against GPU -----------------------------------------------------------------------------------------

/// Forward and backward of fn on the CPU and on the GPU from the same inputs, compared element by element.
void expect_devices_agree(const std::vector<Tensor>& in, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          double tol, const std::string& what) {
  std::vector<Tensor> cpu = leaves(in), gpu;
  for (const Tensor& t : in) gpu.push_back(t.defined() ? t.to(Device("cuda")).detach().requires_grad_(true) : Tensor());
  const Tensor yc = fn(cpu), yg = fn(gpu);
  expect_close(yg, yc, tol, tol, what + " output");
  const Tensor g = random_tensor(yc.sizes(), yc.dtype());
  yc.backward(g);
  yg.backward(g.to(Device("cuda")));
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i].defined()) expect_close(gpu[i].grad(), cpu[i].grad(), tol, tol, what + " gradient " + std::to_string(i));
  }
}

TEST(NormalizationGpu, KernelsMatchTheCpuReference) {
  MINIDL_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat64 ? 1e-10 : 1e-4;
    // Rows of one warp (packed and element-wise), of a block (shared and global accumulators), and many rows.
    for (const Shape& shape : {Shape{64, 768}, Shape{37, 7}, Shape{3, 5000}, Shape{5, 20000}, Shape{1000, 96},
                               Shape{2, 4, 1}, Shape{0, 8}}) {
      const std::int64_t n = shape.back();
      const Tensor x = random_tensor(shape, dt, false, -3, 3), w = random_tensor({n}, dt), b = random_tensor({n}, dt);
      expect_devices_agree(
          {x, w, b}, [&](const std::vector<Tensor>& v) { return F::layer_norm(v[0], {n}, v[1], v[2]); }, tol,
          "layer_norm " + shape_str(shape));
      expect_devices_agree(
          {x}, [&](const std::vector<Tensor>& v) { return F::layer_norm(v[0], {n}); }, tol,
          "layer_norm no affine " + shape_str(shape));
      expect_devices_agree(
          {x, w}, [&](const std::vector<Tensor>& v) { return F::rms_norm(v[0], {n}, v[1]); }, tol,
          "rms_norm " + shape_str(shape));
    }
    const Tensor x = random_tensor({4, 32, 16, 16}, dt), w = random_tensor({32}, dt), b = random_tensor({32}, dt);
    expect_devices_agree(
        {x, w, b}, [&](const std::vector<Tensor>& v) { return F::group_norm(v[0], 8, v[1], v[2]); }, tol, "group_norm");
    expect_devices_agree(
        {x, w, b}, [&](const std::vector<Tensor>& v) { return F::instance_norm(v[0], {}, {}, v[1], v[2]); }, tol,
        "instance_norm");
    expect_devices_agree(
        {x}, [&](const std::vector<Tensor>& v) { return F::normalize(v[0]); }, tol, "normalize");
    // A view that starts one element into its storage: no 16-byte packs.
    const Tensor big = random_tensor({8 * 768 + 1}, dt);
    const Tensor off = minidl::testing::storage_view(big, 1, {8, 768});
    expect_close(F::layer_norm(off.to(Device("cuda")), {768}), F::layer_norm(off, {768}), tol, tol, "unaligned view");
  }
}

TEST(NormalizationGpu, ForwardAndBackwardCaptureInACudaGraph) {
  MINIDL_REQUIRE_GPU();
  const Device cuda("cuda");
  const Tensor x = random_tensor({256, 768}, kFloat32).to(cuda).requires_grad_(true);
  const Tensor w = random_tensor({768}, kFloat32).to(cuda).requires_grad_(true);
  const Tensor b = random_tensor({768}, kFloat32).to(cuda).requires_grad_(true);
  const Tensor g = random_tensor({256, 768}, kFloat32).to(cuda);
  Tensor y;
  const auto step = [&] {
    for (Tensor t : {x, w, b}) t.mutable_grad() = Tensor();
    y = F::layer_norm(x, {768}, w, b);
    y.backward(g);
  };
  step();  // eager: the reference
  const Tensor y0 = y.detach().clone(), dx0 = x.grad().clone(), dw0 = w.grad().clone(), db0 = b.grad().clone();
  cuda::CUDAGraph graph;
  graph.capture_begin();
  step();
  graph.capture_end();
  graph.replay();
  expect_close(y, y0, 0, 0, "captured forward");
  expect_close(x.grad(), dx0, 0, 0, "captured dx");
  expect_close(w.grad(), dw0, 0, 0, "captured dweight");
  expect_close(b.grad(), db0, 0, 0, "captured dbias");
}

// ---- PyTorch's results ----------------------------------------------------------------------------------------

const json& golden() {
  static const json g = minidl::testing::read_golden("normalization_golden.json");
  return g;
}

Tensor decode(const json& t, Device device) {
  if (t.is_null()) return Tensor();
  std::vector<double> values;
  for (const json& v : t["values"]) values.push_back(minidl::testing::golden_number(v));
  return from_vector(values, t["shape"].get<Shape>()).to(minidl::testing::dtype_named(t["dtype"])).to(device);
}

void check_golden_on(Device device) {
  for (const json& c : golden()["cases"]) {
    const std::string op = c["op"], label = op + " " + c["dtype"].get<std::string>() + " on " + device.str();
    const json& a = c["args"];
    const json& in = c["inputs"];
    std::vector<Tensor> v =
        leaves({decode(in["input"], device), decode(in["weight"], device), decode(in["bias"], device)});
    Tensor rm = decode(in["running_mean"], device), rv = decode(in["running_var"], device);
    Tensor y;
    const double eps = a.contains("eps") ? a["eps"].get<double>() : 0.0;
    if (op == "layer_norm") {
      y = F::layer_norm(v[0], a["normalized_shape"].get<std::vector<std::int64_t>>(), v[1], v[2], eps);
    } else if (op == "rms_norm") {
      y = F::rms_norm(v[0], a["normalized_shape"].get<std::vector<std::int64_t>>(), v[1],
                      a.contains("eps") ? std::optional<double>(eps) : std::nullopt);
    } else if (op == "group_norm") {
      y = F::group_norm(v[0], a["num_groups"].get<std::int64_t>(), v[1], v[2], eps);
    } else if (op == "instance_norm") {
      y = F::instance_norm(v[0], rm, rv, v[1], v[2], a["use_input_stats"].get<bool>(), a["momentum"].get<double>(),
                           eps);
    } else {
      y = F::normalize(v[0],
                       F::NormalizeFuncOptions().p(a["p"].get<double>()).dim(a["dim"].get<std::int64_t>()).eps(eps));
    }
    const bool f64 = c["dtype"] == "float64";
    const double rtol = f64 ? 1e-7 : 1e-4, atol = f64 ? 1e-7 : 1e-5;
    expect_close(y, decode(c["output"], device), rtol, atol, label + " output");
    y.backward(decode(c["grad_output"], device));
    const char* names[] = {"input", "weight", "bias"};
    for (int i = 0; i < 3; ++i) {
      if (c["grads"].contains(names[i])) {
        expect_close(v[static_cast<std::size_t>(i)].grad(), decode(c["grads"][names[i]], device), rtol, atol,
                     label + " gradient of " + names[i]);
      }
    }
    if (c.contains("running_mean_after")) {
      expect_close(rm, decode(c["running_mean_after"], device), rtol, atol, label + " running_mean");
      expect_close(rv, decode(c["running_var_after"], device), rtol, atol, label + " running_var");
    }
  }
}

#define MINIDL_REQUIRE_GOLDEN() \
  MINIDL_REQUIRE_GOLDEN_FILE(golden(), "normalization_golden.json", "gen_normalization_golden.py")

TEST(NormalizationGolden, MatchesPyTorchOnCpu) {
  MINIDL_REQUIRE_GOLDEN();
  check_golden_on(Device("cpu"));
}

TEST(NormalizationGolden, MatchesPyTorchOnGpu) {
  MINIDL_REQUIRE_GOLDEN();
  MINIDL_REQUIRE_GPU();
  check_golden_on(Device("cuda"));
}

}  // namespace
