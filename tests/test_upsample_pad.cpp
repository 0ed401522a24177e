// F::pad (every mode) with ZeroPad2d / ConstantPad2d / ReflectionPad2d / ReplicationPad2d, F::interpolate and
// nn::Upsample (nearest, linear, bilinear with and without align_corners, size or scale_factor), and
// pixel_shuffle / pixel_unshuffle: values against direct evaluations of the definitions, float64 gradcheck,
// non-contiguous and empty inputs, printing, typed errors of bad arguments, CPU against GPU (skips without a
// device), and PyTorch's results from tests/golden/upsample_pad_golden.json (gen_upsample_pad_golden.py).
#include <cmath>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "golden_file.h"
#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

namespace {

/// out[idx] = x[src(idx)] or `fill` where src gives -1, for a source index per dim: the shape of the result and a
/// map from an output dim's index to the input's (per dim).
Tensor gather_by(const Tensor& x_in, const Shape& out_shape,
                 const std::function<std::int64_t(std::int64_t dim, std::int64_t i)>& src, double fill) {
  const Tensor x = x_in.detach().to(kFloat64).contiguous();
  const std::vector<double> xv = x.to_vector<double>();
  std::int64_t total = 1;
  for (std::int64_t s : out_shape) total *= s;
  std::vector<double> out(static_cast<std::size_t>(total));
  const std::int64_t nd = static_cast<std::int64_t>(out_shape.size());
  for (std::int64_t e = 0; e < total; ++e) {
    std::int64_t rest = e, offset = 0, stride = 1;
    bool inside = true;
    for (std::int64_t d = nd - 1; d >= 0; --d) {
      const std::int64_t i = rest % out_shape[d];
      rest /= out_shape[d];
      const std::int64_t s = src(d, i);
      if (s < 0) inside = false;
      offset += s * stride;
      stride *= x.size(d);
    }
    out[e] = inside ? xv[offset] : fill;
  }
  return from_vector(out, out_shape).to(x_in.dtype());
}

/// The padded shape and, per dim, the input index an output index reads in `mode` (-1: the constant).
Tensor reference_pad(const Tensor& x, const std::vector<std::int64_t>& pad, const std::string& mode, double value) {
  Shape shape = x.sizes();
  const std::int64_t nd = x.dim();
  std::vector<std::int64_t> left(nd, 0);
  for (std::size_t k = 0; k < pad.size() / 2; ++k) {
    const std::int64_t d = nd - 1 - static_cast<std::int64_t>(k);
    left[d] = pad[2 * k];
    shape[d] += pad[2 * k] + pad[2 * k + 1];
  }
  return gather_by(
      x, shape,
      [&](std::int64_t d, std::int64_t i) -> std::int64_t {
        const std::int64_t L = x.size(d);
        std::int64_t j = i - left[d];
        if (mode == "constant") return j >= 0 && j < L ? j : -1;
        if (mode == "reflect") return j < 0 ? -j : (j >= L ? 2 * (L - 1) - j : j);
        if (mode == "replicate") return j < 0 ? 0 : (j >= L ? L - 1 : j);
        return ((j % L) + L) % L;  // circular
      },
      value);
}

F::PadFuncOptions pad_options(const std::vector<std::int64_t>& pad, const std::string& mode, double value = 0) {
  F::PadFuncOptions o(pad);
  if (mode == "constant") o.mode(kConstant).value(value);
  if (mode == "reflect") o.mode(kReflect);
  if (mode == "replicate") o.mode(kReplicate);
  if (mode == "circular") o.mode(kCircular);
  return o;
}

const char* const kModes[] = {"constant", "reflect", "replicate", "circular"};

}  // namespace

// ---- pad ---------------------------------------------------------------------------------------------------------

TEST(Pad, EveryModeMatchesTheDefinition) {
  const std::vector<std::vector<std::int64_t>> pads = {{1, 2}, {2, 0, 1, 3}, {0, 0, 3, 1}, {1, 1, 1, 1, 1, 0}};
  for (DType dt : {kFloat32, kFloat64}) {
    for (const char* mode : kModes) {
      for (const auto& pad : pads) {
        const Tensor x = random_tensor({2, 3, 4, 5}, dt);
        const std::string what = detail::str("pad ", mode, " ", shape_str(Shape(pad)), " ", dtype_name(dt));
        const Tensor y = F::pad(x, pad_options(pad, mode, 0.75));
        EXPECT_EQ(y.dtype(), dt) << what;
        expect_close(y, reference_pad(x, pad, mode, 0.75), 0, 0, what);
      }
    }
  }
  // Constant padding of an integer tensor, and negative sizes, which crop.
  const Tensor xi = (randint(100, {2, 5, 6}, TensorOptions(kInt64)) - 50);
  expect_close(F::pad(xi, pad_options({1, 1, 2, 0}, "constant", 7)), reference_pad(xi, {1, 1, 2, 0}, "constant", 7), 0,
               0, "int64");
  const Tensor x = random_tensor({2, 5, 6}, kFloat64);
  const Tensor cropped = F::pad(x, pad_options({-1, 2, 1, -3}, "constant", -2));
  EXPECT_EQ(cropped.sizes(), Shape({2, 3, 7}));
  expect_close(cropped, reference_pad(x, {-1, 2, 1, -3}, "constant", -2), 0, 0, "crop");
}

TEST(Pad, Gradcheck) {
  for (const char* mode : kModes) {
    for (const std::vector<std::int64_t>& pad :
         std::vector<std::vector<std::int64_t>>{{2, 1}, {1, 2, 3, 0}, {0, 1, 2, 2}}) {
      const Tensor x = random_tensor({2, 2, 4, 5}, kFloat64, true);
      EXPECT_TRUE(
          gradcheck([&](const std::vector<Tensor>& t) { return F::pad(t[0], pad_options(pad, mode, 0.5)); }, {x}))
          << mode << " " << shape_str(Shape(pad));
    }
  }
  const Tensor x = random_tensor({2, 4, 5}, kFloat64, true);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& t) {
        return F::pad(t[0], pad_options({-1, 2, 1, -2}, "constant"));
      },
      {x}));
}

TEST(Pad, NonContiguousAndEmptyInputs) {
  for (const char* mode : kModes) {
    const Tensor base = random_tensor({2, 5, 4, 3}, kFloat64);
    const Tensor x = base.permute({0, 3, 2, 1}).narrow(3, 1, 4);  // (2, 3, 4, 4), strided
    ASSERT_FALSE(x.is_contiguous());
    expect_close(F::pad(x, pad_options({1, 2, 2, 1}, mode)), reference_pad(x, {1, 2, 2, 1}, mode, 0), 0, 0,
                 std::string("strided ") + mode);
    const Tensor e = random_tensor({0, 3, 4, 4}, kFloat32, true);
    const Tensor y = F::pad(e, pad_options({1, 2, 2, 1}, mode));
    EXPECT_EQ(y.sizes(), Shape({0, 3, 7, 7})) << mode;
    y.sum().backward();
    EXPECT_EQ(e.grad().sizes(), e.sizes()) << mode;
  }
}

TEST(Pad, Modules) {
  const Tensor x = random_tensor({2, 3, 4, 5}, kFloat32);
  expect_close(nn::ZeroPad2d(2)(x), F::pad(x, F::PadFuncOptions({2, 2, 2, 2})), 0, 0, "ZeroPad2d");
  expect_close(nn::ConstantPad2d(nn::ConstantPad2dOptions({1, 0, 2, 3}, 1.5))(x),
               reference_pad(x, {1, 0, 2, 3}, "constant", 1.5), 0, 0, "ConstantPad2d");
  expect_close(nn::ReflectionPad2d(nn::ReflectionPad2dOptions({1, 2, 3, 0}))(x),
               reference_pad(x, {1, 2, 3, 0}, "reflect", 0), 0, 0, "ReflectionPad2d");
  expect_close(nn::ReplicationPad2d(nn::ReplicationPad2dOptions({3, 1, 0, 2}))(x.select(0, 1)),
               reference_pad(x.select(0, 1), {3, 1, 0, 2}, "replicate", 0), 0, 0, "ReplicationPad2d on (C, H, W)");
  std::ostringstream os;
  os << nn::ReflectionPad2d(nn::ReflectionPad2dOptions({1, 2, 3, 0})) << " " << nn::ConstantPad2d(1, 0.5) << " "
     << nn::ZeroPad2d(2);
  EXPECT_EQ(os.str(),
            "ReflectionPad2d(padding=(1, 2, 3, 0)) ConstantPad2d(padding=(1, 1, 1, 1), value=0.5) "
            "ZeroPad2d(padding=(2, 2, 2, 2))");
  EXPECT_ERROR(ValueError, nn::ZeroPad2d(1)(random_tensor({4, 5}, kFloat32)), "ZeroPad2d", "[4, 5]");
  EXPECT_ERROR(ValueError, nn::ZeroPad2dOptions({1, 2}), "padding", "found 2");
}

TEST(Pad, BadInput) {
  const Tensor x = random_tensor({1, 2, 3, 4}, kFloat32);
  EXPECT_ERROR(ValueError, F::pad(x, pad_options({4, 0}, "reflect")), "pad", "kReflect", "(4, 0)", "size 4");
  EXPECT_EQ(F::pad(x, pad_options({3, 3}, "reflect")).size(3), 10);
  EXPECT_ERROR(ValueError, F::pad(x, pad_options({0, 0, 1, 3}, "reflect")), "pad", "kReflect", "size 3");
  EXPECT_ERROR(ValueError, F::pad(x, pad_options({5, 0}, "circular")), "pad", "kCircular", "size 4");
  EXPECT_ERROR(ValueError, F::pad(x, pad_options({-1, 0}, "replicate")), "pad", "kReplicate", ">= 0");
  EXPECT_ERROR(ValueError, F::pad(x, pad_options({1, 2, 3}, "constant")), "pad", "pair", "3 sizes");
  EXPECT_ERROR(ValueError, F::pad(x, pad_options({1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, "constant")), "pad",
               "at most 4 pairs");
  EXPECT_ERROR(ValueError, F::pad(x, pad_options({-3, -2}, "constant")), "pad", "crops", "size 4");
  EXPECT_ERROR(ValueError, F::pad(random_tensor({1, 0, 3}, kFloat32), pad_options({0, 0, 1, 1}, "replicate")), "pad",
               "kReplicate");
}

// ---- interpolate ---------------------------------------------------------------------------------------------------

namespace {

/// PyTorch's coordinate rules, written out again for the test (nearest in float, as PyTorch; linear in float64).
struct Taps {
  std::vector<std::int64_t> i0, i1;
  std::vector<double> l1;
};
Taps taps(std::int64_t in, std::int64_t out, double scale, bool linear, bool align) {
  Taps t;
  for (std::int64_t o = 0; o < out; ++o) {
    if (!linear) {
      std::int64_t i = o;
      if (out == 2 * in) i = o / 2;
      if (out != in && out != 2 * in) {
        const float s = scale > 0 ? static_cast<float>(1.0 / scale) : static_cast<float>(in) / static_cast<float>(out);
        i = std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(static_cast<float>(o) * s)), in - 1);
      }
      t.i0.push_back(i);
      t.i1.push_back(i);
      t.l1.push_back(0);
      continue;
    }
    double src;
    if (align) {
      src = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) * static_cast<double>(o) : 0.0;
    } else {
      const double s = scale > 0 ? 1.0 / scale : static_cast<double>(in) / static_cast<double>(out);
      src = std::max(s * (static_cast<double>(o) + 0.5) - 0.5, 0.0);
    }
    const std::int64_t i0 = std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(src)), in - 1);
    t.i0.push_back(i0);
    t.i1.push_back(std::min(i0 + 1, in - 1));
    t.l1.push_back(std::min(std::max(src - static_cast<double>(i0), 0.0), 1.0));
  }
  return t;
}

/// (N, C, H, W) (or (N, C, L), as H = 1) upsampled by the taps of each axis.
Tensor reference_interpolate(const Tensor& x_in, std::int64_t ho, std::int64_t wo, double sh, double sw, bool linear,
                             bool align) {
  const bool one_d = x_in.dim() == 3;
  const Tensor x = (one_d ? x_in.unsqueeze(2) : x_in).detach().to(kFloat64).contiguous();
  const std::int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const Taps th = taps(H, ho, sh, linear, align), tw = taps(W, wo, sw, linear, align);
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> out;
  for (std::int64_t p = 0; p < P; ++p)
    for (std::int64_t oh = 0; oh < ho; ++oh)
      for (std::int64_t ow = 0; ow < wo; ++ow) {
        const auto at = [&](std::int64_t h, std::int64_t w) { return xv[(p * H + h) * W + w]; };
        const double a = th.l1[oh], b = tw.l1[ow];
        out.push_back((1 - a) * ((1 - b) * at(th.i0[oh], tw.i0[ow]) + b * at(th.i0[oh], tw.i1[ow])) +
                      a * ((1 - b) * at(th.i1[oh], tw.i0[ow]) + b * at(th.i1[oh], tw.i1[ow])));
      }
  Shape shape{x.size(0), x.size(1)};
  if (!one_d) shape.push_back(ho);
  shape.push_back(wo);
  return from_vector(out, shape).to(x_in.dtype());
}

struct ICase {
  std::string mode;  // nearest, linear, bilinear
  Shape in;
  std::vector<std::int64_t> size;  // empty: scale_factor
  std::vector<double> scale;
  std::optional<bool> align;
  bool recompute = false;
};

F::InterpolateFuncOptions options_of(const ICase& c) {
  F::InterpolateFuncOptions o;
  if (c.mode == "nearest") o.mode(kNearest);
  if (c.mode == "linear") o.mode(kLinear);
  if (c.mode == "bilinear") o.mode(kBilinear);
  if (!c.size.empty()) o.size(c.size);
  if (!c.scale.empty()) o.scale_factor(c.scale);
  o.align_corners(c.align);
  if (c.recompute) o.recompute_scale_factor(true);
  return o;
}

std::string str(const ICase& c) {
  std::string s = c.mode + " " + shape_str(c.in);
  if (!c.size.empty()) s += " size " + shape_str(Shape(c.size));
  for (double f : c.scale) s += " x" + std::to_string(f);
  if (c.align.has_value()) s += *c.align ? " align_corners" : " !align_corners";
  if (c.recompute) s += " recompute";
  return s;
}

const ICase kICases[] = {
    {"nearest", {2, 3, 4, 5}, {}, {2.0}, {}},
    {"nearest", {2, 3, 4, 5}, {7, 3}, {}, {}},
    {"nearest", {1, 2, 5, 6}, {}, {1.7, 0.6}, {}},
    {"nearest", {1, 2, 5, 6}, {}, {1.7, 0.6}, {}, true},
    {"nearest", {2, 3, 7}, {}, {2.5}, {}},
    {"nearest", {2, 3, 7}, {4}, {}, {}},
    {"linear", {2, 3, 6}, {}, {2.0}, {}},
    {"linear", {2, 3, 6}, {13}, {}, true},
    {"linear", {2, 3, 9}, {4}, {}, false},
    {"bilinear", {2, 3, 4, 5}, {}, {2.0}, {}},
    {"bilinear", {2, 3, 4, 5}, {}, {2.0}, true},
    {"bilinear", {1, 2, 5, 4}, {8, 11}, {}, false},
    {"bilinear", {1, 2, 5, 4}, {8, 11}, {}, true},
    {"bilinear", {1, 2, 6, 7}, {}, {1.5, 0.5}, false},
    {"bilinear", {1, 2, 6, 7}, {}, {1.5, 0.5}, false, true},
    {"bilinear", {1, 2, 6, 7}, {3, 1}, {}, true},
};

Tensor reference_for(const ICase& c, const Tensor& x) {
  const bool one_d = x.dim() == 3;
  std::vector<std::int64_t> out;
  std::vector<double> sc;
  for (std::int64_t d = 2; d < x.dim(); ++d) {
    const std::size_t k = static_cast<std::size_t>(d - 2);
    if (!c.size.empty()) {
      out.push_back(c.size.size() == 1 ? c.size[0] : c.size[k]);
      sc.push_back(0);
    } else {
      const double f = c.scale.size() == 1 ? c.scale[0] : c.scale[k];
      out.push_back(static_cast<std::int64_t>(std::floor(static_cast<double>(x.size(d)) * f)));
      sc.push_back(c.recompute ? 0 : f);
    }
  }
  const bool linear = c.mode != "nearest", align = c.align.value_or(false);
  return one_d ? reference_interpolate(x, 1, out[0], 0, sc[0], linear, align)
               : reference_interpolate(x, out[0], out[1], sc[0], sc[1], linear, align);
}

}  // namespace

TEST(Interpolate, MatchesTheDefinition) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (const ICase& c : kICases) {
      const Tensor x = random_tensor(c.in, dt);
      const Tensor y = F::interpolate(x, options_of(c));
      EXPECT_EQ(y.dtype(), dt);
      const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
      expect_close(y, reference_for(c, x), tol, tol, str(c) + " " + dtype_name(dt));
    }
  }
}

TEST(Interpolate, KnownValues) {
  // Nearest x2 repeats every element into a 2x2 block.
  const Tensor x = random_tensor({2, 3, 4, 5}, kFloat32);
  const Tensor y = F::interpolate(x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2}));
  expect_close(y, x.unsqueeze(3).unsqueeze(5).expand({2, 3, 4, 2, 5, 2}).reshape({2, 3, 8, 10}), 0, 0, "nearest x2");
  // Bilinear with align_corners reproduces a plane a*h + b*w + c sampled at the output's coordinates.
  const std::int64_t H = 4, W = 6, Ho = 7, Wo = 16;
  const Tensor h = arange(H, TensorOptions(kFloat64)).view({1, 1, H, 1}), w = arange(W, TensorOptions(kFloat64));
  const Tensor plane = (h * 0.75 - w.view({1, 1, 1, W}) * 1.25 + 0.5).expand({1, 1, H, W}).contiguous();
  const Tensor ho = arange(Ho, TensorOptions(kFloat64)).view({1, 1, Ho, 1}) * (double(H - 1) / (Ho - 1));
  const Tensor wo = arange(Wo, TensorOptions(kFloat64)).view({1, 1, 1, Wo}) * (double(W - 1) / (Wo - 1));
  const Tensor want = (ho * 0.75 - wo * 1.25 + 0.5).expand({1, 1, Ho, Wo});
  expect_close(
      F::interpolate(
          plane,
          F::InterpolateFuncOptions().size(std::vector<std::int64_t>{Ho, Wo}).mode(kBilinear).align_corners(true)),
      want, 1e-12, 1e-12, "bilinear plane");
}

TEST(Interpolate, Gradcheck) {
  for (const ICase& c : kICases) {
    const Tensor x = random_tensor(c.in, kFloat64, true);
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& t) { return F::interpolate(t[0], options_of(c)); }, {x}))
        << str(c);
  }
}

TEST(Interpolate, NonContiguousAndEmptyInputs) {
  for (const ICase& c : kICases) {
    Shape wide = c.in;
    wide.back() *= 2;
    const Tensor x = random_tensor(wide, kFloat64).narrow(-1, 1, c.in.back());
    ASSERT_FALSE(x.is_contiguous());
    expect_close(F::interpolate(x, options_of(c)), reference_for(c, x), 1e-12, 1e-12, "strided " + str(c));
    Shape none = c.in;
    none[0] = 0;
    const Tensor e = random_tensor(none, kFloat32, true);
    const Tensor y = F::interpolate(e, options_of(c));
    EXPECT_EQ(y.numel(), 0) << str(c);
    EXPECT_EQ(y.size(0), 0) << str(c);
    y.sum().backward();
    EXPECT_EQ(e.grad().sizes(), e.sizes()) << str(c);
  }
}

TEST(Interpolate, UpsampleModule) {
  const Tensor x = random_tensor({2, 3, 4, 5}, kFloat32);
  nn::Upsample up(nn::UpsampleOptions().scale_factor(std::vector<double>{2, 3}).mode(kBilinear).align_corners(true));
  expect_close(
      up(x),
      F::interpolate(
          x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 3}).mode(kBilinear).align_corners(true)),
      0, 0, "Upsample");
  nn::Upsample near(nn::UpsampleOptions().size(std::vector<std::int64_t>{6, 6}));
  EXPECT_EQ(near(x).sizes(), Shape({2, 3, 6, 6}));
  std::ostringstream os;
  os << up << " " << near;
  EXPECT_EQ(os.str(), "Upsample(scale_factor=[2, 3], mode=kBilinear) Upsample(size=[6, 6], mode=kNearest)");
}

TEST(Interpolate, BadInput) {
  const Tensor x = random_tensor({1, 2, 4, 4}, kFloat32);
  using O = F::InterpolateFuncOptions;
  EXPECT_ERROR(ValueError,
               F::interpolate(x, O().size(std::vector<std::int64_t>{8, 8}).scale_factor(std::vector<double>{2})),
               "interpolate", "only one of size and scale_factor");
  EXPECT_ERROR(ValueError, F::interpolate(x, O()), "interpolate", "size or scale_factor");
  EXPECT_ERROR(ValueError, F::interpolate(x, O().scale_factor(std::vector<double>{2}).align_corners(false)),
               "interpolate", "align_corners", "kNearest");
  EXPECT_ERROR(ValueError, F::interpolate(x, O().scale_factor(std::vector<double>{2}).mode(kLinear)), "interpolate",
               "kLinear", "(N, C, L)", "[1, 2, 4, 4]");
  EXPECT_ERROR(ValueError, F::interpolate(x.view({2, 4, 4}), O().scale_factor(std::vector<double>{2}).mode(kBilinear)),
               "interpolate", "kBilinear", "(N, C, H, W)");
  EXPECT_ERROR(ValueError, F::interpolate(x, O().size(std::vector<std::int64_t>{2, 2, 2})), "interpolate", "size",
               "1 or 2 values", "found 3");
  EXPECT_ERROR(ValueError, F::interpolate(x, O().scale_factor(std::vector<double>{0.1})), "interpolate", "scale_factor",
               "at least 1");
  EXPECT_ERROR(ValueError, F::interpolate(x, O().size(std::vector<std::int64_t>{0, 3})), "interpolate", "size",
               "positive");
  EXPECT_ERROR(TypeError, F::interpolate(x.to(kInt64), O().scale_factor(std::vector<double>{2})), "interpolate");
}

// ---- pixel shuffle -------------------------------------------------------------------------------------------------

namespace {
/// out[..., c, h*r + i, w*r + j] = x[..., c*r*r + i*r + j, h, w], in float64 on the host.
Tensor reference_shuffle(const Tensor& x_in, std::int64_t r) {
  const Tensor x = x_in.detach().to(kFloat64).contiguous();
  const std::int64_t d = x.dim(), C = x.size(d - 3), H = x.size(d - 2), W = x.size(d - 1), oc = C / (r * r);
  const std::int64_t B = x.numel() / (C * H * W);
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> out(xv.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t c = 0; c < oc; ++c)
      for (std::int64_t h = 0; h < H * r; ++h)
        for (std::int64_t w = 0; w < W * r; ++w)
          out[((b * oc + c) * H * r + h) * W * r + w] =
              xv[((b * C + c * r * r + (h % r) * r + (w % r)) * H + h / r) * W + w / r];
  Shape shape = x.sizes();
  shape[d - 3] = oc;
  shape[d - 2] = H * r;
  shape[d - 1] = W * r;
  return from_vector(out, shape).to(x_in.dtype());
}
}  // namespace

TEST(PixelShuffle, MatchesTheDefinitionRoundTripsAndGradchecks) {
  for (const Shape& shape : {Shape{2, 8, 3, 4}, Shape{18, 2, 3}, Shape{2, 1, 9, 2, 2}}) {
    const std::int64_t r = shape[shape.size() - 3] % 9 == 0 ? 3 : 2;
    const Tensor x = random_tensor(shape, kFloat32);
    const Tensor y = nn::PixelShuffle(r)(x);
    expect_close(y, reference_shuffle(x, r), 0, 0, "pixel_shuffle " + shape_str(shape));
    expect_close(nn::PixelUnshuffle(r)(y), x, 0, 0, "round trip " + shape_str(shape));
    expect_close(F::pixel_shuffle(x.transpose(-1, -2).contiguous().transpose(-1, -2), r), y, 0, 0, "strided");
    const Tensor xd = random_tensor(shape, kFloat64, true);
    EXPECT_TRUE(gradcheck([r](const std::vector<Tensor>& t) { return F::pixel_shuffle(t[0], r); }, {xd}));
    EXPECT_TRUE(gradcheck([r](const std::vector<Tensor>& t) { return F::pixel_unshuffle(t[0], r); },
                          {random_tensor(y.sizes(), kFloat64, true)}));
  }
  EXPECT_EQ(F::pixel_shuffle(random_tensor({0, 8, 3, 3}, kFloat32), 2).sizes(), Shape({0, 2, 6, 6}));
  std::ostringstream os;
  os << nn::PixelShuffle(2) << " " << nn::PixelUnshuffle(nn::PixelUnshuffleOptions(3));
  EXPECT_EQ(os.str(), "PixelShuffle(upscale_factor=2) PixelUnshuffle(downscale_factor=3)");
}

TEST(PixelShuffle, BadInput) {
  EXPECT_ERROR(ValueError, F::pixel_shuffle(random_tensor({1, 6, 2, 2}, kFloat32), 2), "pixel_shuffle", "channels (6)",
               "(4)");
  EXPECT_ERROR(ValueError, F::pixel_shuffle(random_tensor({4, 4}, kFloat32), 2), "pixel_shuffle", "(*, C, H, W)");
  EXPECT_ERROR(ValueError, F::pixel_shuffle(random_tensor({1, 4, 2, 2}, kFloat32), 0), "pixel_shuffle",
               "upscale_factor");
  EXPECT_ERROR(ValueError, F::pixel_unshuffle(random_tensor({1, 1, 3, 4}, kFloat32), 2), "pixel_unshuffle", "(3, 4)");
}

// ---- CPU against GPU ---------------------------------------------------------------------------------------------

TEST(UpsamplePadGpu, AgreesWithTheCpu) {
  MINIDL_REQUIRE_GPU();
  const Device gpu("cuda");
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
    for (const ICase& c : kICases) {
      const Tensor x = random_tensor(c.in, dt, true);
      const Tensor xg = x.detach().to(gpu).requires_grad_(true);
      const Tensor y = F::interpolate(x, options_of(c)), yg = F::interpolate(xg, options_of(c));
      const Tensor up = random_tensor(y.sizes(), dt);
      (y * up).sum().backward();
      (yg * up.to(gpu)).sum().backward();
      expect_close(yg, y, tol, tol, str(c) + " output " + dtype_name(dt));
      expect_close(xg.grad(), x.grad(), tol, tol, str(c) + " input grad " + dtype_name(dt));
    }
    for (const char* mode : kModes) {
      const Tensor x = random_tensor({2, 3, 4, 5}, dt);
      expect_close(F::pad(x.to(gpu), pad_options({1, 2, 3, 1}, mode, 0.5)),
                   F::pad(x, pad_options({1, 2, 3, 1}, mode, 0.5)), 0, 0, std::string("pad ") + mode);
    }
    const Tensor x = random_tensor({2, 8, 3, 5}, dt);
    expect_close(F::pixel_shuffle(x.to(gpu), 2), F::pixel_shuffle(x, 2), 0, 0, "pixel_shuffle");
  }
  // Large enough for many blocks, with a downscale whose inputs mostly have no reader.
  const Tensor big = random_tensor({4, 16, 61, 67}, kFloat32, true);
  const Tensor bigg = big.detach().to(gpu).requires_grad_(true);
  const auto o = F::InterpolateFuncOptions().size(std::vector<std::int64_t>{29, 131}).mode(kBilinear);
  const Tensor y = F::interpolate(big, o), yg = F::interpolate(bigg, o);
  const Tensor up = random_tensor(y.sizes(), kFloat32);
  (y * up).sum().backward();
  (yg * up.to(gpu)).sum().backward();
  expect_close(yg, y, 1e-5, 1e-5, "large output");
  expect_close(bigg.grad(), big.grad(), 1e-5, 1e-5, "large input grad");
}

// ---- golden against PyTorch -------------------------------------------------------------------------------------

namespace {
using json = nlohmann::json;

const json& golden() {
  static const json g = minidl::testing::read_golden("upsample_pad_golden.json");
  return g;
}

Tensor decode(const json& t, Device device) {
  std::vector<double> v;
  for (const json& e : t["values"]) v.push_back(minidl::testing::golden_number(e));
  return from_vector(v, t["shape"].get<std::vector<std::int64_t>>())
      .to(minidl::testing::dtype_named(t["dtype"]))
      .to(device);
}

Tensor golden_op(const std::string& op, const json& p, const Tensor& x) {
  if (op == "pad") {
    return F::pad(x, pad_options(p["pad"].get<std::vector<std::int64_t>>(), p["mode"], p["value"]));
  }
  if (op == "interpolate") {
    ICase c{p["mode"], x.sizes(), {}, {}, {}};
    if (!p["size"].is_null()) c.size = p["size"].get<std::vector<std::int64_t>>();
    if (!p["scale_factor"].is_null()) c.scale = p["scale_factor"].get<std::vector<double>>();
    if (!p["align_corners"].is_null()) c.align = p["align_corners"].get<bool>();
    c.recompute = p["recompute_scale_factor"].get<bool>();
    return F::interpolate(x, options_of(c));
  }
  if (op == "pixel_shuffle") return F::pixel_shuffle(x, p["factor"].get<std::int64_t>());
  if (op == "pixel_unshuffle") return F::pixel_unshuffle(x, p["factor"].get<std::int64_t>());
  throw ValueError("unknown golden op " + op);
}

void expect_golden(Device device) {
  std::size_t n = 0;
  for (const json& c : golden()["cases"]) {
    const std::string op = c["op"];
    const Tensor x = decode(c["input"], device).requires_grad_(true);
    const Tensor y = golden_op(op, c["params"], x);
    const std::string what = op + " case " + std::to_string(n++) + " " + c["params"].dump();
    const double tol = x.dtype() == kFloat32 ? 1e-5 : 1e-12;
    expect_close(y, decode(c["output"], device), tol, tol, what + " output");
    y.backward(decode(c["grad_output"], device));
    expect_close(x.grad(), decode(c["grad"], device), tol, tol, what + " grad");
  }
  EXPECT_GT(n, 0u);
}
}  // namespace

#define MINIDL_REQUIRE_GOLDEN() \
  MINIDL_REQUIRE_GOLDEN_FILE(golden(), "upsample_pad_golden.json", "gen_upsample_pad_golden.py")

TEST(UpsamplePadGolden, MatchesPyTorchOnTheCpu) {
  MINIDL_REQUIRE_GOLDEN();
  expect_golden(Device(kCPU));
}

TEST(UpsamplePadGolden, MatchesPyTorchOnTheGpu) {
  MINIDL_REQUIRE_GOLDEN();
  MINIDL_REQUIRE_GPU();
  expect_golden(Device(kCUDA));
}
