// scaled_dot_product_attention and nn::MultiheadAttention: the composed path against a plain loop (float32 and
// float64, masks, causal, scale, broadcast batch dims), float64 gradcheck, fully masked rows, non-contiguous and
// empty inputs, bad input; on a GPU the flash-attention kernels against the reference path (forward and the three
// gradients), CPU vs GPU and CUDA-graph capture; PyTorch's values from tests/golden/attention_golden.json.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "golden_file.h"
#include "test_util.h"

using namespace minidl;
namespace F = minidl::nn::functional;
using minidl::testing::expect_close;
using minidl::testing::random_tensor;

namespace {

Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}

/// Attention by loops over (batch, query, key) in double: the values every other path is checked against.
/// q (B, L, E), k (B, S, E), v (B, S, Ev); mask undefined, bool (B, L, S) keep-where-true, or float (B, L, S) added.
Tensor loop_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                      double scale) {
  const std::int64_t B = q.size(0), L = q.size(1), E = q.size(2), S = k.size(1), Ev = v.size(2);
  const std::vector<double> qv = q.to(kFloat64).to_vector<double>(), kv = k.to(kFloat64).to_vector<double>(),
                            vv = v.to(kFloat64).to_vector<double>();
  std::vector<double> mv;
  if (mask.defined()) mv = mask.to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> out(static_cast<std::size_t>(B * L * Ev), 0.0);
  const double inf = std::numeric_limits<double>::infinity();
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t i = 0; i < L; ++i) {
      std::vector<double> s(static_cast<std::size_t>(S));
      double mx = -inf;
      for (std::int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (std::int64_t e = 0; e < E; ++e) dot += qv[(b * L + i) * E + e] * kv[(b * S + j) * E + e];
        double x = dot * scale;
        if (causal && j > i) x = -inf;
        if (mask.defined()) {
          const double m = mv[(b * L + i) * S + j];
          x = mask.dtype() == kBool ? (m != 0 ? x : -inf) : x + m;
        }
        s[j] = x;
        mx = std::max(mx, x);
      }
      if (mx == -inf) continue;  // every key masked out: zeros
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (std::int64_t j = 0; j < S; ++j) {
        for (std::int64_t e = 0; e < Ev; ++e) out[(b * L + i) * Ev + e] += s[j] / sum * vv[(b * S + j) * Ev + e];
      }
    }
  }
  return from_vector(out, {B, L, Ev}).to(q.dtype());
}

/// t (..., R, C) with its batch dims merged: (B, R, C), contiguous.
Tensor merged(const Tensor& t, const Shape& batch) {
  Shape s = batch;
  s.push_back(t.size(-2));
  s.push_back(t.size(-1));
  return t.expand(s).contiguous().reshape({-1, t.size(-2), t.size(-1)});
}

struct Case {
  std::string name;
  Shape q, k, v;
  Shape mask;  // empty: no mask
  bool bool_mask = false;
  bool causal = false;
  std::optional<double> scale;
};

std::vector<Case> cases() {
  return {
      {"plain", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, {}, false, false, std::nullopt},
      {"heads", {2, 3, 6, 8}, {2, 3, 6, 8}, {2, 3, 6, 8}, {}, false, false, std::nullopt},
      {"causal_square", {2, 3, 6, 4}, {2, 3, 6, 4}, {2, 3, 6, 5}, {}, false, true, std::nullopt},
      {"causal_L_lt_S", {3, 4, 4}, {3, 9, 4}, {3, 9, 4}, {}, false, true, std::nullopt},
      {"causal_L_gt_S", {3, 9, 4}, {3, 4, 4}, {3, 4, 2}, {}, false, true, 0.3},
      {"bool_mask_2d", {2, 2, 5, 4}, {2, 2, 6, 4}, {2, 2, 6, 4}, {5, 6}, true, false, std::nullopt},
      {"bool_mask_full", {2, 2, 5, 4}, {2, 2, 6, 4}, {2, 2, 6, 3}, {2, 2, 5, 6}, true, false, 0.7},
      {"float_mask", {2, 5, 4}, {2, 6, 4}, {2, 6, 4}, {2, 1, 6}, false, false, std::nullopt},
      {"broadcast_batch", {2, 3, 5, 4}, {1, 3, 6, 4}, {2, 1, 6, 4}, {}, false, false, std::nullopt},
      {"unbatched", {5, 4}, {6, 4}, {6, 2}, {5, 6}, true, false, std::nullopt},
      {"one_query", {2, 1, 4}, {2, 3, 4}, {2, 3, 4}, {}, false, true, std::nullopt},
  };
}

/// A bool mask with about a quarter of its entries false; a float mask of random values with some -inf.
Tensor make_mask(const Case& c, DType dtype) {
  const Tensor u = uniform(c.mask, 0.0, 1.0, kFloat64);
  if (c.bool_mask) return gt(u, 0.25);
  return where(lt(u, 0.2), -std::numeric_limits<double>::infinity(), u * 2.0 - 1.0).to(dtype);
}

Tensor run_case(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  return F::scaled_dot_product_attention(q, k, v, mask, 0.0, c.causal, c.scale);
}

}  // namespace

TEST(Attention, SdpaMatchesLoops) {
  for (DType dtype : {kFloat64, kFloat32}) {
    for (const Case& c : cases()) {
      const Tensor q = random_tensor(c.q, dtype), k = random_tensor(c.k, dtype), v = random_tensor(c.v, dtype);
      const Tensor mask = c.mask.empty() ? Tensor() : make_mask(c, dtype);
      const Tensor out = run_case(c, q, k, v, mask);
      Shape batch =
          broadcast_shapes(broadcast_shapes(Shape(c.q.begin(), c.q.end() - 2), Shape(c.k.begin(), c.k.end() - 2), "t"),
                           Shape(c.v.begin(), c.v.end() - 2), "t");
      Shape scores = batch;
      scores.push_back(c.q[c.q.size() - 2]);
      scores.push_back(c.k[c.k.size() - 2]);
      const double scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(c.q.back()));
      const Tensor expected = loop_attention(
          merged(q, batch), merged(k, batch), merged(v, batch),
          mask.defined() ? mask.expand(scores).contiguous().reshape({-1, scores[scores.size() - 2], scores.back()})
                         : Tensor(),
          c.causal, scale);
      Shape out_shape = batch;
      out_shape.push_back(c.q[c.q.size() - 2]);
      out_shape.push_back(c.v.back());
      ASSERT_EQ(out.sizes(), out_shape) << c.name;
      const double tol = dtype == kFloat64 ? 1e-12 : 1e-5;
      expect_close(out.reshape(expected.sizes()), expected, tol, tol, c.name + " " + dtype_name(dtype));
    }
  }
}

TEST(Attention, SdpaGradcheck) {
  for (const Case& c : cases()) {
    const Tensor q = leaf(random_tensor(c.q)), k = leaf(random_tensor(c.k)), v = leaf(random_tensor(c.v));
    const Tensor mask = c.mask.empty() ? Tensor() : make_mask(c, kFloat64);
    std::vector<Tensor> inputs{q, k, v};
    // A float mask is differentiable too (PyTorch's is); its -inf entries stay out of the check.
    const bool grad_mask = mask.defined() && !c.bool_mask;
    const Tensor finite_mask = grad_mask ? leaf(where(isinf(mask), -1.0, mask).detach()) : mask;
    if (grad_mask) inputs.push_back(finite_mask);
    try {
      EXPECT_TRUE(gradcheck(
          [&](const std::vector<Tensor>& in) { return run_case(c, in[0], in[1], in[2], grad_mask ? in[3] : mask); },
          inputs))
          << c.name;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
    }
  }
}

TEST(Attention, FullyMaskedRowsAreZeroWithFiniteGradients) {
  const Tensor q = leaf(random_tensor({2, 4, 3})), k = leaf(random_tensor({2, 5, 3})),
               v = leaf(random_tensor({2, 5, 3}));
  Tensor mask = gt(uniform({2, 4, 5}, 0.0, 1.0, kFloat64), 0.3);
  mask.index_put_({0, 1}, false);  // query 1 of batch 0 sees no key
  const Tensor out = F::scaled_dot_product_attention(q, k, v, mask);
  expect_close(out.select(0, 0).select(0, 1), zeros({3}, kFloat64), 0, 0, "masked row");
  out.sum().backward();
  for (const Tensor* t : {&q, &k, &v}) EXPECT_TRUE(isfinite(t->grad()).all().item<bool>());
  expect_close(q.grad().select(0, 0).select(0, 1), zeros({3}, kFloat64), 0, 0, "masked row's dq");
}

TEST(Attention, SdpaDropout) {
  const Tensor q = random_tensor({2, 4, 3}), k = random_tensor({2, 5, 3}), v = random_tensor({2, 5, 3});
  expect_close(F::scaled_dot_product_attention(q, k, v, {}, 1.0), zeros({2, 4, 3}, kFloat64), 0, 0, "p = 1");
  // The same seed draws the same weights' mask: the composed path with dropout applied by hand agrees.
  manual_seed(7);
  const Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.5);
  manual_seed(7);
  const Tensor w = F::dropout(softmax(matmul(q / std::sqrt(3.0), k.transpose(-2, -1)), -1), 0.5, true);
  expect_close(out, matmul(w, v), 1e-12, 1e-12, "p = 0.5");
}

TEST(Attention, SdpaNonContiguousHeadSplit) {
  // (N, L, H * d) split into heads by a transpose, as MultiheadAttention and every transformer does.
  const std::int64_t N = 2, L = 5, S = 6, H = 3, d = 4;
  const Tensor x = random_tensor({N, L, H * d}), y = random_tensor({N, S, 2 * H * d});
  const Tensor q = x.reshape({N, L, H, d}).transpose(1, 2);
  const Tensor k = y.narrow(2, 0, H * d).reshape({N, S, H, d}).transpose(1, 2);
  const Tensor v = y.narrow(2, H * d, H * d).reshape({N, S, H, d}).transpose(1, 2);
  ASSERT_FALSE(q.is_contiguous());
  for (bool causal : {false, true}) {
    expect_close(F::scaled_dot_product_attention(q, k, v, {}, 0.0, causal),
                 F::scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), {}, 0.0, causal),
                 1e-14, 1e-14, causal ? "causal" : "plain");
  }
}

TEST(Attention, SdpaEmpty) {
  const Tensor q = leaf(random_tensor({0, 3, 5, 4})), k = leaf(random_tensor({0, 3, 6, 4})),
               v = leaf(random_tensor({0, 3, 6, 2}));
  const Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  EXPECT_EQ(out.sizes(), (Shape{0, 3, 5, 2}));
  out.sum().backward();
  EXPECT_EQ(q.grad().sizes(), q.sizes());
  // No keys: every query gets zeros (PyTorch's math path), with a mask or without.
  const Tensor none =
      F::scaled_dot_product_attention(random_tensor({2, 3, 4}), random_tensor({2, 0, 4}), random_tensor({2, 0, 5}));
  expect_close(none, zeros({2, 3, 5}, kFloat64), 0, 0, "S = 0");
}

TEST(Attention, SdpaBadInput) {
  const Tensor q = random_tensor({2, 5, 4}), k = random_tensor({2, 6, 4}), v = random_tensor({2, 6, 3});
  EXPECT_ERROR(ValueError, F::scaled_dot_product_attention(q, random_tensor({2, 6, 3}), v),
               "scaled_dot_product_attention", "E (4)", "[2, 6, 3]");
  EXPECT_ERROR(ValueError, F::scaled_dot_product_attention(q, k, random_tensor({2, 7, 3})),
               "scaled_dot_product_attention", "same number of rows S");
  EXPECT_ERROR(ValueError, F::scaled_dot_product_attention(random_tensor({4}), k, v), "scaled_dot_product_attention",
               "(..., L, E)");
  EXPECT_ERROR(ValueError, F::scaled_dot_product_attention(q, k, v, ones({5, 7}, kBool)), "attn_mask", "[5, 7]",
               "[2, 5, 6]");
  EXPECT_ERROR(ValueError, F::scaled_dot_product_attention(q, k, v, ones({5, 6}, kBool), 0.0, true), "attn_mask",
               "is_causal");
  EXPECT_ERROR(TypeError, F::scaled_dot_product_attention(q, k, v, ones({5, 6}, kInt64)), "attn_mask", "int64");
  EXPECT_ERROR(TypeError, F::scaled_dot_product_attention(q, k.to(kFloat32), v), "scaled_dot_product_attention");
  EXPECT_ERROR(ValueError, F::scaled_dot_product_attention(q, k, v, {}, 1.5), "dropout_p", "1.5");
  EXPECT_ERROR(ValueError, F::scaled_dot_product_attention(random_tensor({2, 5, 4}), random_tensor({3, 6, 4}), v),
               "scaled_dot_product_attention");
}

// ---- MultiheadAttention ---------------------------------------------------------------------------------------

TEST(Attention, MultiheadParametersAndInit) {
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2));
  std::vector<std::string> names;
  for (const auto& p : mha->named_parameters()) names.push_back(p.first);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(mha->in_proj_weight.sizes(), (Shape{24, 8}));
  EXPECT_EQ(mha->in_proj_bias.sizes(), (Shape{24}));
  EXPECT_EQ(mha->head_dim, 4);
  expect_close(mha->in_proj_bias, zeros({24}), 0, 0, "in_proj_bias");
  expect_close(mha->out_proj->bias, zeros({8}), 0, 0, "out_proj.bias");
  const double bound = std::sqrt(6.0 / (8 + 24));  // xavier_uniform_ over (3E, E)
  EXPECT_LE(mha->in_proj_weight.abs().max().item<float>(), bound);
  EXPECT_GT(mha->in_proj_weight.abs().max().item<float>(), 0.8 * bound);

  nn::MultiheadAttention cross(nn::MultiheadAttentionOptions(8, 4).kdim(5).vdim(3).bias(false).add_bias_kv(true));
  names.clear();
  for (const auto& p : cross->named_parameters()) names.push_back(p.first);
  EXPECT_EQ(names, (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "bias_k", "bias_v",
                                             "out_proj.weight"}));
  EXPECT_EQ(cross->k_proj_weight.sizes(), (Shape{8, 5}));
  EXPECT_EQ(cross->v_proj_weight.sizes(), (Shape{8, 3}));
  EXPECT_EQ(cross->bias_k.sizes(), (Shape{1, 1, 8}));
}

namespace {
/// MultiheadAttention by its definition, one head at a time from slices of the projection weights.
Tensor mha_by_heads(nn::MultiheadAttentionImpl& m, const Tensor& query, const Tensor& key, const Tensor& value,
                    const Tensor& additive_mask) {
  const std::int64_t H = m.options.num_heads(), d = m.head_dim;
  const std::vector<Tensor> w = m.in_proj_weight.chunk(3), b = m.in_proj_bias.chunk(3);
  std::vector<Tensor> heads;
  for (std::int64_t h = 0; h < H; ++h) {
    const auto proj = [&](const Tensor& x, int i) {
      return F::linear(x, w[i].narrow(0, h * d, d), b[i].narrow(0, h * d, d)).transpose(0, 1);  // (N, *, d)
    };
    Tensor s = matmul(proj(query, 0), proj(key, 1).transpose(1, 2)) / std::sqrt(static_cast<double>(d));
    if (additive_mask.defined()) s = s + additive_mask;
    heads.push_back(matmul(softmax(s, -1), proj(value, 2)));  // (N, L, d)
  }
  return F::linear(cat(heads, -1).transpose(0, 1), m.out_proj->weight, m.out_proj->bias);
}
}  // namespace

TEST(Attention, MultiheadMatchesDefinition) {
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(6, 3));
  mha->to(kFloat64);
  nn::init::uniform_(mha->in_proj_bias, -0.5, 0.5);  // nonzero biases take part
  nn::init::uniform_(mha->out_proj->bias, -0.5, 0.5);
  const std::int64_t L = 4, S = 5, N = 2;
  const Tensor q = random_tensor({L, N, 6}), k = random_tensor({S, N, 6}), v = random_tensor({S, N, 6});
  Tensor attn = gt(uniform({L, S}, 0.0, 1.0, kFloat64), 0.8);     // true: not allowed
  Tensor padding = gt(uniform({N, S}, 0.0, 1.0, kFloat64), 0.8);  // true: ignore that key
  attn.index_put_({indexing::Slice(), 0}, false);                 // every query keeps key 0
  padding.index_put_({indexing::Slice(), 0}, false);
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor additive = where(attn, -inf, 0.0).unsqueeze(0) + where(padding, -inf, 0.0).unsqueeze(1);
  const Tensor expected = mha_by_heads(*mha, q, k, v, additive);
  for (bool need_weights : {true, false}) {
    auto [out, w] = mha->forward(q, k, v, padding, need_weights, attn);
    expect_close(out, expected, 1e-12, 1e-12, need_weights ? "need_weights" : "sdpa");
    EXPECT_EQ(w.defined(), need_weights);
    if (need_weights) {
      EXPECT_EQ(w.sizes(), (Shape{N, L, S}));
      expect_close(w.sum({-1}), ones({N, L}, kFloat64), 1e-12, 1e-12, "weights sum to 1");
      auto [out2, per_head] = mha->forward(q, k, v, padding, true, attn, false);
      EXPECT_EQ(per_head.sizes(), (Shape{N, 3, L, S}));
      expect_close(per_head.mean({1}), w, 1e-14, 1e-14, "average_attn_weights");
    }
  }
  // Self-attention (one tensor) takes the fused projection: the same values.
  auto [self_out, self_w] = mha->forward(q, q, q);
  expect_close(self_out, mha_by_heads(*mha, q, q, q, Tensor()), 1e-12, 1e-12, "self-attention");
}

TEST(Attention, MultiheadVariantsAgreeAcrossPaths) {
  const std::int64_t L = 3, S = 4, N = 2;
  for (const auto& o :
       {nn::MultiheadAttentionOptions(8, 2).kdim(5).vdim(3), nn::MultiheadAttentionOptions(8, 4).add_bias_kv(true),
        nn::MultiheadAttentionOptions(8, 2).add_zero_attn(true).bias(false),
        nn::MultiheadAttentionOptions(8, 1).add_bias_kv(true).add_zero_attn(true)}) {
    nn::MultiheadAttention mha(o);
    mha->to(kFloat64);
    const Tensor q = random_tensor({L, N, 8}), k = random_tensor({S, N, o.kdim()}), v = random_tensor({S, N, o.vdim()});
    const Tensor attn = random_tensor({N * o.num_heads(), L, S});  // float mask, 3-D
    auto [a, w] = mha->forward(q, k, v, {}, true, attn);
    auto [b, none] = mha->forward(q, k, v, {}, false, attn);
    EXPECT_EQ(a.sizes(), (Shape{L, N, 8}));
    const std::int64_t extra = (o.add_bias_kv() ? 1 : 0) + (o.add_zero_attn() ? 1 : 0);
    EXPECT_EQ(w.sizes(), (Shape{N, L, S + extra}));
    expect_close(a, b, 1e-12, 1e-12, "need_weights true vs false");
  }
}

TEST(Attention, MultiheadGradcheck) {
  for (const auto& o : {nn::MultiheadAttentionOptions(4, 2), nn::MultiheadAttentionOptions(4, 2).kdim(3).vdim(5),
                        nn::MultiheadAttentionOptions(4, 1).add_bias_kv(true).add_zero_attn(true)}) {
    nn::MultiheadAttention mha(o);
    mha->to(kFloat64);
    std::vector<Tensor> inputs{leaf(random_tensor({3, 2, 4})), leaf(random_tensor({5, 2, o.kdim()})),
                               leaf(random_tensor({5, 2, o.vdim()}))};
    for (const Tensor& p : mha->parameters()) inputs.push_back(p);
    Tensor padding = gt(uniform({2, 5}, 0.0, 1.0, kFloat64), 0.7);
    padding.index_put_({indexing::Slice(), 0}, false);
    for (bool need_weights : {true, false}) {
      try {
        EXPECT_TRUE(gradcheck(
            [&](const std::vector<Tensor>& in) {
              auto [out, w] = mha->forward(in[0], in[1], in[2], padding, need_weights);
              return need_weights ? out.sum() + (w * w).sum() : out;
            },
            inputs));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "need_weights " << need_weights << ": " << e.what();
      }
    }
  }
}

TEST(Attention, MultiheadBadInputAndPrinting) {
  EXPECT_ERROR(ValueError, nn::MultiheadAttention(nn::MultiheadAttentionOptions(10, 3)), "MultiheadAttention",
               "embed_dim (10)", "num_heads (3)");
  nn::MultiheadAttention mha(8, 2);
  const Tensor q = random_tensor({3, 2, 8}, kFloat32), kv = random_tensor({4, 2, 8}, kFloat32);
  EXPECT_ERROR(ValueError, mha(q, random_tensor({4, 2, 7}, kFloat32), kv), "MultiheadAttention", "kdim 8", "[4, 2, 7]");
  EXPECT_ERROR(ValueError, mha(random_tensor({3, 8}, kFloat32), kv, kv), "MultiheadAttention", "(L, N, E)");
  EXPECT_ERROR(ValueError, mha->forward(q, kv, kv, Tensor(), true, ones({3, 5}, kBool)), "attn_mask", "[3, 5]");
  EXPECT_ERROR(ValueError, mha(q, kv, kv, ones({2, 3}, kBool)), "key_padding_mask", "[2, 3]");
  EXPECT_ERROR(TypeError, mha->forward(q, kv, kv, Tensor(), true, ones({3, 4}, kInt64)), "attn_mask", "int64");
  EXPECT_ERROR(ValueError, mha(q, random_tensor({4, 3, 8}, kFloat32), random_tensor({4, 3, 8}, kFloat32)),
               "MultiheadAttention", "batch size N = 2");
  std::ostringstream os;
  os << *mha;
  EXPECT_NE(os.str().find("MultiheadAttention"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("(out_proj): Linear(in_features=8, out_features=8, bias=true)"), std::string::npos)
      << os.str();
}

// ---- GPU: the flash-attention kernels against the reference path ----------------------------------------------

namespace {
/// Runs f with the flash kernels on or off, restoring the setting.
template <class Fn>
auto with_flash(bool on, Fn&& f) {
  const bool prev = cuda::flash_attention_enabled();
  cuda::set_flash_attention_enabled(on);
  auto r = f();
  cuda::set_flash_attention_enabled(prev);
  return r;
}

/// Output and the three gradients for a random output gradient.
std::vector<Tensor> forward_backward(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& g,
                                     bool causal) {
  const Tensor q = leaf(q0.detach()), k = leaf(k0.detach()), v = leaf(v0.detach());
  const Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, causal);
  out.backward(g);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}
}  // namespace

TEST(AttentionGpu, FlashMatchesReference) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(true, false);
  const Device gpu("cuda");
  struct Dims {
    std::int64_t L, S, E, Ev;
  };
  const std::vector<Dims> dims = {{1, 1, 64, 64},     {7, 7, 64, 64},       {129, 129, 64, 64}, {129, 7, 32, 32},
                                  {7, 129, 128, 128}, {200, 130, 128, 128}, {65, 64, 16, 16},   {70, 90, 80, 48},
                                  {33, 100, 24, 96},  {256, 256, 64, 64}};
  for (const Dims& d : dims) {
    for (bool causal : {false, true}) {
      const Tensor q = random_tensor({2, 3, d.L, d.E}, kFloat32).to(gpu),
                   k = random_tensor({2, 3, d.S, d.E}, kFloat32).to(gpu);
      const Tensor v = random_tensor({2, 3, d.S, d.Ev}, kFloat32).to(gpu),
                   g = random_tensor({2, 3, d.L, d.Ev}, kFloat32).to(gpu);
      const auto fused = with_flash(true, [&] { return forward_backward(q, k, v, g, causal); });
      const auto ref = with_flash(false, [&] { return forward_backward(q, k, v, g, causal); });
      const std::string what = "L " + std::to_string(d.L) + " S " + std::to_string(d.S) + " E " + std::to_string(d.E) +
                               " Ev " + std::to_string(d.Ev) + (causal ? " causal" : "");
      const char* names[] = {"out", "dq", "dk", "dv"};
      for (int i = 0; i < 4; ++i) expect_close(fused[i], ref[i], 1e-4, 1e-5, what + " " + names[i]);
    }
  }
}

TEST(AttentionGpu, FlashNonContiguousAndBatchShapes) {
  MINIDL_REQUIRE_GPU();
  const Device gpu("cuda");
  const std::int64_t N = 2, L = 70, H = 4, d = 32;
  const Tensor x = random_tensor({N, L, 3 * H * d}, kFloat32).to(gpu);
  const auto split = [&](int i) { return x.narrow(2, i * H * d, H * d).reshape({N, L, H, d}).transpose(1, 2); };
  const Tensor g = random_tensor({N, H, L, d}, kFloat32).to(gpu);
  const auto fused = with_flash(true, [&] { return forward_backward(split(0), split(1), split(2), g, true); });
  const auto ref = with_flash(false, [&] {
    return forward_backward(split(0).contiguous(), split(1).contiguous(), split(2).contiguous(), g, true);
  });
  for (int i = 0; i < 4; ++i) expect_close(fused[i], ref[i], 1e-4, 1e-5, "head split " + std::to_string(i));
  // Three-dim and five-dim batches.
  for (const Shape& batch : {Shape{}, Shape{3}, Shape{2, 2, 3}}) {
    Shape qs = batch, vs = batch;
    qs.insert(qs.end(), {9, 16});
    vs.insert(vs.end(), {9, 8});
    const Tensor q = random_tensor(qs, kFloat32).to(gpu), k = random_tensor(qs, kFloat32).to(gpu);
    const Tensor v = random_tensor(vs, kFloat32).to(gpu), gg = random_tensor(vs, kFloat32).to(gpu);
    const auto f = with_flash(true, [&] { return forward_backward(q, k, v, gg, false); });
    const auto r = with_flash(false, [&] { return forward_backward(q, k, v, gg, false); });
    for (int i = 0; i < 4; ++i) expect_close(f[i], r[i], 1e-4, 1e-5, "batch " + shape_str(batch));
  }
}

TEST(AttentionGpu, EmptyBatch) {
  MINIDL_REQUIRE_GPU();
  const Device gpu("cuda");
  const Tensor q = leaf(random_tensor({0, 3, 5, 64}, kFloat32).to(gpu));
  const Tensor k = leaf(random_tensor({0, 3, 6, 64}, kFloat32).to(gpu));
  const Tensor v = leaf(random_tensor({0, 3, 6, 64}, kFloat32).to(gpu));
  const Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  EXPECT_EQ(out.sizes(), (Shape{0, 3, 5, 64}));
  out.sum().backward();
  EXPECT_EQ(k.grad().sizes(), k.sizes());
}

TEST(AttentionGpu, CpuVsGpu) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(true, false);
  const Device gpu("cuda");
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Case& c : cases()) {
      const Tensor q = random_tensor(c.q, dtype), k = random_tensor(c.k, dtype), v = random_tensor(c.v, dtype);
      const Tensor mask = c.mask.empty() ? Tensor() : make_mask(c, dtype);
      const Tensor cpu = run_case(c, q, k, v, mask);
      const Tensor cuda = run_case(c, q.to(gpu), k.to(gpu), v.to(gpu), mask.defined() ? mask.to(gpu) : mask);
      const double tol = dtype == kFloat64 ? 1e-12 : 1e-5;
      expect_close(cuda, cpu, tol, tol, c.name + " " + dtype_name(dtype));
    }
  }
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(16, 4));
  const Tensor x = random_tensor({9, 2, 16}, kFloat32);
  auto [cpu_out, cpu_w] = mha->forward(x, x, x);
  mha->to(gpu);
  for (bool need_weights : {true, false}) {
    auto [out, w] = mha->forward(x.to(gpu), x.to(gpu), x.to(gpu), {}, need_weights);
    expect_close(out, cpu_out, 1e-4, 1e-5, "MultiheadAttention");
    if (need_weights) expect_close(w, cpu_w, 1e-4, 1e-5, "MultiheadAttention weights");
  }
}

TEST(AttentionGpu, FlashCapturedInAGraph) {
  MINIDL_REQUIRE_GPU();
  const Device gpu("cuda");
  const Tensor q = leaf(random_tensor({2, 2, 100, 64}, kFloat32).to(gpu));
  const Tensor k = leaf(random_tensor({2, 2, 100, 64}, kFloat32).to(gpu));
  const Tensor v = leaf(random_tensor({2, 2, 100, 64}, kFloat32).to(gpu));
  const auto step = [&] {
    const Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    out.sum().backward();
    return out;
  };
  const Tensor eager = step().detach().clone();
  const Tensor eager_dq = q.grad().clone();
  for (const Tensor* t : {&q, &k, &v}) t->grad().zero_();
  cuda::CUDAGraph graph;
  graph.capture_begin();
  const Tensor captured = step();
  graph.capture_end();
  for (const Tensor* t : {&q, &k, &v}) t->grad().zero_();
  graph.replay();
  expect_close(captured, eager, 0, 0, "captured forward");
  expect_close(q.grad(), eager_dq, 0, 0, "captured dq");
}

// ---- PyTorch's values -----------------------------------------------------------------------------------------

namespace {
Tensor golden_tensor(const nlohmann::json& j) {
  std::vector<double> values;
  for (const auto& x : j.at("data")) values.push_back(minidl::testing::golden_number(x));
  const Shape shape = j.at("shape").get<std::vector<std::int64_t>>();
  const Tensor t = from_vector(values, shape);
  return j.at("dtype").get<std::string>() == "bool" ? t.to(kBool) : t;
}
}  // namespace

TEST(Attention, GoldenSdpa) {
  const auto golden = minidl::testing::read_golden("attention_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(golden, "attention_golden.json", "gen_attention_golden.py");
  ASSERT_FALSE(golden.at("sdpa").empty());
  for (const auto& c : golden.at("sdpa")) {
    const std::string name = c.at("name");
    const Tensor q = leaf(golden_tensor(c.at("query"))), k = leaf(golden_tensor(c.at("key"))),
                 v = leaf(golden_tensor(c.at("value")));
    const Tensor mask = c.at("attn_mask").is_null() ? Tensor() : golden_tensor(c.at("attn_mask"));
    std::optional<double> scale;
    if (!c.at("scale").is_null()) scale = c.at("scale").get<double>();
    const Tensor out = F::scaled_dot_product_attention(q, k, v, mask, 0.0, c.at("is_causal").get<bool>(), scale);
    expect_close(out, golden_tensor(c.at("out")), 1e-10, 1e-12, name + " out");
    out.backward(golden_tensor(c.at("grad_out")));
    expect_close(q.grad(), golden_tensor(c.at("grad_query")), 1e-10, 1e-12, name + " dq");
    expect_close(k.grad(), golden_tensor(c.at("grad_key")), 1e-10, 1e-12, name + " dk");
    expect_close(v.grad(), golden_tensor(c.at("grad_value")), 1e-10, 1e-12, name + " dv");
  }
}

TEST(Attention, GoldenMultihead) {
  const auto golden = minidl::testing::read_golden("attention_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(golden, "attention_golden.json", "gen_attention_golden.py");
  ASSERT_FALSE(golden.at("mha").empty());
  for (const auto& c : golden.at("mha")) {
    const std::string name = c.at("name");
    const auto& o = c.at("options");
    nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(o.at("embed_dim"), o.at("num_heads"))
                                   .bias(o.at("bias"))
                                   .add_bias_kv(o.at("add_bias_kv"))
                                   .add_zero_attn(o.at("add_zero_attn"))
                                   .kdim(o.at("kdim"))
                                   .vdim(o.at("vdim")));
    mha->to(kFloat64);
    std::vector<std::string> names;
    for (auto& [pname, p] : mha->named_parameters()) {
      names.push_back(pname);
      NoGradGuard no_grad;
      p.copy_(golden_tensor(c.at("state_dict").at(pname)));
    }
    EXPECT_EQ(names.size(), c.at("state_dict").size()) << name << ": parameter names differ from PyTorch's";
    const auto opt = [&](const char* key) { return c.at(key).is_null() ? Tensor() : golden_tensor(c.at(key)); };
    const Tensor q = golden_tensor(c.at("query")), k = golden_tensor(c.at("key")), v = golden_tensor(c.at("value"));
    for (bool need_weights : {true, false}) {
      auto [out, w] = mha->forward(q, k, v, opt("key_padding_mask"), need_weights, opt("attn_mask"),
                                   c.at("average_attn_weights").get<bool>());
      expect_close(out, golden_tensor(c.at("out")), 1e-10, 1e-12, name + " out");
      if (need_weights) expect_close(w, golden_tensor(c.at("weights")), 1e-10, 1e-12, name + " weights");
    }
  }
}
