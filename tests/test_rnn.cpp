// Recurrent layers (nn::RNN, LSTM, GRU and their cells): float64 gradcheck of modules and cells; the fused
// recurrence against the same layers composed from elementwise ops (forward and every gradient, float32 and
// float64); CPU against GPU; the GPU's cuDNN path against its own kernels and the CPU, its parameter views (after
// optimizer steps, moves, checkpoint loads), a captured CUDA graph and dropout; strided, empty and unbatched
// inputs; typed errors for bad input; PyTorch's results (tests/golden/gen_rnn_golden.py).
#include <map>
#include <sstream>

#include "file_helpers.h"
#include "golden_file.h"
#include "test_util.h"

namespace minidl {
namespace {

using testing::expect_close;
using testing::random_tensor;
using i64 = std::int64_t;

enum class Kind { Tanh, Relu, LSTM, GRU };
const char* kind_name(Kind k) {
  return k == Kind::Tanh ? "RNN(tanh)" : k == Kind::Relu ? "RNN(relu)" : k == Kind::LSTM ? "LSTM" : "GRU";
}
constexpr Kind kKinds[] = {Kind::Tanh, Kind::Relu, Kind::LSTM, Kind::GRU};

struct Config {
  i64 input = 3, hidden = 4, layers = 1;
  bool bidirectional = false, batch_first = false, bias = true;
  double dropout = 0.0;
};

std::shared_ptr<nn::Module> make_layer(Kind k, const Config& c) {
  switch (k) {
    case Kind::LSTM:
      return nn::LSTM(nn::LSTMOptions(c.input, c.hidden)
                          .num_layers(c.layers)
                          .bidirectional(c.bidirectional)
                          .batch_first(c.batch_first)
                          .bias(c.bias)
                          .dropout(c.dropout))
          .ptr();
    case Kind::GRU:
      return nn::GRU(nn::GRUOptions(c.input, c.hidden)
                         .num_layers(c.layers)
                         .bidirectional(c.bidirectional)
                         .batch_first(c.batch_first)
                         .bias(c.bias)
                         .dropout(c.dropout))
          .ptr();
    default:
      return nn::RNN(nn::RNNOptions(c.input, c.hidden)
                         .num_layers(c.layers)
                         .bidirectional(c.bidirectional)
                         .batch_first(c.batch_first)
                         .bias(c.bias)
                         .dropout(c.dropout)
                         .nonlinearity(k == Kind::Relu ? nn::RNNNonlinearity(kReLU) : nn::RNNNonlinearity(kTanh)))
          .ptr();
  }
}

struct Result {
  Tensor out, h, c;
};

/// forward of the layer behind `m`, with (h0, c0) when h0 is defined.
Result run_layer(nn::Module& m, Kind k, const Tensor& x, const Tensor& h0, const Tensor& c0) {
  if (k == Kind::LSTM) {
    auto& lstm = dynamic_cast<nn::LSTMImpl&>(m);
    auto [out, hc] = h0.defined() ? lstm.forward(x, std::make_tuple(h0, c0)) : lstm.forward(x);
    return {out, std::get<0>(hc), std::get<1>(hc)};
  }
  if (k == Kind::GRU) {
    auto [out, h] = dynamic_cast<nn::GRUImpl&>(m).forward(x, h0);
    return {out, h, Tensor()};
  }
  auto [out, h] = dynamic_cast<nn::RNNImpl&>(m).forward(x, h0);
  return {out, h, Tensor()};
}

std::map<std::string, Tensor> params_of(const nn::Module& m) {
  std::map<std::string, Tensor> p;
  for (const auto& [n, t] : m.named_parameters()) p[n] = t;
  return p;
}

/// One step of the cell of kind k composed from differentiable elementwise ops (PyTorch's formulas).
std::pair<Tensor, Tensor> reference_step(Kind k, const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih,
                                         const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  Tensor gi = matmul(x, w_ih.t()), gh = matmul(h, w_hh.t());
  if (b_ih.defined()) {
    gi = gi + b_ih;
    gh = gh + b_hh;
  }
  if (k == Kind::LSTM) {
    const auto g = chunk(gi + gh, 4, 1);
    const Tensor cn = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
    return {sigmoid(g[3]) * tanh(cn), cn};
  }
  if (k == Kind::GRU) {
    const auto a = chunk(gi, 3, 1), b = chunk(gh, 3, 1);
    const Tensor r = sigmoid(a[0] + b[0]), z = sigmoid(a[1] + b[1]);
    const Tensor n = tanh(a[2] + r * b[2]);
    return {(1.0 - z) * n + z * h, Tensor()};
  }
  return {k == Kind::Tanh ? tanh(gi + gh) : relu(gi + gh), Tensor()};
}

/// The whole layer composed step by step from reference_step with the module's parameters (batched input).
Result reference_layer(Kind k, const Config& c, const std::map<std::string, Tensor>& p, const Tensor& x,
                       const Tensor& h0, const Tensor& c0) {
  const Tensor xt = c.batch_first ? x.transpose(0, 1) : x;
  const i64 T = xt.size(0), B = xt.size(1), D = c.bidirectional ? 2 : 1;
  std::vector<Tensor> hn, cn;
  Tensor in = xt;
  for (i64 l = 0; l < c.layers; ++l) {
    std::vector<Tensor> outs;
    for (i64 d = 0; d < D; ++d) {
      const std::string sfx = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      const auto get = [&](const std::string& n) { return p.count(n) ? p.at(n) : Tensor(); };
      Tensor h = h0.defined() ? h0.select(0, l * D + d) : zeros({B, c.hidden}, TensorOptions(x.dtype()));
      Tensor cs = c0.defined() ? c0.select(0, l * D + d) : zeros({B, c.hidden}, TensorOptions(x.dtype()));
      std::vector<Tensor> ys(static_cast<std::size_t>(T));
      for (i64 s = 0; s < T; ++s) {
        const i64 t = d == 1 ? T - 1 - s : s;
        auto [hn_, cn_] = reference_step(k, in.select(0, t), h, cs, get("weight_ih" + sfx), get("weight_hh" + sfx),
                                         get("bias_ih" + sfx), get("bias_hh" + sfx));
        h = hn_;
        cs = cn_;
        ys[static_cast<std::size_t>(t)] = h;
      }
      outs.push_back(stack(ys, 0));
      hn.push_back(h);
      cn.push_back(cs);
    }
    in = D == 2 ? cat(outs, 2) : outs[0];
  }
  return {c.batch_first ? in.transpose(0, 1) : in, stack(hn, 0), k == Kind::LSTM ? stack(cn, 0) : Tensor()};
}

/// The outputs flattened into one tensor (gradcheck's single output).
Tensor flat(const Result& r) {
  std::vector<Tensor> parts{r.out.reshape({-1}), r.h.reshape({-1})};
  if (r.c.defined()) parts.push_back(r.c.reshape({-1}));
  return cat(parts, 0);
}

std::string describe(Kind k, const Config& c, bool states) {
  std::ostringstream os;
  os << kind_name(k) << " layers=" << c.layers << (c.bidirectional ? " bidirectional" : "")
     << (c.batch_first ? " batch_first" : "") << (c.bias ? "" : " no bias") << (states ? " with states" : "");
  return os.str();
}

Shape input_shape(const Config& c, i64 T, i64 B) { return c.batch_first ? Shape{B, T, c.input} : Shape{T, B, c.input}; }

// ---- gradcheck ----------------------------------------------------------------------------------------------

TEST(RnnGradcheck, SequenceLayers) {
  const Config configs[] = {
      [] {
        Config c;
        c.layers = 2;
        c.bidirectional = true;
        c.batch_first = true;
        return c;
      }(),
      [] {
        Config c;
        c.layers = 2;
        return c;
      }(),
      [] {
        Config c;
        c.bidirectional = true;
        c.bias = false;
        return c;
      }(),
  };
  const i64 T = 3, B = 2;
  for (Kind k : kKinds) {
    for (const Config& c : configs) {
      for (bool states : {false, true}) {
        SCOPED_TRACE(describe(k, c, states));
        auto m = make_layer(k, c);
        m->to(kFloat64);
        const i64 D = c.bidirectional ? 2 : 1;
        std::vector<Tensor> inputs{random_tensor(input_shape(c, T, B), kFloat64, true)};
        if (states) {
          inputs.push_back(random_tensor({c.layers * D, B, c.hidden}, kFloat64, true));
          if (k == Kind::LSTM) inputs.push_back(random_tensor({c.layers * D, B, c.hidden}, kFloat64, true));
        }
        for (const Tensor& p : m->parameters()) inputs.push_back(p);
        EXPECT_TRUE(gradcheck(
            [&](const std::vector<Tensor>& in) {
              return flat(
                  run_layer(*m, k, in[0], states ? in[1] : Tensor(), states && k == Kind::LSTM ? in[2] : Tensor()));
            },
            inputs));
      }
    }
  }
}

TEST(RnnGradcheck, Cells) {
  for (Kind k : kKinds) {
    for (bool states : {false, true}) {
      for (bool bias : {true, false}) {
        SCOPED_TRACE(std::string(kind_name(k)) + " cell" + (states ? " with states" : "") + (bias ? "" : " no bias"));
        std::shared_ptr<nn::Module> m;
        if (k == Kind::LSTM) m = nn::LSTMCell(nn::LSTMCellOptions(3, 4).bias(bias)).ptr();
        if (k == Kind::GRU) m = nn::GRUCell(nn::GRUCellOptions(3, 4).bias(bias)).ptr();
        if (k == Kind::Tanh) m = nn::RNNCell(nn::RNNCellOptions(3, 4).bias(bias)).ptr();
        if (k == Kind::Relu) m = nn::RNNCell(nn::RNNCellOptions(3, 4).bias(bias).nonlinearity(kReLU)).ptr();
        m->to(kFloat64);
        std::vector<Tensor> inputs{random_tensor({2, 3}, kFloat64, true), random_tensor({2, 4}, kFloat64, true),
                                   random_tensor({2, 4}, kFloat64, true)};
        for (const Tensor& p : m->parameters()) inputs.push_back(p);
        EXPECT_TRUE(gradcheck(
            [&](const std::vector<Tensor>& in) {
              const Tensor h = states ? in[1] : Tensor();
              if (k == Kind::LSTM) {
                auto& cell = dynamic_cast<nn::LSTMCellImpl&>(*m);
                auto [h1, c1] = states ? cell.forward(in[0], std::make_tuple(in[1], in[2])) : cell.forward(in[0]);
                return cat({h1.reshape({-1}), c1.reshape({-1})}, 0);
              }
              if (k == Kind::GRU) return dynamic_cast<nn::GRUCellImpl&>(*m).forward(in[0], h);
              return dynamic_cast<nn::RNNCellImpl&>(*m).forward(in[0], h);
            },
            inputs));
      }
    }
  }
}

// ---- the fused recurrence against the composed reference -----------------------------------------------------

/// Forward values and the gradients of input, states and every parameter for one upstream gradient, fused
/// against composed, in `dtype`.
void compare_with_reference(Kind k, const Config& c, bool states, DType dtype, double tol, i64 T = 5, i64 B = 3) {
  SCOPED_TRACE(describe(k, c, states) + " " + dtype_name(dtype));
  auto m = make_layer(k, c);
  m->to(dtype);
  const i64 D = c.bidirectional ? 2 : 1;
  const Tensor x = random_tensor(input_shape(c, T, B), dtype, true);
  const Tensor h0 = states ? random_tensor({c.layers * D, B, c.hidden}, dtype, true) : Tensor();
  const Tensor c0 = states && k == Kind::LSTM ? random_tensor({c.layers * D, B, c.hidden}, dtype, true) : Tensor();
  const Result got = run_layer(*m, k, x, h0, c0);
  const auto params = params_of(*m);
  // The reference runs on copies of the leaves, so that the two gradients land apart.
  std::map<std::string, Tensor> ref_params;
  for (const auto& [n, p] : params) ref_params[n] = p.detach().clone().requires_grad_(true);
  const auto leaf = [](const Tensor& t) { return t.defined() ? t.detach().clone().requires_grad_(true) : Tensor(); };
  const Tensor rx = leaf(x), rh0 = leaf(h0), rc0 = leaf(c0);
  const Result want = reference_layer(k, c, ref_params, rx, rh0, rc0);
  expect_close(got.out, want.out, tol, tol, "output");
  expect_close(got.h, want.h, tol, tol, "h_n");
  if (k == Kind::LSTM) expect_close(got.c, want.c, tol, tol, "c_n");

  const Tensor g = random_tensor(flat(want).sizes(), dtype);
  flat(got).backward(g);
  flat(want).backward(g);
  expect_close(x.grad(), rx.grad(), tol, tol, "input grad");
  if (states) expect_close(h0.grad(), rh0.grad(), tol, tol, "h_0 grad");
  if (c0.defined()) expect_close(c0.grad(), rc0.grad(), tol, tol, "c_0 grad");
  for (const auto& [n, p] : params) expect_close(p.grad(), ref_params[n].grad(), tol, tol, n + " grad");
}

TEST(RnnFused, MatchesComposedReference) {
  for (Kind k : kKinds) {
    for (DType dt : {kFloat64, kFloat32}) {
      const double tol = dt == kFloat64 ? 1e-12 : 2e-5;
      Config deep;
      deep.layers = 3;
      deep.bidirectional = true;
      deep.hidden = 7;
      deep.input = 5;
      compare_with_reference(k, deep, true, dt, tol);
      compare_with_reference(k, deep, false, dt, tol);
      Config bf;
      bf.batch_first = true;
      bf.bias = false;
      compare_with_reference(k, bf, true, dt, tol, 1, 4);
      compare_with_reference(k, bf, false, dt, tol, 6, 1);
    }
  }
}

TEST(RnnFused, CellsMatchComposedStep) {
  for (Kind k : kKinds) {
    for (DType dt : {kFloat64, kFloat32}) {
      SCOPED_TRACE(std::string(kind_name(k)) + " cell " + dtype_name(dt));
      const double tol = dt == kFloat64 ? 1e-12 : 2e-5;
      std::shared_ptr<nn::Module> m;
      if (k == Kind::LSTM) m = nn::LSTMCell(6, 5).ptr();
      if (k == Kind::GRU) m = nn::GRUCell(6, 5).ptr();
      if (k == Kind::Tanh) m = nn::RNNCell(6, 5).ptr();
      if (k == Kind::Relu) m = nn::RNNCell(nn::RNNCellOptions(6, 5).nonlinearity(kReLU)).ptr();
      m->to(dt);
      const Tensor x = random_tensor({4, 6}, dt, true), h = random_tensor({4, 5}, dt, true);
      const Tensor c = random_tensor({4, 5}, dt, true);
      Tensor h1, c1;
      if (k == Kind::LSTM) {
        std::tie(h1, c1) = dynamic_cast<nn::LSTMCellImpl&>(*m).forward(x, std::make_tuple(h, c));
      } else if (k == Kind::GRU) {
        h1 = dynamic_cast<nn::GRUCellImpl&>(*m).forward(x, h);
      } else {
        h1 = dynamic_cast<nn::RNNCellImpl&>(*m).forward(x, h);
      }
      auto p = params_of(*m);
      std::map<std::string, Tensor> rp;
      for (const auto& [n, t] : p) rp[n] = t.detach().clone().requires_grad_(true);
      const Tensor rx = x.detach().clone().requires_grad_(true), rh = h.detach().clone().requires_grad_(true);
      const Tensor rc = c.detach().clone().requires_grad_(true);
      auto [wh, wc] = reference_step(k, rx, rh, rc, rp["weight_ih"], rp["weight_hh"], rp["bias_ih"], rp["bias_hh"]);
      expect_close(h1, wh, tol, tol, "h'");
      if (k == Kind::LSTM) expect_close(c1, wc, tol, tol, "c'");
      const Tensor gh = random_tensor({4, 5}, dt), gc = random_tensor({4, 5}, dt);
      Tensor lg = sum(h1 * gh), lw = sum(wh * gh);
      if (k == Kind::LSTM) {
        lg = lg + sum(c1 * gc);
        lw = lw + sum(wc * gc);
      }
      lg.backward();
      lw.backward();
      expect_close(x.grad(), rx.grad(), tol, tol, "input grad");
      expect_close(h.grad(), rh.grad(), tol, tol, "hx grad");
      if (k == Kind::LSTM) expect_close(c.grad(), rc.grad(), tol, tol, "cx grad");
      for (const auto& [n, t] : p) expect_close(t.grad(), rp[n].grad(), tol, tol, n + " grad");
    }
  }
}

// ---- module surface: parameters, initialisation, printing, unbatched, strided, empty, dropout ------------------

TEST(RnnModules, ParameterNamesShapesAndInit) {
  nn::LSTM lstm(nn::LSTMOptions(3, 5).num_layers(2).bidirectional(true));
  const std::vector<std::string> names = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  const auto np = lstm->named_parameters();
  ASSERT_EQ(np.size(), names.size());
  const double bound = 1.0 / std::sqrt(5.0);
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(np[i].first, names[i]);
    const Tensor& p = np[i].second;
    const std::string& n = names[i];
    const i64 in = n.rfind("weight_ih_l1", 0) == 0 ? 10 : 3;
    const Shape want = n.rfind("weight_ih", 0) == 0   ? Shape{20, in}
                       : n.rfind("weight_hh", 0) == 0 ? Shape{20, 5}
                                                      : Shape{20};
    EXPECT_EQ(p.sizes(), want) << n;
    EXPECT_LE(max(abs(p)).item<double>(), bound) << n;
    EXPECT_GT(max(abs(p)).item<double>(), bound * 0.5) << n << ": not spread over U(-bound, bound)";
  }
  EXPECT_EQ(nn::GRU(4, 6)->named_parameters()[0].second.sizes(), (Shape{18, 4}));
  EXPECT_EQ(nn::RNN(nn::RNNOptions(4, 6).bias(false))->named_parameters().size(), 2u);
  const auto cell = nn::GRUCell(4, 6)->named_parameters();
  ASSERT_EQ(cell.size(), 4u);
  EXPECT_EQ(cell[0].first, "weight_ih");
  EXPECT_EQ(cell[3].first, "bias_hh");
}

TEST(RnnModules, Printing) {
  const auto str = [](const nn::Module& m) {
    std::ostringstream os;
    m.pretty_print(os);
    return os.str();
  };
  EXPECT_EQ(str(*nn::LSTM(nn::LSTMOptions(10, 20).num_layers(2).dropout(0.5).bidirectional(true))),
            "LSTM(input_size=10, hidden_size=20, num_layers=2, bias=true, batch_first=false, dropout=0.5, "
            "bidirectional=true)");
  EXPECT_EQ(str(*nn::GRU(nn::GRUOptions(3, 4).batch_first(true).bias(false))),
            "GRU(input_size=3, hidden_size=4, num_layers=1, bias=false, batch_first=true, dropout=0, "
            "bidirectional=false)");
  EXPECT_EQ(str(*nn::RNNCell(nn::RNNCellOptions(3, 4).nonlinearity(kReLU))), "RNNCell(3, 4, nonlinearity=kReLU)");
  EXPECT_EQ(str(*nn::LSTMCell(nn::LSTMCellOptions(3, 4).bias(false))), "LSTMCell(3, 4, bias=false)");
  EXPECT_EQ(str(*nn::GRUCell(3, 4)), "GRUCell(3, 4)");
}

TEST(RnnModules, UnbatchedInputIsBatchOfOne) {
  for (Kind k : kKinds) {
    SCOPED_TRACE(kind_name(k));
    Config c;
    c.layers = 2;
    c.bidirectional = true;
    c.batch_first = true;  // ignored for unbatched input, as in PyTorch
    auto m = make_layer(k, c);
    const Tensor x = random_tensor({4, 3}, kFloat32);
    const Tensor h0 = random_tensor({4, 4}, kFloat32), c0 = random_tensor({4, 4}, kFloat32);
    const Result u = run_layer(*m, k, x, h0, k == Kind::LSTM ? c0 : Tensor());
    const Result b = run_layer(*m, k, x.unsqueeze(0), h0.unsqueeze(1), k == Kind::LSTM ? c0.unsqueeze(1) : Tensor());
    expect_close(u.out, b.out.squeeze(0), 0, 0, "output");
    expect_close(u.h, b.h.squeeze(1), 0, 0, "h_n");
    if (k == Kind::LSTM) expect_close(u.c, b.c.squeeze(1), 0, 0, "c_n");
  }
  nn::LSTMCell cell(3, 4);
  const Tensor x = random_tensor({3}, kFloat32);
  auto [h, c] = cell(x);
  auto [hb, cb] = cell(x.unsqueeze(0));
  expect_close(h, hb.squeeze(0), 0, 0, "cell h'");
  expect_close(c, cb.squeeze(0), 0, 0, "cell c'");
}

TEST(RnnModules, StridedInputsMatchContiguous) {
  for (Kind k : kKinds) {
    SCOPED_TRACE(kind_name(k));
    Config c;
    c.layers = 2;
    c.bidirectional = true;
    auto m = make_layer(k, c);
    // (T, B, input) as a transpose of (B, T, input) and a slice of every other feature of a wider tensor.
    const Tensor wide = random_tensor({3, 5, 6}, kFloat64).to(kFloat32);
    const Tensor x = wide.narrow(2, 0, 6).transpose(0, 1).narrow(2, 1, 3);
    ASSERT_FALSE(x.is_contiguous());
    const Tensor h_wide = random_tensor({4, 3, 8}, kFloat32);
    const Tensor h0 = h_wide.narrow(2, 2, 4), c0 = h_wide.narrow(2, 4, 4);
    const Result s = run_layer(*m, k, x, h0, k == Kind::LSTM ? c0 : Tensor());
    const Result d = run_layer(*m, k, x.contiguous(), h0.contiguous(), k == Kind::LSTM ? c0.contiguous() : Tensor());
    expect_close(s.out, d.out, 0, 0, "output");
    expect_close(s.h, d.h, 0, 0, "h_n");
    if (k == Kind::LSTM) expect_close(s.c, d.c, 0, 0, "c_n");
  }
}

TEST(RnnModules, EmptyBatch) {
  for (Kind k : kKinds) {
    SCOPED_TRACE(kind_name(k));
    Config c;
    c.layers = 2;
    c.bidirectional = true;
    auto m = make_layer(k, c);
    const Tensor x = random_tensor({5, 0, 3}, kFloat32, true);
    const Result r = run_layer(*m, k, x, Tensor(), Tensor());
    EXPECT_EQ(r.out.sizes(), (Shape{5, 0, 8}));
    EXPECT_EQ(r.h.sizes(), (Shape{4, 0, 4}));
    if (k == Kind::LSTM) EXPECT_EQ(r.c.sizes(), (Shape{4, 0, 4}));
    sum(flat(r)).backward();
    EXPECT_EQ(x.grad().sizes(), x.sizes());
    for (const auto& [n, p] : m->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << n;
      EXPECT_EQ(max(abs(p.grad())).item<double>(), 0.0) << n;
    }
  }
  nn::GRUCell cell(3, 4);
  EXPECT_EQ(cell(random_tensor({0, 3}, kFloat32)).sizes(), (Shape{0, 4}));
}

TEST(RnnModules, DropoutBetweenLayersOnlyInTraining) {
  Config c;
  c.layers = 3;
  c.dropout = 0.5;
  Config plain = c;
  plain.dropout = 0.0;
  for (Kind k : kKinds) {
    SCOPED_TRACE(kind_name(k));
    auto m = make_layer(k, c), ref = make_layer(k, plain);
    const auto src = params_of(*m);
    {
      NoGradGuard g;
      for (auto& [n, p] : ref->named_parameters()) p.copy_(src.at(n));
    }
    const Tensor x = random_tensor({4, 2, 3}, kFloat32);
    m->eval();
    expect_close(run_layer(*m, k, x, Tensor(), Tensor()).out, run_layer(*ref, k, x, Tensor(), Tensor()).out, 0, 0,
                 "eval output");
    m->train();
    const Tensor diff = run_layer(*m, k, x, Tensor(), Tensor()).out - run_layer(*ref, k, x, Tensor(), Tensor()).out;
    EXPECT_GT(max(abs(diff)).item<double>(), 1e-3) << "training output ignores dropout";
  }
}

// ---- bad input ---------------------------------------------------------------------------------------------

TEST(RnnBadInput, TypedErrorsNameModuleAndShapes) {
  nn::LSTM lstm(nn::LSTMOptions(3, 4).num_layers(2));
  nn::GRU gru(3, 4);
  nn::RNN rnn(nn::RNNOptions(3, 4).batch_first(true));
  const Tensor x = random_tensor({5, 2, 3}, kFloat32);
  EXPECT_ERROR(ValueError, lstm(random_tensor({5, 2, 3, 1}, kFloat32)), "LSTM", "2 (unbatched) or 3", "[5, 2, 3, 1]");
  EXPECT_ERROR(ValueError, gru(random_tensor({5}, kFloat32)), "GRU", "[5]");
  EXPECT_ERROR(ValueError, lstm(random_tensor({5, 2, 7}, kFloat32)), "LSTM", "input_size 3", "[5, 2, 7]");
  EXPECT_ERROR(ValueError, rnn(random_tensor({2, 5, 4}, kFloat32)), "RNN", "input_size 3", "[2, 5, 4]");
  const Tensor good = random_tensor({2, 2, 4}, kFloat32), bad = random_tensor({1, 2, 4}, kFloat32);
  EXPECT_ERROR(ValueError, lstm(x, std::make_tuple(bad, good)), "LSTM", "h_0", "[2, 2, 4]", "[1, 2, 4]");
  EXPECT_ERROR(ValueError, lstm(x, std::make_tuple(good, random_tensor({2, 3, 4}, kFloat32))), "LSTM", "c_0",
               "[2, 2, 4]", "[2, 3, 4]");
  EXPECT_ERROR(ValueError, gru(x, random_tensor({1, 2, 5}, kFloat32)), "GRU", "hx", "[1, 2, 4]", "[1, 2, 5]");
  EXPECT_ERROR(ValueError, gru(random_tensor({5, 3}, kFloat32), random_tensor({1, 2, 4}, kFloat32)), "GRU", "hx",
               "[1, 4]", "[1, 2, 4]");
  EXPECT_ERROR(ValueError, lstm(random_tensor({0, 2, 3}, kFloat32)), "LSTM", "at least one step");
  EXPECT_ERROR(TypeError, gru(random_tensor({5, 2, 3}, kFloat64)), "GRU", "dtype");
  EXPECT_ERROR(ValueError, nn::LSTM(0, 4), "LSTM", "input_size");
  EXPECT_ERROR(ValueError, nn::GRU(nn::GRUOptions(3, 4).num_layers(0)), "GRU", "num_layers");
  EXPECT_ERROR(ValueError, nn::RNN(nn::RNNOptions(3, 4).dropout(1.5)), "RNN", "dropout");

  nn::LSTMCell lcell(3, 4);
  nn::GRUCell gcell(3, 4);
  nn::RNNCell rcell(3, 4);
  EXPECT_ERROR(ValueError, lcell(random_tensor({2, 2, 3}, kFloat32)), "LSTMCell", "[2, 2, 3]");
  EXPECT_ERROR(ValueError, gcell(random_tensor({2, 5}, kFloat32)), "GRUCell", "input_size 3", "[2, 5]");
  EXPECT_ERROR(ValueError, rcell(random_tensor({2, 3}, kFloat32), random_tensor({3, 4}, kFloat32)), "RNNCell", "hx",
               "[2, 4]", "[3, 4]");
  EXPECT_ERROR(ValueError,
               lcell(random_tensor({2, 3}, kFloat32),
                     std::make_tuple(random_tensor({2, 4}, kFloat32), random_tensor({2, 5}, kFloat32))),
               "LSTMCell", "cx", "[2, 4]", "[2, 5]");
}

// ---- CPU against GPU ----------------------------------------------------------------------------------------

TEST(RnnGpu, MatchesCpu) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  const Device gpu(kCUDA, 0);
  for (Kind k : kKinds) {
    for (DType dt : {kFloat32, kFloat64}) {
      for (bool states : {false, true}) {
        Config c;
        c.input = 9;
        c.hidden = 33;
        c.layers = 2;
        c.bidirectional = true;
        c.batch_first = states;
        SCOPED_TRACE(describe(k, c, states) + " " + dtype_name(dt));
        const double tol = dt == kFloat64 ? 1e-11 : 1e-4;
        auto cpu = make_layer(k, c), dev = make_layer(k, c);
        cpu->to(dt);
        dev->to(dt);
        {
          NoGradGuard g;
          const auto src = params_of(*cpu);
          for (auto& [n, p] : dev->named_parameters()) p.copy_(src.at(n));
        }
        dev->to(gpu);
        const i64 T = 7, B = 5, D = 2;
        const Tensor x = random_tensor(input_shape(c, T, B), dt);
        const Tensor h0 = states ? random_tensor({c.layers * D, B, c.hidden}, dt) : Tensor();
        const Tensor c0 = states && k == Kind::LSTM ? random_tensor({c.layers * D, B, c.hidden}, dt) : Tensor();
        const auto on = [](const Tensor& t, Device d) {
          return t.defined() ? t.detach().to(d).requires_grad_(true) : Tensor();
        };
        const Tensor xc = on(x, Device(kCPU)), xg = on(x, gpu), hc = on(h0, Device(kCPU)), hg = on(h0, gpu);
        const Tensor cc = on(c0, Device(kCPU)), cg = on(c0, gpu);
        const Result rc = run_layer(*cpu, k, xc, hc, cc), rg = run_layer(*dev, k, xg, hg, cg);
        expect_close(flat(rg), flat(rc), tol, tol, "outputs");
        const Tensor g = random_tensor(flat(rc).sizes(), dt);
        flat(rc).backward(g);
        flat(rg).backward(g.to(gpu));
        expect_close(xg.grad(), xc.grad(), tol, tol, "input grad");
        if (states) expect_close(hg.grad(), hc.grad(), tol, tol, "h_0 grad");
        if (cc.defined()) expect_close(cg.grad(), cc.grad(), tol, tol, "c_0 grad");
        const auto pc = params_of(*cpu);
        for (const auto& [n, p] : dev->named_parameters()) expect_close(p.grad(), pc.at(n).grad(), tol, tol, n);
      }
    }
  }
}

// ---- the cuDNN path on the GPU ----------------------------------------------------------------------------------

/// TF32 off and cuDNN's RNN path on for a test; restores both settings afterwards.
struct CudnnRnnScope {
  const bool cudnn = cuda::cudnn_rnn_enabled(), tf32_conv = cuda::allow_tf32_conv(),
             tf32_matmul = cuda::allow_tf32_matmul();
  CudnnRnnScope() {
    cuda::set_allow_tf32(false, false);
    cuda::set_cudnn_rnn_enabled(true);
  }
  ~CudnnRnnScope() {
    cuda::set_cudnn_rnn_enabled(cudnn);
    cuda::set_allow_tf32(tf32_conv, tf32_matmul);
  }
  CudnnRnnScope(const CudnnRnnScope&) = delete;
  CudnnRnnScope& operator=(const CudnnRnnScope&) = delete;
};

/// Whether all of m's parameters view one storage (cuDNN's flat weight space).
bool params_share_one_storage(const nn::Module& m) {
  const auto params = m.parameters();
  for (const Tensor& p : params) {
    if (p.unsafe_impl()->storage != params[0].unsafe_impl()->storage) return false;
  }
  return !params.empty();
}

/// Outputs and every gradient of one forward and backward.
struct Passes {
  Result r;
  Tensor dx, dh0, dc0;
  std::map<std::string, Tensor> dparams;
};

/// A copy of `src` (same parameter values and dtype) on `device`, run with cuDNN's path `cudnn` on x, h0, c0 (any
/// device; undefined states: zeros) and backward with g (the shape of flat()).
Passes run_copy(Kind k, const Config& c, const nn::Module& src, Device device, bool cudnn, const Tensor& x,
             const Tensor& h0, const Tensor& c0, const Tensor& g) {
  cuda::set_cudnn_rnn_enabled(cudnn);
  auto m = make_layer(k, c);
  m->to(x.dtype());
  {
    NoGradGuard no_grad;
    const auto from = params_of(src);
    for (auto& [n, p] : m->named_parameters()) p.copy_(from.at(n));
  }
  m->to(device);
  if (device.is_cuda()) EXPECT_EQ(params_share_one_storage(*m), cudnn) << "parameters as views of flat weights";
  const auto leaf = [&](const Tensor& t) {
    return t.defined() ? t.detach().to(device).requires_grad_(true) : Tensor();
  };
  const Tensor xd = leaf(x), hd = leaf(h0), cd = leaf(c0);
  Passes out;
  out.r = run_layer(*m, k, xd, hd, cd);
  flat(out.r).backward(g.to(device));
  out.dx = xd.grad();
  if (hd.defined()) out.dh0 = hd.grad();
  if (cd.defined()) out.dc0 = cd.grad();
  for (const auto& [n, p] : m->named_parameters()) out.dparams[n] = p.grad();
  return out;
}

void expect_runs_close(const Passes& a, const Passes& b, double tol, const std::string& what) {
  expect_close(a.r.out, b.r.out, tol, tol, what + ": output");
  expect_close(a.r.h, b.r.h, tol, tol, what + ": h_n");
  if (b.r.c.defined()) expect_close(a.r.c, b.r.c, tol, tol, what + ": c_n");
  expect_close(a.dx, b.dx, tol, tol, what + ": input grad");
  if (b.dh0.defined()) expect_close(a.dh0, b.dh0, tol, tol, what + ": h_0 grad");
  if (b.dc0.defined()) expect_close(a.dc0, b.dc0, tol, tol, what + ": c_0 grad");
  ASSERT_EQ(a.dparams.size(), b.dparams.size()) << what;
  for (const auto& [n, d] : b.dparams) expect_close(a.dparams.at(n), d, tol, tol, what + ": " + n + " grad");
}

TEST(RnnCudnn, MatchesOwnKernelsAndCpu) {
  MINIDL_REQUIRE_GPU();
  const CudnnRnnScope scope;
  const Device gpu(kCUDA, 0), cpu(kCPU);
  Config deep;  // 2 layers, bidirectional, batch_first, sizes that fill no warp or tile evenly
  deep.input = 9;
  deep.hidden = 33;
  deep.layers = 2;
  deep.bidirectional = true;
  deep.batch_first = true;
  Config stacked = deep;
  stacked.bidirectional = false;
  stacked.batch_first = false;
  Config plain;
  plain.input = 6;
  plain.hidden = 5;
  plain.bidirectional = true;
  plain.bias = false;
  for (Kind k : kKinds) {
    for (DType dt : {kFloat32, kFloat64}) {
      for (const Config& c : {deep, stacked, plain}) {
        for (bool states : {true, false}) {
          SCOPED_TRACE(describe(k, c, states) + " " + dtype_name(dt));
          const double tol = dt == kFloat64 ? 1e-11 : 1e-4;
          const i64 T = 7, B = 5, D = c.bidirectional ? 2 : 1;
          auto src = make_layer(k, c);
          src->to(dt);
          const Tensor x = random_tensor(input_shape(c, T, B), dt);
          const Tensor h0 = states ? random_tensor({c.layers * D, B, c.hidden}, dt) : Tensor();
          const Tensor c0 = states && k == Kind::LSTM ? random_tensor({c.layers * D, B, c.hidden}, dt) : Tensor();
          const i64 outputs = T * B * D * c.hidden + (k == Kind::LSTM ? 2 : 1) * c.layers * D * B * c.hidden;
          const Tensor g = random_tensor({outputs}, dt);
          const Passes on_cpu = run_copy(k, c, *src, cpu, false, x, h0, c0, g);
          const Passes own = run_copy(k, c, *src, gpu, false, x, h0, c0, g);
          const Passes cudnn = run_copy(k, c, *src, gpu, true, x, h0, c0, g);
          expect_runs_close(cudnn, on_cpu, tol, "cuDNN vs CPU");
          expect_runs_close(cudnn, own, tol, "cuDNN vs own kernels");
        }
      }
    }
  }
}

TEST(RnnCudnn, UnbatchedEmptyAndStridedInputs) {
  MINIDL_REQUIRE_GPU();
  const CudnnRnnScope scope;
  const Device gpu(kCUDA, 0);
  for (Kind k : kKinds) {
    SCOPED_TRACE(kind_name(k));
    Config c;
    c.layers = 2;
    c.bidirectional = true;
    auto cpu = make_layer(k, c), dev = make_layer(k, c);
    {
      NoGradGuard no_grad;
      const auto from = params_of(*cpu);
      for (auto& [n, p] : dev->named_parameters()) p.copy_(from.at(n));
    }
    dev->to(gpu);
    ASSERT_TRUE(params_share_one_storage(*dev));
    const Tensor x = random_tensor({6, 3}, kFloat32), h0 = random_tensor({4, 4}, kFloat32);
    const Tensor c0 = k == Kind::LSTM ? random_tensor({4, 4}, kFloat32) : Tensor();
    const Result want = run_layer(*cpu, k, x, h0, c0);
    const Result got = run_layer(*dev, k, x.to(gpu), h0.to(gpu), c0.defined() ? c0.to(gpu) : Tensor());
    expect_close(got.out, want.out, 1e-4, 1e-4, "unbatched output");
    expect_close(got.h, want.h, 1e-4, 1e-4, "unbatched h_n");
    if (k == Kind::LSTM) expect_close(got.c, want.c, 1e-4, 1e-4, "unbatched c_n");
    // (T, B, input) as a transpose of (B, T, input) and a slice of a wider tensor, states sliced too.
    const Tensor wide = random_tensor({3, 5, 6}, kFloat32).to(gpu);
    const Tensor xs = wide.transpose(0, 1).narrow(2, 1, 3);
    const Tensor hw = random_tensor({4, 3, 8}, kFloat32).to(gpu);
    const Result s = run_layer(*dev, k, xs, hw.narrow(2, 2, 4), k == Kind::LSTM ? hw.narrow(2, 4, 4) : Tensor());
    const Result d = run_layer(*dev, k, xs.contiguous(), hw.narrow(2, 2, 4).contiguous(),
                               k == Kind::LSTM ? hw.narrow(2, 4, 4).contiguous() : Tensor());
    expect_close(s.out, d.out, 0, 0, "strided output");
    expect_close(s.h, d.h, 0, 0, "strided h_n");
    // An empty batch runs the own kernels (cuDNN takes none) and gives zero parameter gradients.
    const Tensor e = random_tensor({5, 0, 3}, kFloat32).to(gpu).requires_grad_(true);
    const Result r = run_layer(*dev, k, e, Tensor(), Tensor());
    EXPECT_EQ(r.out.sizes(), (Shape{5, 0, 8}));
    sum(flat(r)).backward();
    for (const auto& [n, p] : dev->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << n;
      EXPECT_EQ(max(abs(p.grad())).item<double>(), 0.0) << n;
    }
  }
}

TEST(RnnCudnn, ParameterViewsSurviveStepsMovesAndLoads) {
  MINIDL_REQUIRE_GPU();
  const CudnnRnnScope scope;
  const Device gpu(kCUDA, 0);
  const auto options = nn::LSTMOptions(5, 6).num_layers(2).bidirectional(true);
  nn::LSTM lstm(options), cpu_lstm(options);
  const std::vector<std::string> names = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  const auto copy_into = [](nn::Module& dst, const nn::Module& src) {
    NoGradGuard no_grad;
    const auto from = params_of(src);
    for (auto& [n, p] : dst.named_parameters()) p.copy_(from.at(n));
  };
  const auto expect_same_values = [&](const nn::Module& a, const nn::Module& b, const std::string& what) {
    const auto pb = params_of(b);
    for (const auto& [n, p] : a.named_parameters()) expect_close(p, pb.at(n), 0, 0, what + ": " + n);
  };
  copy_into(*cpu_lstm, *lstm);
  const std::vector<Tensor> handles = lstm->parameters();
  lstm->to(gpu);
  ASSERT_TRUE(params_share_one_storage(*lstm));
  const auto np = lstm->named_parameters();
  ASSERT_EQ(np.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(np[i].first, names[i]);
    EXPECT_EQ(np[i].second.unsafe_impl(), handles[i].unsafe_impl()) << names[i] << ": the handle changed";
  }
  expect_same_values(*lstm, *cpu_lstm, "values after to(cuda)");

  // Optimizer steps update the views in place; the next forward reads the updated flat weights.
  optim::SGD sgd(lstm->parameters(), optim::SGDOptions(0.5).momentum(0.9));
  const Tensor x = random_tensor({4, 3, 5}, kFloat32);
  for (int step = 0; step < 2; ++step) {
    sgd.zero_grad();
    sum(std::get<0>(lstm(x.to(gpu)))).backward();
    sgd.step();
  }
  EXPECT_TRUE(params_share_one_storage(*lstm)) << "after optimizer steps";
  copy_into(*cpu_lstm, *lstm);
  expect_close(std::get<0>(lstm(x.to(gpu))), std::get<0>(cpu_lstm(x)), 1e-4, 1e-4, "output after steps");

  // Moving away and back keeps the values and makes the parameters views again.
  lstm->to(kCPU);
  EXPECT_FALSE(lstm->parameters()[0].is_cuda());
  lstm->to(gpu);
  EXPECT_TRUE(params_share_one_storage(*lstm)) << "after to(cpu) and back";
  expect_same_values(*lstm, *cpu_lstm, "values after to(cpu) and back");

  // A checkpoint saved from the GPU module loads into another GPU module's views, under PyTorch's names.
  const test_files::TempDir dir("minidl_rnn_");
  io::save(*lstm, dir.file("lstm.safetensors"));
  nn::LSTM loaded(options);
  loaded->to(gpu);
  io::load(*loaded, dir.file("lstm.safetensors"));
  EXPECT_TRUE(params_share_one_storage(*loaded)) << "after load";
  expect_same_values(*loaded, *cpu_lstm, "values after load");
  expect_close(std::get<0>(loaded(x.to(gpu))), std::get<0>(lstm(x.to(gpu))), 0, 0, "output after load");

  // A parent's to() moves each parameter on its own; the next forward makes them views again.
  struct Net : nn::Module {
    nn::LSTM lstm{nullptr};
    explicit Net(const nn::LSTMOptions& o) { lstm = register_module("lstm", nn::LSTM(o)); }
  };
  auto net = std::make_shared<Net>(options);
  copy_into(*net->lstm, *cpu_lstm);
  net->to(gpu);
  const Tensor first = std::get<0>(net->lstm(x.to(gpu)));
  EXPECT_TRUE(params_share_one_storage(*net->lstm)) << "after a parent's to() and a forward";
  expect_close(first, std::get<0>(cpu_lstm(x)), 1e-4, 1e-4, "output after a parent's to()");
}

TEST(RnnCudnn, CapturedForwardBackwardMatchesEager) {
  MINIDL_REQUIRE_GPU();
  const CudnnRnnScope scope;
  const Device gpu(kCUDA, 0);
  for (Kind k : {Kind::LSTM, Kind::GRU, Kind::Tanh}) {
    SCOPED_TRACE(kind_name(k));
    Config c;
    c.input = 7;
    c.hidden = 16;
    c.layers = 2;
    c.bidirectional = true;
    auto m = make_layer(k, c);
    m->to(gpu);
    const auto leaf = [&](const Shape& s) { return random_tensor(s, kFloat32).to(gpu).requires_grad_(true); };
    const Tensor x = leaf({6, 4, 7}), h0 = leaf({4, 4, 16});
    const Tensor c0 = k == Kind::LSTM ? leaf({4, 4, 16}) : Tensor();
    const Tensor g = random_tensor({6 * 4 * 32 + (k == Kind::LSTM ? 2 : 1) * 4 * 4 * 16}, kFloat32).to(gpu);
    std::vector<Tensor> leaves = m->parameters();
    leaves.push_back(x);
    leaves.push_back(h0);
    if (c0.defined()) leaves.push_back(c0);
    const auto step = [&] {
      const Tensor out = flat(run_layer(*m, k, x, h0, c0));
      out.backward(g);
      return out;
    };
    const Tensor eager = step().detach().clone();
    std::vector<Tensor> eager_grads;
    for (const Tensor& t : leaves) eager_grads.push_back(t.grad().clone());
    for (const Tensor& t : leaves) t.grad().zero_();
    cuda::CUDAGraph graph;
    graph.capture_begin();
    const Tensor captured = step();
    graph.capture_end();
    for (const Tensor& t : leaves) t.grad().zero_();
    graph.replay();
    expect_close(captured, eager, 1e-6, 1e-6, "captured forward");
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      expect_close(leaves[i].grad(), eager_grads[i], 1e-5, 1e-5, "captured gradient " + std::to_string(i));
    }
  }
}

TEST(RnnCudnn, DropoutOnlyInTrainingAndInferenceMode) {
  MINIDL_REQUIRE_GPU();
  const CudnnRnnScope scope;
  const Device gpu(kCUDA, 0);
  Config c;
  c.layers = 3;
  c.dropout = 0.5;
  c.hidden = 32;
  Config plain = c;
  plain.dropout = 0.0;
  for (Kind k : kKinds) {
    SCOPED_TRACE(kind_name(k));
    auto m = make_layer(k, c), ref = make_layer(k, plain);
    {
      NoGradGuard no_grad;
      const auto from = params_of(*m);
      for (auto& [n, p] : ref->named_parameters()) p.copy_(from.at(n));
    }
    m->to(gpu);
    ref->to(gpu);
    const Tensor x = random_tensor({4, 8, 3}, kFloat32).to(gpu);
    const Tensor plain_out = run_layer(*ref, k, x, Tensor(), Tensor()).out;
    {
      NoGradGuard no_grad;  // cuDNN's inference mode
      expect_close(run_layer(*ref, k, x, Tensor(), Tensor()).out, plain_out, 1e-5, 1e-5, "inference mode");
    }
    m->eval();
    expect_close(run_layer(*m, k, x, Tensor(), Tensor()).out, plain_out, 1e-5, 1e-5, "eval output");
    m->train();
    const Tensor xg = x.detach().requires_grad_(true);
    const Tensor a = run_layer(*m, k, xg, Tensor(), Tensor()).out;
    const Tensor b = run_layer(*m, k, x, Tensor(), Tensor()).out;
    EXPECT_GT(max(abs(a - plain_out)).item<double>(), 1e-3) << "training output ignores dropout";
    EXPECT_GT(max(abs(a - b)).item<double>(), 1e-3) << "two training forwards drew the same masks";
    sum(a).backward();
    EXPECT_TRUE(isfinite(xg.grad()).all().item<bool>()) << "input gradient through dropout";
  }
}

// ---- PyTorch's results --------------------------------------------------------------------------------------

Tensor golden_tensor(const nlohmann::json& j) {
  std::vector<double> v;
  for (const auto& e : j["data"]) v.push_back(testing::golden_number(e));
  return from_vector(v, j["shape"].get<Shape>());
}

/// Every case of PyTorch's results, run in float64 on `device` (the GPU: the sequence layers through cuDNN).
void check_golden(const nlohmann::json& golden, Device device) {
  for (const auto& cs : golden["cases"]) {
    const std::string module = cs["module"], name = cs["name"];
    SCOPED_TRACE(name);
    const auto& o = cs["options"];
    const i64 in = o["input_size"], hidden = o["hidden_size"];
    const bool bias = o["bias"];
    std::shared_ptr<nn::Module> m;
    Kind k = module == "LSTM" || module == "LSTMCell"                 ? Kind::LSTM
             : module == "GRU" || module == "GRUCell"                 ? Kind::GRU
             : o.value("nonlinearity", std::string("tanh")) == "relu" ? Kind::Relu
                                                                      : Kind::Tanh;
    const bool cell = module.find("Cell") != std::string::npos;
    if (cell) {
      if (k == Kind::LSTM) m = nn::LSTMCell(nn::LSTMCellOptions(in, hidden).bias(bias)).ptr();
      if (k == Kind::GRU) m = nn::GRUCell(nn::GRUCellOptions(in, hidden).bias(bias)).ptr();
      if (k == Kind::Tanh || k == Kind::Relu) {
        m = nn::RNNCell(nn::RNNCellOptions(in, hidden)
                            .bias(bias)
                            .nonlinearity(k == Kind::Relu ? nn::RNNNonlinearity(kReLU) : nn::RNNNonlinearity(kTanh)))
                .ptr();
      }
    } else {
      Config c;
      c.input = in;
      c.hidden = hidden;
      c.layers = o["num_layers"];
      c.bidirectional = o["bidirectional"];
      c.batch_first = o["batch_first"];
      c.bias = bias;
      m = make_layer(k, c);
    }
    m->to(kFloat64);
    {
      NoGradGuard g;
      for (auto& [n, p] : m->named_parameters()) {
        ASSERT_TRUE(cs["params"].contains(n)) << n;
        p.copy_(golden_tensor(cs["params"][n]));
      }
    }
    m->to(device);
    const auto leaf = [&](const char* key) { return golden_tensor(cs[key]).to(device).requires_grad_(true); };
    const Tensor x = leaf("input");
    const Tensor h0 = cs.contains("h0") ? leaf("h0") : Tensor();
    const Tensor c0 = cs.contains("c0") ? leaf("c0") : Tensor();
    Result r;
    if (cell) {
      if (k == Kind::LSTM) {
        auto& lc = dynamic_cast<nn::LSTMCellImpl&>(*m);
        auto [h, c] = h0.defined() ? lc.forward(x, std::make_tuple(h0, c0)) : lc.forward(x);
        r = {h, Tensor(), c};
      } else if (k == Kind::GRU) {
        r = {dynamic_cast<nn::GRUCellImpl&>(*m).forward(x, h0), Tensor(), Tensor()};
      } else {
        r = {dynamic_cast<nn::RNNCellImpl&>(*m).forward(x, h0), Tensor(), Tensor()};
      }
    } else {
      r = run_layer(*m, k, x, h0, c0);
    }
    const double tol = 1e-10;
    expect_close(r.out, golden_tensor(cs["output"]), tol, tol, "output");
    Tensor loss = sum(r.out * golden_tensor(cs["grad_output"]).to(device));
    if (r.h.defined()) {
      expect_close(r.h, golden_tensor(cs["h_n"]), tol, tol, "h_n");
      loss = loss + sum(r.h * golden_tensor(cs["grad_h_n"]).to(device));
    }
    if (r.c.defined()) {
      expect_close(r.c, golden_tensor(cs["c_n"]), tol, tol, "c_n");
      loss = loss + sum(r.c * golden_tensor(cs["grad_c_n"]).to(device));
    }
    loss.backward();
    expect_close(x.grad(), golden_tensor(cs["grad_input"]), tol, tol, "input grad");
    if (h0.defined()) expect_close(h0.grad(), golden_tensor(cs["grad_h0"]), tol, tol, "h0 grad");
    if (c0.defined()) expect_close(c0.grad(), golden_tensor(cs["grad_c0"]), tol, tol, "c0 grad");
    for (const auto& [n, p] : m->named_parameters()) {
      expect_close(p.grad(), golden_tensor(cs["grad_params"][n]), tol, tol, n + " grad");
    }
  }
}

TEST(RnnGolden, MatchesPyTorch) {
  const nlohmann::json golden = testing::read_golden("rnn_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(golden, "rnn_golden.json", "gen_rnn_golden.py");
  check_golden(golden, Device(kCPU));
}

TEST(RnnGolden, CudnnMatchesPyTorch) {
  MINIDL_REQUIRE_GPU();
  const nlohmann::json golden = testing::read_golden("rnn_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(golden, "rnn_golden.json", "gen_rnn_golden.py");
  const CudnnRnnScope scope;
  check_golden(golden, Device(kCUDA, 0));
}

}  // namespace
}  // namespace minidl
