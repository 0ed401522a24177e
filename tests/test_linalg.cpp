// Linear algebra (minidl/linalg.h): matmul with PyTorch's semantics and its family (mm, bmm, mv, dot, outer,
// addmm, baddbmm, addmv) and einsum. Checked element by element against a host reference for every operand layout
// the GEMM reads natively (transposed, sliced, broadcast, strided rows) and those it must copy; against PyTorch's
// values and gradients (tests/golden/linalg_golden.json); by float64 gradcheck through non-contiguous and broadcast
// operands; CPU against GPU; and every error case.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "linalg_golden.h"
#include "minidl/config.h"
#include "test_util.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/matmul.h"
#endif

using namespace minidl;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

namespace {

using i64 = std::int64_t;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// ---- operands in every layout ---------------------------------------------------------------------------------

enum class Layout { Contiguous, Transposed, Sliced, StridedRows, ExpandedBatch, PermutedBatch, RepeatedRows };
std::string layout_name(Layout l) {
  const char* names[] = {"contiguous",     "transposed",     "sliced",       "strided rows",
                         "expanded batch", "permuted batch", "repeated rows"};
  return names[static_cast<int>(l)];
}
constexpr Layout kLayouts[] = {Layout::Contiguous,    Layout::Transposed,    Layout::Sliced,      Layout::StridedRows,
                               Layout::ExpandedBatch, Layout::PermutedBatch, Layout::RepeatedRows};

/// Fresh random values of dtype: uniform in [-1, 1) for floating types, integers in [-3, 4] (uint8: [0, 8]).
Tensor random_of(const Shape& s, DType dt) {
  if (is_floating_point(dt)) return random_tensor(s, dt);
  return uniform(s, dt == kUInt8 ? 0.0 : -3.0, dt == kUInt8 ? 9.0 : 5.0, kFloat64).to(kInt64).to(dt);
}

/// An operand of logical shape `s`: a random contiguous base on the CPU and the view of it that has the layout.
struct Operand {
  Tensor base;
  std::function<Tensor(const Tensor&)> view;
  Tensor on(Device d) const { return view(base.to(d)); }
};

std::optional<Operand> make_operand(const Shape& s, Layout l, DType dt) {
  const std::size_t nd = s.size();
  Shape b = s;
  switch (l) {
    case Layout::Contiguous:
      return Operand{random_of(s, dt), [](const Tensor& t) { return t; }};
    case Layout::Transposed:
      if (nd < 2) return std::nullopt;
      std::swap(b[nd - 1], b[nd - 2]);
      return Operand{random_of(b, dt), [](const Tensor& t) { return t.transpose(-1, -2); }};
    case Layout::Sliced: {
      const i64 cols = s.back();
      b.back() = 2 * cols + 1;
      return Operand{random_of(b, dt), [cols](const Tensor& t) { return t.narrow(-1, 1, cols); }};
    }
    case Layout::StridedRows: {
      const i64 rows = nd >= 2 ? s[nd - 2] : s[0], d = nd >= 2 ? -2 : -1;
      b[nd >= 2 ? nd - 2 : 0] = 2 * rows;
      return Operand{random_of(b, dt), [rows, d](const Tensor& t) { return t.slice(d, 0, 2 * rows, 2); }};
    }
    case Layout::ExpandedBatch:
      if (nd < 3 || s[0] < 2) return std::nullopt;
      b[0] = 1;
      return Operand{random_of(b, dt), [s](const Tensor& t) { return t.expand(s); }};
    case Layout::PermutedBatch:
      if (nd < 4) return std::nullopt;
      std::swap(b[0], b[1]);
      return Operand{random_of(b, dt), [](const Tensor& t) { return t.transpose(0, 1); }};
    case Layout::RepeatedRows:
      if (nd < 2 || s[nd - 2] < 2) return std::nullopt;
      b[nd - 2] = 1;
      return Operand{random_of(b, dt), [s](const Tensor& t) { return t.expand(s); }};
  }
  return std::nullopt;
}

// ---- host reference -------------------------------------------------------------------------------------------

/// PyTorch's matmul by its definition, on the host: float64 sums for floating operands; integers summed in
/// 64-bit unsigned arithmetic and wrapped to the dtype as PyTorch's CPU does. Returns float64 or int64 values.
Tensor reference_matmul(const Tensor& a_in, const Tensor& b_in) {
  const bool floating = is_floating_point(a_in.dtype());
  const Tensor a = a_in.detach().cpu().contiguous(), b = b_in.detach().cpu().contiguous();
  Shape as = a.sizes(), bs = b.sizes();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const i64 m = as[as.size() - 2], k = as.back(), n = bs.back();
  const std::size_t nd = std::max(as.size(), bs.size()) - 2;
  Shape batch(nd, 1);
  const auto dim_of = [&](const Shape& s, std::size_t d) {
    const std::size_t sb = s.size() - 2;
    return d + sb < nd ? 1 : s[d + sb - nd];
  };
  for (std::size_t d = 0; d < nd; ++d) batch[d] = dim_of(as, d) == 1 ? dim_of(bs, d) : dim_of(as, d);
  const std::vector<double> av = floating ? a.to(kFloat64).to_vector<double>() : std::vector<double>();
  const std::vector<double> bv = floating ? b.to(kFloat64).to_vector<double>() : std::vector<double>();
  const std::vector<i64> ai = floating ? std::vector<i64>() : a.to(kInt64).to_vector<i64>();
  const std::vector<i64> bi = floating ? std::vector<i64>() : b.to(kInt64).to_vector<i64>();
  const i64 batches = shape_numel(batch);
  std::vector<double> out(static_cast<std::size_t>(batches * m * n));
  std::vector<i64> outi(out.size());
  for (i64 i = 0; i < batches; ++i) {
    // The batch index of each operand: its own dims, 0 where broadcast.
    i64 rem = i, oa = 0, ob = 0, sa = 1, sb = 1;
    for (std::size_t d = nd; d-- > 0;) {
      const i64 idx = rem % batch[d];
      rem /= batch[d];
      if (dim_of(as, d) > 1) oa += idx * sa;
      if (dim_of(bs, d) > 1) ob += idx * sb;
      sa *= dim_of(as, d);
      sb *= dim_of(bs, d);
    }
    for (i64 r = 0; r < m; ++r) {
      for (i64 c = 0; c < n; ++c) {
        double s = 0;
        std::uint64_t si = 0;
        for (i64 p = 0; p < k; ++p) {
          const std::size_t ia = static_cast<std::size_t>((oa * m + r) * k + p);
          const std::size_t ib = static_cast<std::size_t>((ob * k + p) * n + c);
          if (floating) {
            s += av[ia] * bv[ib];
          } else {
            si += static_cast<std::uint64_t>(ai[ia]) * static_cast<std::uint64_t>(bi[ib]);
          }
        }
        const std::size_t o = static_cast<std::size_t>((i * m + r) * n + c);
        out[o] = s;
        outi[o] = static_cast<i64>(si);
      }
    }
  }
  Shape os = batch;
  if (a_in.dim() > 1) os.push_back(m);
  if (b_in.dim() > 1) os.push_back(n);
  if (floating) return from_vector(out, os);
  // Wrap to the dtype (as its products would), then widen back for the comparison.
  return from_vector(outi, os).to(a_in.dtype()).to(kInt64);
}

double rtol_of(DType dt) { return dt == kFloat32 ? 1e-5 : 1e-12; }

/// The operand shape pairs of the reference and device tests: vectors, broadcast batch dims, folds, empty sizes.
const std::vector<std::pair<Shape, Shape>>& shape_pairs() {
  static const std::vector<std::pair<Shape, Shape>> pairs = {
      {{3}, {3}},
      {{4}, {4, 5}},
      {{2, 4}, {4}},
      {{3, 4}, {4, 5}},
      {{2, 3, 4}, {4, 5}},
      {{4}, {2, 4, 5}},
      {{2, 3, 4}, {4}},
      {{3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {5, 4, 2}},
      {{3, 1, 2, 3}, {1, 4, 3, 2}},
      {{2, 3, 4}, {2, 4, 5}},
      {{1, 2, 3}, {4, 3, 2}},
      {{2, 3, 2, 4}, {2, 1, 4, 5}},
      {{2, 3, 2, 4}, {4, 5}},
      {{5, 7, 9}, {9, 11}},
      {{1, 1}, {1, 1}},
      {{0, 3}, {3, 4}},
      {{2, 3, 0}, {0, 4}},
      {{2, 0, 3, 4}, {4, 5}},
      {{3, 0}, {0}},
      {{1, 5}, {3, 5, 1}},
  };
  return pairs;
}

/// Every layout pair of every shape pair, in dtype dt: calls body(description, a operand, b operand).
void for_each_case(DType dt, const std::function<void(const std::string&, const Operand&, const Operand&)>& body) {
  for (const auto& [sa, sb] : shape_pairs()) {
    for (Layout la : kLayouts) {
      for (Layout lb : kLayouts) {
        const auto a = make_operand(sa, la, dt), b = make_operand(sb, lb, dt);
        if (!a || !b) continue;
        body(detail::str(dtype_name(dt), " ", shape_str(sa), " (", layout_name(la), ") x ", shape_str(sb), " (",
                         layout_name(lb), ")"),
             *a, *b);
      }
    }
  }
}

/// TF32 off in its scope, so float32 GPU products are full float32 sums.
class NoTf32 {
 public:
  NoTf32() : conv_(cuda::allow_tf32_conv()), matmul_(cuda::allow_tf32_matmul()) { cuda::set_allow_tf32(false, false); }
  ~NoTf32() { cuda::set_allow_tf32(conv_, matmul_); }

 private:
  bool conv_, matmul_;
};

Tensor uni(const Shape& s) { return random_tensor(s, kFloat64, true); }

}  // namespace

// ---- values against the host reference ------------------------------------------------------------------------

TEST(Linalg, MatmulMatchesTheReferenceInEveryLayoutAndDtype) {
  for (DType dt : {kFloat64, kFloat32, kInt64, kInt32, kUInt8}) {
    for_each_case(dt, [&](const std::string& what, const Operand& a, const Operand& b) {
      const Tensor x = a.on(Device(kCPU)), y = b.on(Device(kCPU));
      const Tensor got = matmul(x, y), want = reference_matmul(x, y);
      ASSERT_EQ(got.dtype(), dt) << what;
      if (is_floating_point(dt)) {
        expect_close(got, want, rtol_of(dt), rtol_of(dt), what);
      } else {
        ASSERT_EQ(got.sizes(), want.sizes()) << what;
        EXPECT_EQ(got.to(kInt64).to_vector<i64>(), want.to_vector<i64>()) << what;
      }
    });
  }
}

TEST(Linalg, IntegerProductsWrapAsPytorchsCpu) {
  // int32: 60000 * 60000 * 2 overflows 32 bits; uint8: 200 * 2 + 100 * 3 = 700 wraps to 188.
  const Tensor a = from_vector<std::int32_t>({60000, 60000}, {1, 2}),
               b = from_vector<std::int32_t>({60000, 60000}, {2, 1});
  const std::uint32_t wrapped = 2u * 60000u * 60000u;
  EXPECT_EQ(matmul(a, b).item<std::int32_t>(), static_cast<std::int32_t>(wrapped));
  const Tensor c = from_vector<std::uint8_t>({200, 100}, {2}), d = from_vector<std::uint8_t>({2, 3}, {2});
  EXPECT_EQ(dot(c, d).item<std::int64_t>(), 700 % 256);
  EXPECT_EQ(dot(c, d).dtype(), kUInt8);
}

TEST(Linalg, FamilyMatchesMatmul) {
  const Tensor a = random_tensor({3, 4}), b = random_tensor({4, 5}), v = random_tensor({4}), w = random_tensor({4});
  const Tensor ba = random_tensor({2, 3, 4}), bb = random_tensor({2, 4, 5});
  expect_close(mm(a, b), reference_matmul(a, b), 1e-12, 1e-12, "mm");
  expect_close(a.mm(b), reference_matmul(a, b), 1e-12, 1e-12, "Tensor::mm");
  expect_close(bmm(ba, bb), reference_matmul(ba, bb), 1e-12, 1e-12, "bmm");
  expect_close(ba.bmm(bb), reference_matmul(ba, bb), 1e-12, 1e-12, "Tensor::bmm");
  expect_close(mv(a, v), reference_matmul(a, v), 1e-12, 1e-12, "mv");
  expect_close(a.mv(v), reference_matmul(a, v), 1e-12, 1e-12, "Tensor::mv");
  expect_close(dot(v, w), reference_matmul(v, w), 1e-12, 1e-12, "dot");
  expect_close(v.dot(w), reference_matmul(v, w), 1e-12, 1e-12, "Tensor::dot");
  EXPECT_EQ(dot(v, w).dim(), 0);
  // outer: every element a[i] * b[j]; dtypes promote as mul's.
  const Tensor o = outer(v, w.to(kFloat32));
  EXPECT_EQ(o.dtype(), kFloat64);
  const auto vv = v.to_vector<double>(), wv = w.to(kFloat32).to(kFloat64).to_vector<double>(),
             ov = o.to_vector<double>();
  ASSERT_EQ(o.sizes(), (Shape{4, 4}));
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(ov[i * 4 + j], vv[i] * wv[j]);
  }
  expect_close(ger(v, w), v.outer(w), 0, 0, "ger");
  expect_close(v.ger(w), outer(v, w), 0, 0, "Tensor::ger");
  // addmm / baddbmm / addmv: beta * input + alpha * product, input broadcast.
  const Tensor bias = random_tensor({5}), bias3 = random_tensor({1, 3, 1}), bias_v = random_tensor({1});
  expect_close(addmm(bias, a, b, 0.5, -2.0), bias * 0.5 + reference_matmul(a, b) * -2.0, 1e-12, 1e-12, "addmm");
  expect_close(bias.addmm(a, b), bias + reference_matmul(a, b), 1e-12, 1e-12, "Tensor::addmm");
  expect_close(baddbmm(bias3, ba, bb, -1.0, 3.0), bias3 * -1.0 + reference_matmul(ba, bb) * 3.0, 1e-12, 1e-12,
               "baddbmm");
  expect_close(bias3.baddbmm(ba, bb), bias3 + reference_matmul(ba, bb), 1e-12, 1e-12, "Tensor::baddbmm");
  expect_close(addmv(bias_v, a, v, 2.0, 0.5), bias_v * 2.0 + reference_matmul(a, v) * 0.5, 1e-12, 1e-12, "addmv");
  expect_close(bias_v.addmv(a, v), bias_v + reference_matmul(a, v), 1e-12, 1e-12, "Tensor::addmv");
  // beta = 0 does not read input: its NaNs do not reach the result.
  const Tensor nan_bias = full({3, 5}, std::nan(""), kFloat64);
  expect_close(addmm(nan_bias, a, b, 0.0), reference_matmul(a, b), 1e-12, 1e-12, "addmm beta 0");
  // Integer addmm with integer scalars.
  const Tensor ia = random_of({2, 3}, kInt64), ib = random_of({3, 4}, kInt64), ic = random_of({4}, kInt64);
  EXPECT_EQ(addmm(ic, ia, ib, 2, 3).to_vector<i64>(), (ic * 2 + reference_matmul(ia, ib) * 3).to_vector<i64>());
}

// ---- gradients ----------------------------------------------------------------------------------------------

TEST(Linalg, GradientsThroughEveryLayoutMatchThoseOfContiguousCopies) {
  // The strided operand reaches the GEMM as is; its contiguous copy goes the dense way; the leaves' gradients
  // (through the same views) must agree.
  for_each_case(kFloat64, [&](const std::string& what, const Operand& a, const Operand& b) {
    const Tensor la = a.base.clone().requires_grad_(), lb = b.base.clone().requires_grad_();
    const Tensor lc = a.base.clone().requires_grad_(), ld = b.base.clone().requires_grad_();
    const Tensor out = matmul(a.view(la), b.view(lb));
    const Tensor out2 = matmul(a.view(lc).contiguous(), b.view(ld).contiguous());
    const Tensor g = random_tensor(out.sizes());
    out.backward(g);
    out2.backward(g);
    expect_close(out, out2, 1e-12, 1e-12, what + " value");
    if (out.numel() == 0) return;
    expect_close(la.grad(), lc.grad(), 1e-12, 1e-12, what + " grad a");
    expect_close(lb.grad(), ld.grad(), 1e-12, 1e-12, what + " grad b");
  });
}

TEST(Linalg, MatmulGradcheck) {
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{3}, {3}},
                                                                   {{3}, {3, 2}},
                                                                   {{2, 3}, {3}},
                                                                   {{2, 3}, {3, 4}},
                                                                   {{2, 2, 3}, {3, 2}},
                                                                   {{3}, {2, 3, 2}},
                                                                   {{2, 3}, {2, 3, 2}},
                                                                   {{2, 1, 2, 3}, {3, 3, 2}},
                                                                   {{3, 1, 2, 3}, {1, 2, 3, 2}},
                                                                   {{1, 2, 3}, {2, 3, 2}}}) {
    const Fn f = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    EXPECT_TRUE(gradcheck(f, {uni(sa), uni(sb)})) << shape_str(sa) << " x " << shape_str(sb);
    EXPECT_TRUE(gradcheck(f, {uni(sa), uni(sb).detach()})) << shape_str(sa) << " x " << shape_str(sb) << " (a only)";
    EXPECT_TRUE(gradcheck(f, {uni(sa).detach(), uni(sb)})) << shape_str(sa) << " x " << shape_str(sb) << " (b only)";
  }
  // Non-contiguous inputs: transposed, sliced (rows further apart than their length), expanded batch, strided rows,
  // permuted batch, and the same tensor on both sides.
  const std::vector<std::pair<std::string, Fn>> views = {
      {"transposed", [](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1].transpose(-1, -2)); }},
      {"sliced", [](const std::vector<Tensor>& in) { return matmul(in[0].narrow(-1, 1, 3), in[1].narrow(-1, 0, 2)); }},
      {"expanded",
       [](const std::vector<Tensor>& in) {
         return matmul(in[0].expand({2, 4, 3}), in[1]);
       }},
      {"strided rows", [](const std::vector<Tensor>& in) { return matmul(in[0].slice(0, 0, 4, 2), in[1]); }},
      {"permuted",
       [](const std::vector<Tensor>& in) {
         return matmul(in[0].permute({1, 0, 2, 3}), in[1]);
       }},
      {"x x^T", [](const std::vector<Tensor>& in) { return matmul(in[0], in[0].transpose(-1, -2)); }},
  };
  const std::vector<std::vector<Shape>> shapes = {{{3, 4}, {2, 3, 3}}, {{4, 5}, {3, 4}},       {{1, 4, 3}, {3, 2}},
                                                  {{4, 3}, {3, 2}},    {{2, 2, 2, 3}, {3, 2}}, {{2, 3, 4}}};
  for (std::size_t i = 0; i < views.size(); ++i) {
    std::vector<Tensor> in;
    for (const Shape& s : shapes[i]) in.push_back(uni(s));
    EXPECT_TRUE(gradcheck(views[i].second, in)) << views[i].first;
  }
}

TEST(Linalg, FamilyGradcheck) {
  const auto check = [](const std::string& what, const Fn& f, const std::vector<Tensor>& in) {
    EXPECT_TRUE(gradcheck(f, in)) << what;
  };
  check("mm", [](const std::vector<Tensor>& in) { return mm(in[0], in[1].t()); }, {uni({2, 3}), uni({4, 3})});
  check("bmm", [](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); }, {uni({2, 2, 3}), uni({2, 3, 2})});
  check("mv", [](const std::vector<Tensor>& in) { return mv(in[0].t(), in[1]); }, {uni({3, 2}), uni({3})});
  check("dot", [](const std::vector<Tensor>& in) { return dot(in[0].slice(0, 0, 6, 2), in[1]); }, {uni({6}), uni({3})});
  check("outer", [](const std::vector<Tensor>& in) { return outer(in[0], in[1]); }, {uni({3}), uni({2})});
  check("addmm", [](const std::vector<Tensor>& in) { return addmm(in[0], in[1], in[2], 0.5, -1.5); },
        {uni({3}), uni({2, 4}), uni({4, 3})});
  check("baddbmm", [](const std::vector<Tensor>& in) { return baddbmm(in[0], in[1], in[2], 2.0, 0.25); },
        {uni({2, 1, 3}), uni({2, 2, 4}), uni({2, 4, 3})});
  check("addmv", [](const std::vector<Tensor>& in) { return addmv(in[0], in[1], in[2], -1.0, 3.0); },
        {uni({2}), uni({2, 3}), uni({3})});
  check("addmm beta 0", [](const std::vector<Tensor>& in) { return addmm(in[0], in[1], in[2], 0.0); },
        {uni({1, 3}), uni({2, 4}), uni({4, 3})});
}

// ---- einsum -------------------------------------------------------------------------------------------------

TEST(Linalg, EinsumMatchesComposedOps) {
  const Tensor a = random_tensor({2, 3}), b = random_tensor({3, 4}), sq = random_tensor({4, 4});
  const Tensor q = random_tensor({2, 3, 4, 5}), k = random_tensor({2, 3, 6, 5});
  expect_close(einsum("ij,jk->ik", {a, b}), matmul(a, b), 1e-12, 1e-12, "ij,jk->ik");
  expect_close(einsum("ij,jk", {a, b}), matmul(a, b), 1e-12, 1e-12, "implicit ij,jk");
  expect_close(einsum("bhqd,bhkd->bhqk", {q, k}), matmul(q, k.transpose(-1, -2)), 1e-12, 1e-12, "attention scores");
  expect_close(einsum("ij->ji", {a}), a.t(), 0, 0, "transpose");
  expect_close(einsum("ba", {a}), a.t(), 0, 0, "implicit transpose");
  expect_close(einsum("ij->", {a}), a.sum(), 1e-12, 1e-12, "sum");
  expect_close(einsum("ij->j", {a}), sum(a, {0}), 1e-12, 1e-12, "column sums");
  expect_close(einsum("i,j->ij", {a.select(0, 0), b.select(1, 0)}), outer(a.select(0, 0), b.select(1, 0)), 1e-12, 1e-12,
               "outer");
  // Diagonal and trace: every diagonal element.
  const auto sv = sq.to_vector<double>();
  const auto diag = einsum("ii->i", {sq}).to_vector<double>();
  double trace = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(diag[i], sv[i * 5]);
    trace += sv[i * 5];
  }
  EXPECT_NEAR(einsum("ii", {sq}).item<double>(), trace, 1e-12);
  EXPECT_EQ(einsum("ii", {sq}).dim(), 0);
  // "..." broadcast, three operands, uppercase subscripts.
  const Tensor e = random_tensor({5, 1, 2, 3});
  expect_close(einsum("...ij,...jk->...ik", {e, b}), matmul(e, b), 1e-12, 1e-12, "ellipsis");
  const Tensor c = random_tensor({4, 2});
  expect_close(einsum("ab,bc,cd->ad", {a, b, c}), matmul(matmul(a, b), c), 1e-12, 1e-12, "chain");
  expect_close(einsum("Ab,bC->AC", {a, b}), matmul(a, b), 1e-12, 1e-12, "uppercase");
  // A strided operand and size-1 broadcasting.
  expect_close(einsum("ij,jk->ik", {a, b.t().contiguous().t()}), matmul(a, b), 1e-12, 1e-12, "transposed operand");
  const Tensor row = random_tensor({1, 3});
  expect_close(einsum("ij,ij->ij", {a, row.expand({2, 3})}), a * row, 1e-12, 1e-12, "expanded operand");
  expect_close(einsum("ij,ij->ij", {a, row}), a * row, 1e-12, 1e-12, "size-1 broadcast");
}

TEST(Linalg, EinsumGradcheck) {
  const std::vector<std::pair<std::string, std::vector<Shape>>> cases = {
      {"ij,jk->ik", {{2, 3}, {3, 2}}},
      {"bij,bjk->bik", {{2, 2, 3}, {2, 3, 2}}},
      {"ii->i", {{3, 3}}},
      {"ii", {{3, 3}}},
      {"ij->ji", {{2, 3}}},
      {"ij->", {{2, 3}}},
      {"i,i->", {{3}, {3}}},
      {"i,j->ij", {{2}, {3}}},
      {"...ij,...jk", {{2, 2, 3}, {3, 2}}},
      {"ab,bc,cd->ad", {{2, 3}, {3, 2}, {2, 2}}},
      {"bn,anm,bm->ba", {{2, 3}, {2, 3, 2}, {2, 2}}},
      {"iij->j", {{2, 2, 3}}},
      {"ijk,ikl->jl", {{2, 3, 2}, {2, 2, 3}}},
      {"i...,i...->...", {{3, 2}, {3, 1}}},
  };
  for (const auto& [eq, shapes] : cases) {
    std::vector<Tensor> in;
    for (const Shape& s : shapes) in.push_back(uni(s));
    const std::string e = eq;
    EXPECT_TRUE(gradcheck([e](const std::vector<Tensor>& x) { return einsum(e, x); }, in)) << eq;
  }
  // A transposed view with a repeated subscript (its diagonal is taken of a contiguous copy).
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& x) {
        return einsum("ii,ij->j", {x[0].t(), x[1]});
      },
      {uni({3, 3}), uni({3, 2})}));
}

// ---- golden: PyTorch's values and gradients ---------------------------------------------------------------------

namespace {

/// Runs one golden case on `device`: the op on the inputs (as views where the case says "t"), the backward pass
/// from its grad_output, and every element of the output and of each floating input's gradient compared.
void check_golden_case(const nlohmann::json& c, Device device, double rtol, double atol) {
  const std::string op = c.at("op");
  const DType dt = minidl::testing::dtype_named(c.at("dtype"));
  std::vector<Tensor> leaves, used;
  for (std::size_t i = 0; i < c.at("inputs").size(); ++i) {
    Tensor t = minidl::testing::golden_tensor(c.at("inputs")[i], dt).to(device);
    if (is_floating_point(dt)) t.requires_grad_();
    leaves.push_back(t);
    used.push_back(c.at("layouts")[i] == "t" ? t.transpose(-1, -2) : t);
  }
  const auto scalar = [&](const char* name) -> Scalar {
    if (is_floating_point(dt)) return c.at(name).get<double>();
    return c.at(name).get<i64>();
  };
  Tensor out;
  if (op == "matmul") out = matmul(used[0], used[1]);
  if (op == "mm") out = mm(used[0], used[1]);
  if (op == "bmm") out = bmm(used[0], used[1]);
  if (op == "mv") out = mv(used[0], used[1]);
  if (op == "dot") out = dot(used[0], used[1]);
  if (op == "outer") out = outer(used[0], used[1]);
  if (op == "addmm") out = addmm(used[0], used[1], used[2], scalar("beta"), scalar("alpha"));
  if (op == "baddbmm") out = baddbmm(used[0], used[1], used[2], scalar("beta"), scalar("alpha"));
  if (op == "addmv") out = addmv(used[0], used[1], used[2], scalar("beta"), scalar("alpha"));
  if (op == "einsum") out = einsum(c.at("equation"), used);
  const std::string what = op + (c.contains("equation") ? " " + c.at("equation").get<std::string>() : "") + " " +
                           c.at("dtype").get<std::string>() + " " + c.at("inputs")[0].at("shape").dump();
  ASSERT_TRUE(out.defined()) << what;
  ASSERT_EQ(out.dtype(), dt) << what;
  expect_close(out, minidl::testing::golden_tensor(c.at("output"), dt), rtol, atol, what + " output");
  if (!is_floating_point(dt)) return;
  out.backward(minidl::testing::golden_tensor(c.at("grad_output"), dt).to(device));
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    expect_close(leaves[i].grad().defined() ? leaves[i].grad() : zeros_like(leaves[i]),
                 minidl::testing::golden_tensor(c.at("grads")[i], dt), rtol, atol, what + " grad " + std::to_string(i));
  }
}

}  // namespace

TEST(LinalgGolden, ValuesAndGradientsMatchPytorch) {
  MINIDL_REQUIRE_LINALG_GOLDEN();
  for (const auto& c : minidl::testing::linalg_golden().at("products")) {
    const bool f32 = c.at("dtype") == "float32";
    check_golden_case(c, Device(kCPU), f32 ? 1.3e-6 : 1e-12, f32 ? 1e-5 : 1e-12);
  }
}

TEST(LinalgGoldenGpu, ValuesAndGradientsMatchPytorch) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_LINALG_GOLDEN();
  const NoTf32 no_tf32;
  for (const auto& c : minidl::testing::linalg_golden().at("products")) {
    if (c.at("dtype") == "int64") continue;  // integer products are CPU-only, as PyTorch's
    const bool f32 = c.at("dtype") == "float32";
    check_golden_case(c, Device(kCUDA), f32 ? 1e-5 : 1e-7, f32 ? 1e-5 : 1e-7);
  }
}

// ---- CPU against GPU ----------------------------------------------------------------------------------------

TEST(LinalgGpu, MatmulAndGradientsMatchTheCpuInEveryLayout) {
  MINIDL_REQUIRE_GPU();
  const NoTf32 no_tf32;
  for (DType dt : {kFloat32, kFloat64}) {
    for_each_case(dt, [&](const std::string& what, const Operand& a, const Operand& b) {
      const Tensor ca = a.base.clone().requires_grad_(), cb = b.base.clone().requires_grad_();
      const Tensor ga = a.base.cuda().requires_grad_(), gb = b.base.cuda().requires_grad_();
      const Tensor want = matmul(a.view(ca), b.view(cb)), got = matmul(a.view(ga), b.view(gb));
      ASSERT_TRUE(got.is_cuda()) << what;
      const double tol = dt == kFloat32 ? 1e-5 : 1e-7;
      expect_close(got, want, tol, tol, what);
      const Tensor g = random_of(want.sizes(), dt);
      want.backward(g);
      got.backward(g.cuda());
      if (want.numel() == 0) return;
      expect_close(ga.grad(), ca.grad(), tol, tol, what + " grad a");
      expect_close(gb.grad(), cb.grad(), tol, tol, what + " grad b");
    });
  }
}

TEST(LinalgGpu, FamilyAndEinsumMatchTheCpu) {
  MINIDL_REQUIRE_GPU();
  const NoTf32 no_tf32;
  const Tensor a = random_tensor({3, 5}, kFloat32), b = random_tensor({5, 7}, kFloat32),
               v = random_tensor({5}, kFloat32);
  const Tensor ba = random_tensor({2, 3, 5}, kFloat32), bb = random_tensor({2, 5, 7}, kFloat32);
  const Tensor bias = random_tensor({7}, kFloat32), sq = random_tensor({6, 6}, kFloat32);
  const auto both = [](const std::string& what, const std::function<Tensor(Device)>& f) {
    expect_close(f(Device(kCUDA)), f(Device(kCPU)), 1e-5, 1e-5, what);
  };
  both("mm", [&](Device d) { return mm(a.to(d), b.to(d)); });
  both("bmm", [&](Device d) { return bmm(ba.to(d), bb.to(d)); });
  both("mv", [&](Device d) { return mv(a.to(d), v.to(d)); });
  both("dot", [&](Device d) { return dot(v.to(d), v.to(d)); });
  both("outer", [&](Device d) { return outer(v.to(d), bias.to(d)); });
  both("addmm", [&](Device d) { return addmm(bias.to(d), a.to(d), b.to(d), 0.5, 2.0); });
  both("baddbmm", [&](Device d) { return baddbmm(bias.to(d), ba.to(d), bb.to(d), -1.0, 1.0); });
  both("addmv", [&](Device d) { return addmv(bias.narrow(0, 0, 3).to(d), a.to(d), v.to(d), 2.0, 0.5); });
  both("einsum bij,bjk", [&](Device d) { return einsum("bij,bjk->bik", {ba.to(d), bb.to(d)}); });
  both("einsum trace", [&](Device d) { return einsum("ii", {sq.to(d)}); });
  both("einsum diagonal", [&](Device d) { return einsum("ii->i", {sq.to(d)}); });
  both("einsum chain", [&](Device d) { return einsum("ij,jk,k->i", {a.to(d), b.to(d), bias.to(d)}); });
  // 0-d result, empty operands.
  EXPECT_EQ(dot(v.cuda(), v.cuda()).dim(), 0);
  expect_close(matmul(zeros({2, 0}, kFloat32).cuda(), zeros({0, 3}, kFloat32).cuda()), zeros({2, 3}, kFloat32), 0, 0,
               "k = 0");
  EXPECT_EQ(matmul(zeros({0, 4}, kFloat32).cuda(), b.narrow(0, 0, 4).cuda()).sizes(), (Shape{0, 7}));
}

// The GEMM receives folded, broadcast and sliced operands as they are: the plans cuBLASLt was asked for say so.
TEST(LinalgGpu, FoldedBroadcastAndSlicedOperandsReachTheGemmUncopied) {
  MINIDL_REQUIRE_GPU();
#if MINIDL_CUDA_ENABLED
  const NoTf32 no_tf32;
  const auto has_plan = [](const std::string& prefix) {
    for (const std::string& line : gpu::matmul_algorithm_choices()) {
      if (line.rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  // (3, 37, 29) x (29, 13): one GEMM of 111 rows.
  (void)matmul(random_tensor({3, 37, 29}, kFloat32).cuda(), random_tensor({29, 13}, kFloat32).cuda());
  EXPECT_TRUE(has_plan("matmul batch 1, 111x29 times 29x13, float32,")) << "fold into rows";
  // (31, 23) x (5, 23, 17): a batch of 5 with a's stride 0.
  (void)matmul(random_tensor({31, 23}, kFloat32).cuda(), random_tensor({5, 23, 17}, kFloat32).cuda());
  EXPECT_TRUE(has_plan("matmul batch 5, 31x23 times 23x17, float32, rows 23/17 and matrices 0/391 elements apart"));
  // A narrow of the last dim: rows 41 elements apart.
  (void)matmul(random_tensor({19, 41}, kFloat32).cuda().narrow(1, 3, 11), random_tensor({11, 7}, kFloat32).cuda());
  EXPECT_TRUE(has_plan("matmul batch 1, 19x11 times 11x7, float32, rows 41/7"));
  // The weight gradient of (3, 37, 29) x (29, 13): one GEMM over k = 111.
  const Tensor w = random_tensor({29, 13}, kFloat32).cuda().requires_grad_();
  matmul(random_tensor({3, 37, 29}, kFloat32).cuda(), w).sum().backward();
  EXPECT_TRUE(has_plan("matmul batch 1, 29x111 (a transposed) times 111x13, float32,")) << "fold into k";
#endif
}

// ---- bad input --------------------------------------------------------------------------------------------------

TEST(Linalg, BadInput) {
  const Tensor m23 = random_tensor({2, 3}), m34 = random_tensor({3, 4}), v3 = random_tensor({3});
  EXPECT_ERROR(ValueError, matmul(random_tensor({}), m34), "matmul", "at least 1 dimension", "0-d");
  EXPECT_ERROR(ValueError, matmul(m23, random_tensor({4, 2})), "matmul", "cannot be multiplied", "2x3", "4x2");
  EXPECT_ERROR(ValueError, matmul(v3, random_tensor({4})), "matmul", "cannot be multiplied", "[3]", "[4]");
  EXPECT_ERROR(ValueError, matmul(random_tensor({2, 2, 3}), random_tensor({5, 3, 2})), "matmul", "batch dimensions",
               "[2]", "[5]", "do not broadcast");
  EXPECT_ERROR(TypeError, matmul(m23, m34.to(kFloat32)), "matmul", "same dtype", "float64", "float32");
  EXPECT_ERROR(TypeError, matmul(m23.to(kBFloat16), m34.to(kHalf)), "matmul", "same dtype", "bfloat16", "float16");
  EXPECT_ERROR(TypeError, matmul(m23.to(kBool), m34.to(kBool)), "matmul", "bool");
  EXPECT_ERROR(ValueError, matmul(Tensor(), m34), "matmul", "'self'", "undefined");
  EXPECT_ERROR(ValueError, mm(random_tensor({2, 2, 3}), m34), "mm", "2-D", "[2, 2, 3]");
  EXPECT_ERROR(ValueError, mm(m23, m23), "mm", "cannot be multiplied", "2x3");
  EXPECT_ERROR(ValueError, bmm(m23, m34), "bmm", "3-D", "[2, 3]");
  EXPECT_ERROR(ValueError, bmm(random_tensor({2, 2, 3}), random_tensor({3, 3, 4})), "bmm", "same number of batches",
               "[2, 2, 3]", "[3, 3, 4]");
  EXPECT_ERROR(ValueError, bmm(random_tensor({2, 2, 3}), random_tensor({2, 4, 4})), "bmm", "cannot be multiplied");
  EXPECT_ERROR(ValueError, mv(m23, m34), "mv", "1-D vector", "[3, 4]");
  EXPECT_ERROR(ValueError, mv(m23, random_tensor({2})), "mv", "cannot be multiplied", "[2]");
  EXPECT_ERROR(ValueError, dot(v3, random_tensor({4})), "dot", "different sizes", "3", "4");
  EXPECT_ERROR(ValueError, dot(m23, v3), "dot", "1-D", "[2, 3]");
  EXPECT_ERROR(TypeError, dot(v3, v3.to(kFloat32)), "dot", "same dtype");
  EXPECT_ERROR(ValueError, outer(m23, v3), "outer", "1-D", "[2, 3]");
  EXPECT_ERROR(ValueError, addmm(random_tensor({3, 4}), m23, m34), "addmm", "input", "[3, 4]", "[2, 4]");
  EXPECT_ERROR(ValueError, addmm(random_tensor({2, 2, 4}), m23, m34), "addmm", "does not broadcast", "[2, 2, 4]");
  EXPECT_ERROR(TypeError, addmm(random_tensor({4}, kFloat32), m23, m34), "addmm", "same dtype");
  EXPECT_ERROR(TypeError, addmm(random_of({4}, kInt64), random_of({2, 3}, kInt64), random_of({3, 4}, kInt64), 0.5),
               "addmm", "beta and alpha", "integral");
  EXPECT_ERROR(ValueError, addmm(Tensor(), m23, m34), "addmm", "'input'", "undefined");
  EXPECT_ERROR(ValueError, baddbmm(random_tensor({3, 2, 4}), random_tensor({2, 2, 3}), random_tensor({2, 3, 4})),
               "baddbmm", "[3, 2, 4]", "[2, 2, 4]");
  EXPECT_ERROR(ValueError, addmv(random_tensor({3}), m23, v3), "addmv", "[3]", "[2]");
}

TEST(Linalg, EinsumBadInput) {
  const Tensor a = random_tensor({2, 3}), b = random_tensor({3, 4});
  EXPECT_ERROR(ValueError, einsum("ij", {}), "einsum", "at least one operand");
  EXPECT_ERROR(ValueError, einsum("ij,jk->ik", {a}), "einsum", "names 2 operands but 1");
  EXPECT_ERROR(ValueError, einsum("i1,jk", {a, b}), "einsum", "letters", "'1'");
  EXPECT_ERROR(ValueError, einsum("ijk,jk", {a, b}), "einsum", "operand 0", "2 dims", "name 3");
  EXPECT_ERROR(ValueError, einsum("i...jk", {a}), "einsum", "operand 0", "more than it has");
  EXPECT_ERROR(ValueError, einsum("ij,jk->iz", {a, b}), "einsum", "output subscript z", "does not appear");
  EXPECT_ERROR(ValueError, einsum("ij,jk->ii", {a, b}), "einsum", "output subscript i", "more than once");
  EXPECT_ERROR(ValueError, einsum("ij,ij->ij", {a, b}), "einsum", "subscript i", "size 3", "2");
  EXPECT_ERROR(ValueError, einsum("ii->i", {a}), "einsum", "subscript i", "repeated", "2", "3");
  EXPECT_ERROR(ValueError, einsum("i.j", {a}), "einsum", "'.'", "ellipsis");
  EXPECT_ERROR(ValueError, einsum("......", {a}), "einsum", "at most one ellipsis");
  EXPECT_ERROR(ValueError, einsum("...i,...i->......", {a, a}), "einsum", "at most one ellipsis", "output");
  EXPECT_ERROR(TypeError, einsum("ij,jk", {a, b.to(kFloat32)}), "einsum", "same dtype");
  EXPECT_ERROR(ValueError, einsum("ij", {Tensor()}), "einsum", "undefined");
}

TEST(LinalgGpu, BadInput) {
  MINIDL_REQUIRE_GPU();
  const Tensor a = random_tensor({2, 3}), b = random_tensor({3, 4});
  EXPECT_ERROR(TypeError, matmul(a.cuda(), b), "matmul", "same device", "cuda:0", "cpu");
  EXPECT_ERROR(TypeError, matmul(random_of({2, 3}, kInt64).cuda(), random_of({3, 4}, kInt64).cuda()), "matmul", "int64",
               "CPU only", "cuda:0");
  EXPECT_ERROR(TypeError, einsum("ij,jk", {a.cuda(), b}), "einsum", "same device");
}
