// ConvTranspose2d / conv_transpose2d, Conv1d / conv1d and ConvTranspose1d / conv_transpose1d: values against a
// direct evaluation of the definitions (loops in float64), float64 gradcheck over strides, paddings, output_padding,
// dilation and groups, non-contiguous and empty inputs, the modules (shapes, PyTorch's initialisation bounds,
// printing, forward with output_size), typed errors of bad arguments, CPU against GPU (skips without a device),
// and PyTorch's results from tests/golden/conv_transpose_golden.json (gen_conv_transpose_golden.py).
#include <cmath>
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

struct TCase {
  std::int64_t n, cin, cout, h, w;
  nn::ExpandingArray2 kernel, stride, padding, output_padding;
  std::int64_t groups;
  nn::ExpandingArray2 dilation;
  bool bias;
};

std::string str(const TCase& c) {
  return detail::str("conv_transpose2d(N=", c.n, ", Cin=", c.cin, ", Cout=", c.cout, ", ", c.h, "x", c.w,
                     ", kernel=", c.kernel.h, "x", c.kernel.w, ", stride=", c.stride.h, "x", c.stride.w,
                     ", padding=", c.padding.h, "x", c.padding.w, ", output_padding=", c.output_padding.h, "x",
                     c.output_padding.w, ", groups=", c.groups, ", dilation=", c.dilation.h, "x", c.dilation.w,
                     ", bias=", c.bias, ")");
}

// Strides, paddings, output_padding (below the stride, and at or above it where the dilation allows), dilation,
// groups, non-square everything.
const TCase kCases[] = {
    {2, 3, 2, 4, 5, 3, 1, 0, 0, 1, 1, true},
    {1, 2, 3, 3, 4, 3, 2, 1, 1, 1, 1, true},
    {2, 4, 6, 3, 3, {2, 3}, {2, 3}, {0, 1}, {1, 2}, 2, 1, false},
    {1, 2, 2, 4, 3, 2, 1, 1, 0, 1, 2, true},
    {2, 4, 4, 3, 4, 3, {3, 2}, {2, 1}, {2, 1}, 4, {1, 2}, true},
    {1, 3, 2, 3, 3, 2, 1, 0, 1, 1, 2, true},                  // output_padding 1 >= stride 1, below dilation 2
    {1, 2, 4, 2, 3, 2, {1, 2}, 0, {2, 1}, 2, {3, 1}, false},  // output_padding 2 >= stride 1, below dilation 3
};

/// The definition: out[n, co, i*sh - ph + r*dh, j*sw - pw + s*dw] += x[n, ci, i, j] * w[ci, co - g*Cout/G, r, s]
/// for ci in co's group, in float64 on the host.
Tensor reference(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, nn::ExpandingArray2 st,
                 nn::ExpandingArray2 pd, nn::ExpandingArray2 op, std::int64_t groups, nn::ExpandingArray2 dl) {
  const Tensor x = x_in.detach().cpu().to(kFloat64).contiguous(), w = w_in.detach().cpu().to(kFloat64).contiguous();
  const std::int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const std::int64_t Cog = w.size(1), R = w.size(2), S = w.size(3), Cout = Cog * groups, Cig = Cin / groups;
  const std::int64_t Ho = (H - 1) * st.h - 2 * pd.h + dl.h * (R - 1) + op.h + 1;
  const std::int64_t Wo = (W - 1) * st.w - 2 * pd.w + dl.w * (S - 1) + op.w + 1;
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> out(static_cast<std::size_t>(N * Cout * Ho * Wo), 0.0);
  if (b_in.defined()) {
    const std::vector<double> bv = b_in.detach().cpu().to(kFloat64).to_vector<double>();
    for (std::int64_t i = 0; i < N * Cout * Ho * Wo; ++i) out[i] = bv[(i / (Ho * Wo)) % Cout];
  }
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t ci = 0; ci < Cin; ++ci)
      for (std::int64_t co = 0; co < Cog; ++co)
        for (std::int64_t i = 0; i < H; ++i)
          for (std::int64_t j = 0; j < W; ++j)
            for (std::int64_t r = 0; r < R; ++r)
              for (std::int64_t s = 0; s < S; ++s) {
                const std::int64_t oh = i * st.h - pd.h + r * dl.h, ow = j * st.w - pd.w + s * dl.w;
                if (oh < 0 || oh >= Ho || ow < 0 || ow >= Wo) continue;
                const std::int64_t oc = (ci / Cig) * Cog + co;
                out[((n * Cout + oc) * Ho + oh) * Wo + ow] +=
                    xv[((n * Cin + ci) * H + i) * W + j] * wv[((ci * Cog + co) * R + r) * S + s];
              }
  return from_vector(out, {N, Cout, Ho, Wo});
}

Tensor run(const TCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  return F::conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
}

}  // namespace

TEST(ConvTranspose2d, MatchesTheDefinition) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (const TCase& c : kCases) {
      const Tensor x = random_tensor({c.n, c.cin, c.h, c.w}, dt);
      const Tensor w = random_tensor({c.cin, c.cout / c.groups, c.kernel.h, c.kernel.w}, dt);
      const Tensor b = c.bias ? random_tensor({c.cout}, dt) : Tensor();
      const Tensor y = run(c, x, w, b);
      EXPECT_EQ(y.dtype(), dt);
      const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
      expect_close(y, reference(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation), tol, tol,
                   str(c) + " " + dtype_name(dt));
    }
  }
}

TEST(ConvTranspose2d, Gradcheck) {
  for (const TCase& c : kCases) {
    const Tensor x = random_tensor({c.n, c.cin, c.h, c.w}, kFloat64, true);
    const Tensor w = random_tensor({c.cin, c.cout / c.groups, c.kernel.h, c.kernel.w}, kFloat64, true);
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(random_tensor({c.cout}, kFloat64, true));
    EXPECT_TRUE(
        gradcheck([&](const std::vector<Tensor>& t) { return run(c, t[0], t[1], c.bias ? t[2] : Tensor()); }, in))
        << str(c);
  }
}

TEST(ConvTranspose2d, NonContiguousInputs) {
  const TCase c{2, 4, 6, 3, 5, {2, 3}, 2, 1, 1, 2, 1, true};
  // x transposed in H and W, w sliced out of a wider tensor: both strided views.
  const Tensor xt = random_tensor({c.n, c.cin, c.w, c.h}, kFloat64, true);
  const Tensor x = xt.transpose(2, 3);
  const Tensor wide = random_tensor({c.cin, 2 * c.cout / c.groups, c.kernel.h, c.kernel.w}, kFloat64, true);
  const Tensor w = wide.narrow(1, 1, c.cout / c.groups);
  const Tensor b = random_tensor({2 * c.cout}, kFloat64).narrow(0, 0, c.cout * 2).view({c.cout, 2}).select(1, 1);
  ASSERT_FALSE(x.is_contiguous());
  ASSERT_FALSE(w.is_contiguous());
  ASSERT_FALSE(b.is_contiguous());
  expect_close(run(c, x, w, b), reference(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation), 1e-12,
               1e-12, "strided");
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& t) { return run(c, t[0].transpose(2, 3), t[1], b); },
                        {xt, w.detach().contiguous().requires_grad_(true)}));
}

TEST(ConvTranspose2d, EmptyBatch) {
  const Tensor x = random_tensor({0, 4, 3, 3}, kFloat32, true);
  nn::ConvTranspose2d m(nn::ConvTranspose2dOptions(4, 6, 3).stride(2).groups(2));
  const Tensor y = m(x);
  EXPECT_EQ(y.sizes(), Shape({0, 6, 7, 7}));
  y.sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  ASSERT_TRUE(m->weight.grad().defined());
  EXPECT_EQ(m->weight.grad().abs().sum().item<double>(), 0.0);
  EXPECT_EQ(m->bias.grad().abs().sum().item<double>(), 0.0);
}

TEST(ConvTranspose2d, ModuleShapesInitAndPrinting) {
  nn::ConvTranspose2d m(nn::ConvTranspose2dOptions(6, 4, {3, 2}).stride(2).padding(1).output_padding(1).groups(2));
  EXPECT_EQ(m->weight.sizes(), Shape({6, 2, 3, 2}));
  EXPECT_EQ(m->bias.sizes(), Shape({4}));
  // PyTorch: kaiming_uniform_(a=sqrt(5)) and a bias uniform in +-1/sqrt(fan_in), both with fan_in = 2*3*2 = 12.
  const double bound = 1.0 / std::sqrt(12.0);
  EXPECT_LE(m->weight.abs().max().item<double>(), bound);
  EXPECT_GT(m->weight.abs().max().item<double>(), bound / 2);
  EXPECT_LE(m->bias.abs().max().item<double>(), bound);
  const auto names = m->named_parameters();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "weight");
  EXPECT_EQ(names[1].first, "bias");
  std::ostringstream os;
  os << m;
  EXPECT_EQ(os.str(),
            "ConvTranspose2d(6, 4, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), "
            "groups=2)");
  std::ostringstream plain;
  plain << nn::ConvTranspose2d(nn::ConvTranspose2dOptions(2, 3, 3).dilation(2).bias(false));
  EXPECT_EQ(plain.str(), "ConvTranspose2d(2, 3, kernel_size=(3, 3), stride=(1, 1), dilation=(2, 2), bias=false)");
  EXPECT_FALSE(nn::ConvTranspose2d(nn::ConvTranspose2dOptions(2, 3, 3).bias(false))->bias.defined());
}

TEST(ConvTranspose2d, ForwardWithOutputSize) {
  nn::ConvTranspose2d m(nn::ConvTranspose2dOptions(3, 2, 3).stride(3).padding(1));
  const Tensor x = random_tensor({2, 3, 4, 5}, kFloat32);
  // The smallest output is (4-1)*3 - 2 + 3 = 10 x 13; output_size picks output_padding up to stride - 1.
  for (std::int64_t extra : {0, 1, 2}) {
    const Tensor y = m->forward(x, {10 + extra, 13 + 2 - extra});
    EXPECT_EQ(y.sizes(), Shape({2, 2, 10 + extra, 15 - extra}));
    expect_close(y, F::conv_transpose2d(x, m->weight, m->bias, 3, 1, {extra, 2 - extra}), 0, 0, "output_size");
  }
  EXPECT_EQ(m->forward(x, {2, 2, 11, 13}).sizes(), Shape({2, 2, 11, 13}));
  EXPECT_ERROR(ValueError, m->forward(x, {13, 13}), "ConvTranspose2d", "output_size", "(10, 13)", "(12, 15)");
  EXPECT_ERROR(ValueError, m->forward(x, {9, 13}), "ConvTranspose2d", "output_size");
  EXPECT_ERROR(ValueError, m->forward(x, {1, 9, 13}), "ConvTranspose2d", "output_size", "3 sizes");
}

TEST(ConvTranspose2d, BadInput) {
  const Tensor x = random_tensor({1, 4, 3, 3}, kFloat32);
  const Tensor w = random_tensor({4, 2, 3, 3}, kFloat32);
  EXPECT_ERROR(ValueError, F::conv_transpose2d(x, w, {}, 2, 0, 2), "conv_transpose2d", "output_padding", "stride",
               "dilation");
  EXPECT_ERROR(ValueError, F::conv_transpose2d(x, w, {}, 1, 0, 1, 1, 1), "conv_transpose2d", "output_padding");
  EXPECT_ERROR(ValueError, F::conv_transpose2d(random_tensor({1, 3, 3, 3}, kFloat32), w), "conv_transpose2d",
               "input channels", "[4, 2, 3, 3]", "[1, 3, 3, 3]");
  EXPECT_ERROR(ValueError, F::conv_transpose2d(x, w, {}, 1, 0, 0, 3), "conv_transpose2d", "groups (3)");
  EXPECT_ERROR(ValueError, F::conv_transpose2d(x, w, random_tensor({3}, kFloat32)), "conv_transpose2d", "bias", "[2]");
  EXPECT_ERROR(ValueError, F::conv_transpose2d(x.view({4, 3, 3}), w), "conv_transpose2d", "input", "[4, 3, 3]");
  EXPECT_ERROR(ValueError, F::conv_transpose2d(x, w.view({4, 2, 9})), "conv_transpose2d", "weight", "[4, 2, 9]");
  EXPECT_ERROR(ValueError, F::conv_transpose2d(x, w, {}, 0), "conv_transpose2d", "stride");
  EXPECT_ERROR(ValueError, F::conv_transpose2d(x, w, {}, 1, 3), "conv_transpose2d", "empty output");
  EXPECT_ERROR(TypeError, F::conv_transpose2d(x, w.to(kFloat64)), "conv_transpose2d");
  EXPECT_ERROR(TypeError, F::conv_transpose2d(x.to(kInt64), w.to(kInt64)), "conv_transpose2d");
  EXPECT_ERROR(ValueError, nn::ConvTranspose2d(nn::ConvTranspose2dOptions(3, 4, 3).groups(2)), "ConvTranspose2d",
               "groups (2)");
  EXPECT_ERROR(ValueError, nn::ConvTranspose2d(4, 4, 3)(random_tensor({1, 3, 5, 5}, kFloat32)), "conv_transpose2d",
               "input channels");
}

// ---- 1-d ---------------------------------------------------------------------------------------------------------

namespace {
/// conv1d by its definition: out[n, k, l] = b[k] + sum x[n, g*Cg + c, l*s - p + t*d] * w[k, c, t].
Tensor reference_conv1d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, std::int64_t st, std::int64_t pd,
                        std::int64_t dl, std::int64_t groups) {
  const Tensor x = x_in.detach().to(kFloat64).contiguous(), w = w_in.detach().to(kFloat64).contiguous();
  const std::int64_t N = x.size(0), C = x.size(1), L = x.size(2), K = w.size(0), Cg = w.size(1), T = w.size(2);
  const std::int64_t Lo = (L + 2 * pd - dl * (T - 1) - 1) / st + 1;
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> bv = b_in.defined() ? b_in.detach().to(kFloat64).to_vector<double>()
                                                : std::vector<double>(static_cast<std::size_t>(K), 0.0);
  std::vector<double> out;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t l = 0; l < Lo; ++l) {
        double acc = bv[k];
        for (std::int64_t c = 0; c < Cg; ++c)
          for (std::int64_t t = 0; t < T; ++t) {
            const std::int64_t i = l * st - pd + t * dl;
            if (i >= 0 && i < L) acc += xv[(n * C + (k / (K / groups)) * Cg + c) * L + i] * wv[(k * Cg + c) * T + t];
          }
        out.push_back(acc);
      }
  return from_vector(out, {N, K, Lo});
}
}  // namespace

TEST(Conv1d, MatchesTheDefinitionAndGradcheck) {
  struct C1 {
    std::int64_t n, c, k, l, kernel, stride, padding, dilation, groups;
    bool bias;
  };
  for (const C1& c : {C1{2, 3, 4, 9, 3, 1, 0, 1, 1, true}, C1{1, 4, 6, 11, 2, 2, 1, 1, 2, false},
                      C1{2, 2, 2, 10, 3, 3, 2, 2, 1, true}, C1{1, 4, 4, 7, 1, 1, 0, 1, 4, true}}) {
    const std::string what = detail::str("conv1d(", c.c, "->", c.k, ", L=", c.l, ", k=", c.kernel, ", s=", c.stride,
                                         ", p=", c.padding, ", d=", c.dilation, ", g=", c.groups, ")");
    nn::Conv1d m(nn::Conv1dOptions(c.c, c.k, c.kernel)
                     .stride(c.stride)
                     .padding(c.padding)
                     .dilation(c.dilation)
                     .groups(c.groups)
                     .bias(c.bias));
    EXPECT_EQ(m->weight.sizes(), Shape({c.k, c.c / c.groups, c.kernel})) << what;
    const Tensor x = random_tensor({c.n, c.c, c.l}, kFloat32);
    expect_close(m(x), reference_conv1d(x, m->weight, m->bias, c.stride, c.padding, c.dilation, c.groups), 1e-5, 1e-5,
                 what);
    const Tensor xd = random_tensor({c.n, c.c, c.l}, kFloat64, true);
    const Tensor wd = random_tensor({c.k, c.c / c.groups, c.kernel}, kFloat64, true);
    const Tensor bd = random_tensor({c.k}, kFloat64, true);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& t) {
          return F::conv1d(t[0], t[1], c.bias ? t[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
        },
        {xd, wd, bd}))
        << what;
    // A strided input: the (N, L, C) layout transposed.
    const Tensor xt = random_tensor({c.n, c.l, c.c}, kFloat64).transpose(1, 2);
    expect_close(F::conv1d(xt, wd, bd, c.stride, c.padding, c.dilation, c.groups),
                 reference_conv1d(xt, wd, bd, c.stride, c.padding, c.dilation, c.groups), 1e-12, 1e-12,
                 what + " strided");
  }
  std::ostringstream os;
  os << nn::Conv1d(nn::Conv1dOptions(4, 8, 3).stride(2).padding(1).bias(false));
  EXPECT_EQ(os.str(), "Conv1d(4, 8, kernel_size=(3,), stride=(2,), padding=(1,), bias=false)");
}

TEST(Conv1d, BadInput) {
  const Tensor x = random_tensor({1, 4, 8}, kFloat32);
  EXPECT_ERROR(ValueError, F::conv1d(x, random_tensor({2, 3, 3}, kFloat32)), "conv1d", "input channels", "[1, 4, 8]");
  EXPECT_ERROR(ValueError, F::conv1d(x.view({1, 4, 2, 4}), random_tensor({2, 4, 3}, kFloat32)), "conv1d", "(N, C, L)");
  EXPECT_ERROR(ValueError, F::conv1d(x, random_tensor({2, 4, 3, 1}, kFloat32)), "conv1d", "weight");
  EXPECT_ERROR(ValueError, F::conv1d(x, random_tensor({2, 4, 12}, kFloat32)), "conv1d", "kernel size 12");
  EXPECT_ERROR(ValueError, F::conv1d(x, random_tensor({2, 4, 3}, kFloat32), {}, 0), "conv1d", "stride");
}

TEST(ConvTranspose1d, MatchesTheDefinitionAndGradcheck) {
  nn::ConvTranspose1d m(nn::ConvTranspose1dOptions(4, 6, 3).stride(2).padding(1).output_padding(1).groups(2));
  EXPECT_EQ(m->weight.sizes(), Shape({4, 3, 3}));
  const Tensor x = random_tensor({2, 4, 5}, kFloat32);
  const Tensor y = m(x);
  EXPECT_EQ(y.sizes(), Shape({2, 6, 10}));
  // The definition of the 2-d op on a height-1 image.
  expect_close(y, reference(x.unsqueeze(2), m->weight.unsqueeze(2), m->bias, {1, 2}, {0, 1}, {0, 1}, 2, 1).squeeze(2),
               1e-5, 1e-5, "conv_transpose1d");
  const Tensor xd = random_tensor({2, 4, 5}, kFloat64, true), wd = random_tensor({4, 3, 3}, kFloat64, true);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& t) { return F::conv_transpose1d(t[0], t[1], {}, 2, 1, 1, 2, 2); },
                        {xd, wd}));
  std::ostringstream os;
  os << m;
  EXPECT_EQ(os.str(),
            "ConvTranspose1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), output_padding=(1,), "
            "groups=2)");
  EXPECT_ERROR(ValueError, F::conv_transpose1d(x.view({2, 4, 5, 1}), m->weight), "conv_transpose1d", "(N, C, L)");
}

// ---- CPU against GPU ---------------------------------------------------------------------------------------------

TEST(ConvTransposeGpu, AgreesWithTheCpu) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  const Device gpu("cuda");
  for (DType dt : {kFloat32, kFloat64}) {
    for (const TCase& c : kCases) {
      const Tensor x = random_tensor({c.n, c.cin, c.h, c.w}, dt, true);
      const Tensor w = random_tensor({c.cin, c.cout / c.groups, c.kernel.h, c.kernel.w}, dt, true);
      const Tensor b = random_tensor({c.cout}, dt, true);
      const Tensor xg = x.detach().to(gpu).requires_grad_(true), wg = w.detach().to(gpu).requires_grad_(true),
                   bg = b.detach().to(gpu).requires_grad_(true);
      const Tensor y = run(c, x, w, b), yg = run(c, xg, wg, bg);
      const Tensor up = random_tensor(y.sizes(), dt);
      (y * up).sum().backward();
      (yg * up.to(gpu)).sum().backward();
      const double tol = dt == kFloat32 ? 1e-4 : 1e-11;
      const std::string what = str(c) + " " + dtype_name(dt);
      expect_close(yg, y, tol, tol, what + " output");
      expect_close(xg.grad(), x.grad(), tol, tol, what + " input grad");
      expect_close(wg.grad(), w.grad(), tol, tol, what + " weight grad");
      expect_close(bg.grad(), b.grad(), tol, tol, what + " bias grad");
    }
  }
  const Tensor x = random_tensor({2, 4, 9}, kFloat32), w = random_tensor({6, 2, 3}, kFloat32);
  expect_close(F::conv1d(x.to(gpu), w.to(gpu), {}, 2, 1, 1, 2), F::conv1d(x, w, {}, 2, 1, 1, 2), 1e-4, 1e-4, "conv1d");
  const Tensor empty_out =
      F::conv_transpose2d(random_tensor({0, 4, 3, 3}, kFloat32).to(gpu), w.view({6, 2, 3, 1}).narrow(0, 0, 4).to(gpu));
  EXPECT_EQ(empty_out.sizes(), Shape({0, 2, 5, 3}));
}

// ---- golden against PyTorch -------------------------------------------------------------------------------------

namespace {
using json = nlohmann::json;

const json& golden() {
  static const json g = minidl::testing::read_golden("conv_transpose_golden.json");
  return g;
}

Tensor decode(const json& t, Device device) {
  std::vector<double> v;
  for (const json& e : t["values"]) v.push_back(minidl::testing::golden_number(e));
  return from_vector(v, t["shape"].get<std::vector<std::int64_t>>())
      .to(minidl::testing::dtype_named(t["dtype"]))
      .to(device);
}

nn::ExpandingArray2 pair(const json& v) { return {v[0].get<std::int64_t>(), v[1].get<std::int64_t>()}; }

void expect_golden(Device device) {
  std::size_t n = 0;
  for (const json& c : golden()["cases"]) {
    const std::string op = c["op"];
    const json& p = c["params"];
    std::vector<Tensor> in;
    for (const json& t : c["inputs"]) in.push_back(decode(t, device).requires_grad_(true));
    const Tensor bias = in.size() > 2 ? in[2] : Tensor();
    Tensor y;
    if (op == "conv_transpose2d") {
      y = F::conv_transpose2d(in[0], in[1], bias, pair(p["stride"]), pair(p["padding"]), pair(p["output_padding"]),
                              p["groups"], pair(p["dilation"]));
    } else if (op == "conv_transpose1d") {
      y = F::conv_transpose1d(in[0], in[1], bias, p["stride"], p["padding"], p["output_padding"], p["groups"],
                              p["dilation"]);
    } else if (op == "conv1d") {
      y = F::conv1d(in[0], in[1], bias, p["stride"], p["padding"], p["dilation"], p["groups"]);
    } else {
      FAIL() << "unknown golden op " << op;
    }
    const std::string what = op + " case " + std::to_string(n++) + " " + c["params"].dump();
    const bool f32 = in[0].dtype() == kFloat32;
    const double tol = f32 ? 2e-5 : 1e-11;
    expect_close(y, decode(c["output"], device), tol, tol, what + " output");
    y.backward(decode(c["grad_output"], device));
    for (std::size_t i = 0; i < in.size(); ++i) {
      expect_close(in[i].grad(), decode(c["grads"][i], device), tol, tol, what + " grad " + std::to_string(i));
    }
  }
  EXPECT_GT(n, 0u);
}
}  // namespace

#define MINIDL_REQUIRE_GOLDEN() \
  MINIDL_REQUIRE_GOLDEN_FILE(golden(), "conv_transpose_golden.json", "gen_conv_transpose_golden.py")

TEST(ConvTransposeGolden, MatchesPyTorchOnTheCpu) {
  MINIDL_REQUIRE_GOLDEN();
  expect_golden(Device(kCPU));
}

TEST(ConvTransposeGolden, MatchesPyTorchOnTheGpu) {
  MINIDL_REQUIRE_GOLDEN();
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  expect_golden(Device(kCUDA));
}
