// The indexing family (include/minidl/indexing.h): x.index / index_put_, gather, scatter, scatter_add, index_add,
// index_select, masked_select, nonzero, take_along_dim. Against PyTorch (tests/golden/indexing_golden.json, written
// by tests/golden/gen_indexing_golden.py), against float64 references for every dtype, float64 gradcheck through
// strided inputs, the typed errors, and the GPU against the CPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "golden_file.h"
#include "minidl/minidl.h"
#include "test_util.h"

using namespace minidl;
using namespace minidl::indexing;
using json = nlohmann::json;
using minidl::testing::expect_close;
using minidl::testing::expect_error;
using minidl::testing::random_tensor;

namespace {

const DType kAllDTypes[] = {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8, kBool};

/// Fresh values of `dtype` that every dtype holds exactly and whose sums stay exact in it: small integers for the
/// integral types (uint8: below 16, so that a few of them add without wrapping), random bits for bool, quarters
/// in [-4, 4) for the floating ones (exact in bfloat16 and float16).
Tensor values_of(const Shape& shape, DType dtype) {
  if (dtype == kBool) return lt(rand(shape), 0.5);
  if (dtype == kUInt8) return floor_divide(uniform(shape, 0, 16, TensorOptions(kFloat64)), 1.0).to(kUInt8);
  const Tensor q = floor_divide(uniform(shape, -16, 16, TensorOptions(kFloat64)), 1.0);
  return is_floating_point(dtype) ? (q * 0.25).to(dtype) : q.to(dtype);
}

Tensor random_index(const Shape& shape, std::int64_t high, std::uint32_t seed, std::int64_t low = 0) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(low, high - 1);
  std::vector<std::int64_t> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& e : v) e = dist(rng);
  return from_vector(v, shape);
}

/// Exact comparison through float64 (every value the tests use is exact there).
void expect_equal(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  expect_close(actual, expected, 0, 0, what);
}

// ---- golden ------------------------------------------------------------------------------------------------

const json& golden() {
  static const json g = minidl::testing::read_golden("indexing_golden.json");
  return g;
}

using minidl::testing::dtype_named;

Tensor decode(const json& j, Device device) {
  const Shape shape = j["shape"].get<Shape>();
  const std::vector<double> data = j["data"].get<std::vector<double>>();
  return from_vector(data, shape).to(dtype_named(j["dtype"])).to(device);
}

std::vector<TensorIndex> decode_spec(const json& spec, Device device) {
  std::vector<TensorIndex> r;
  const auto opt = [](const json& v) { return v.is_null() ? std::optional<std::int64_t>() : v.get<std::int64_t>(); };
  for (const json& e : spec) {
    if (e.contains("int")) r.emplace_back(e["int"].get<std::int64_t>());
    if (e.contains("slice")) r.emplace_back(Slice(opt(e["slice"][0]), opt(e["slice"][1]), opt(e["slice"][2])));
    if (e.contains("none")) r.emplace_back(None);
    if (e.contains("ellipsis")) r.emplace_back(Ellipsis);
    if (e.contains("bool")) r.emplace_back(e["bool"].get<bool>());
    if (e.contains("tensor")) r.emplace_back(decode(e["tensor"], device));
  }
  return r;
}

/// The tolerance of a dtype's sums against PyTorch's (which may add in another order or precision).
double rtol_of(DType t) {
  switch (t) {
    case kFloat64:
      return 1e-12;
    case kFloat32:
      return 1.3e-6;
    case kBFloat16:
      return 1.6e-2;
    case kHalf:
      return 1e-3;
    default:
      return 0;
  }
}

/// Runs one golden case on `device`: the output, and the gradients where the case has them.
void run_case(const json& c, Device device, int number) {
  const std::string op = c["op"],
                    what = "case " + std::to_string(number) + " (" + op + ") on " + (device.is_cuda() ? "cuda" : "cpu");
  Tensor x = decode(c["x"], device);
  const bool grad = c.contains("grads");
  if (grad) x.requires_grad_(true);
  Tensor src;
  if (c.contains("src")) src = decode(c["src"], device);
  if (c.contains("values")) src = decode(c["values"], device);
  if (grad && src.defined()) src.requires_grad_(true);
  const auto dim = [&] { return c["dim"].get<std::int64_t>(); };
  const auto index = [&] { return decode(c["index"], device); };
  Tensor out;
  if (op == "index") {
    out = x.index(decode_spec(c["indices"], device));
  } else if (op == "index_put") {
    std::vector<Tensor> list;
    for (const json& t : c["list"]) list.push_back(t.is_null() ? Tensor() : decode(t, device));
    out = index_put(x, list, src, c["accumulate"].get<bool>());
  } else if (op == "gather") {
    out = gather(x, dim(), index());
  } else if (op == "scatter") {
    out = scatter(x, dim(), index(), src);
  } else if (op == "scatter_value") {
    const double v = c["value"];
    out = is_floating_point(x.dtype()) ? scatter(x, dim(), index(), v)
                                       : scatter(x, dim(), index(), static_cast<std::int64_t>(v));
  } else if (op == "scatter_add") {
    out = scatter_add(x, dim(), index(), src);
  } else if (op == "index_select") {
    out = index_select(x, dim(), index());
  } else if (op == "index_add") {
    out = index_add(x, dim(), index(), src, c["alpha"].get<std::int64_t>());
  } else if (op == "masked_select") {
    out = masked_select(x, decode(c["mask"], device));
  } else if (op == "nonzero") {
    out = nonzero(x);
  } else if (op == "take_along_dim") {
    out = c["dim"].is_null() ? take_along_dim(x, index()) : take_along_dim(x, index(), dim());
  } else {
    FAIL() << what << ": unknown op";
  }
  const Tensor want = decode(c["out"], Device(kCPU));
  ASSERT_EQ(out.dtype(), want.dtype()) << what;
  // 16-bit sums of values in [-1, 1) may cancel: their rounding is absolute, not relative to the result.
  const bool half = want.dtype() == kBFloat16 || want.dtype() == kHalf;
  expect_close(out, want, rtol_of(want.dtype()), half ? 2 * rtol_of(want.dtype()) : 0, what);
  if (!grad) return;
  (out * decode(c["gout"], device)).sum().backward();
  for (const auto& [name, g] : c["grads"].items()) {
    const Tensor& input = name == "x" ? x : src;
    if (g.is_null()) continue;
    expect_close(input.grad(), decode(g, Device(kCPU)), 1e-12, 1e-12, what + " grad " + name);
  }
}

#define MINIDL_REQUIRE_GOLDEN() MINIDL_REQUIRE_GOLDEN_FILE(golden(), "indexing_golden.json", "gen_indexing_golden.py")

void run_golden(Device device) {
  int n = 0;
  for (const json& c : golden()["cases"]) run_case(c, device, n++);
  EXPECT_GT(n, 300);
}

}  // namespace

// ---- against PyTorch ---------------------------------------------------------------------------------------

TEST(IndexingGolden, MatchesPyTorchOnTheCpu) {
  MINIDL_REQUIRE_GOLDEN();
  run_golden(Device(kCPU));
}

TEST(IndexingGolden, MatchesPyTorchOnTheGpu) {
  MINIDL_REQUIRE_GOLDEN();
  MINIDL_REQUIRE_GPU();
  run_golden(Device(kCUDA));
}

// ---- x.index ----------------------------------------------------------------------------------------------

TEST(Index, BasicIndicesAreViewsOfTheInput) {
  const Tensor x = random_tensor({4, 5, 6}, kFloat32);
  const Tensor a = x.index({1, Slice(1, None, 2), None, Ellipsis});
  EXPECT_EQ(a.sizes(), (Shape{2, 1, 6}));
  EXPECT_TRUE(a.is_view());
  expect_equal(a, x.select(0, 1).slice(0, 1, 5, 2).unsqueeze(1).contiguous(), "int, slice, None, ...");
  const Tensor b = x.index({"...", -1});
  expect_equal(b, x.select(2, 5).contiguous(), "... -1");
  EXPECT_EQ(x.index({}).sizes(), x.sizes());
  // A write through the view reaches x.
  Tensor y = x.clone();
  y.index({2, Slice(), 3}).fill_(7.0);
  EXPECT_EQ(y.select(0, 2).select(1, 3).to_vector<float>(), std::vector<float>(5, 7.0f));
}

TEST(Index, TensorIndicesPlaceTheirDimsAsPyTorch) {
  const Tensor x = random_tensor({4, 5, 6, 7}, kFloat64);
  const Tensor i = random_index({2, 3}, 5, 1), j = random_index({3}, 6, 2), k = random_index({2, 1}, 4, 3);
  // Adjacent: the broadcast dims replace the indexed ones in place.
  EXPECT_EQ(x.index({Slice(), i, j}).sizes(), (Shape{4, 2, 3, 7}));
  // Separated by a slice: in front.
  EXPECT_EQ(x.index({k, Slice(), j}).sizes(), (Shape{2, 3, 5, 7}));
  // An integer between tensors separates them as in PyTorch (it is a tensor index there too).
  EXPECT_EQ(x.index({k, 1, j}).sizes(), (Shape{2, 3, 7}));
  // Element by element against select().
  const Tensor r = x.index({Slice(), i, j});
  const auto iv = i.to_vector<std::int64_t>(), jv = j.to_vector<std::int64_t>();
  for (std::int64_t a = 0; a < 4; ++a)
    for (std::int64_t p = 0; p < 2; ++p)
      for (std::int64_t q = 0; q < 3; ++q) {
        const Tensor want = x.select(0, a)
                                .select(0, iv[static_cast<std::size_t>(p * 3 + q)])
                                .select(0, jv[static_cast<std::size_t>(q)]);
        expect_equal(r.select(0, a).select(0, p).select(0, q), want.contiguous(), "x[:, i, j]");
      }
  // Negative indices count from the end; int32 indices work as int64 ones.
  const Tensor neg = from_vector(std::vector<std::int64_t>{-1, -4, 2}, {3});
  expect_equal(x.index({neg}), x.index({add(neg, from_vector(std::vector<std::int64_t>{4, 4, 0}, {3}))}), "negative");
  expect_equal(x.index({Slice(), neg.to(kInt32)}), x.index({Slice(), neg}), "int32");
}

TEST(Index, MasksSelectTheirTrueElements) {
  const Tensor x = random_tensor({3, 4, 5}, kFloat32);
  const Tensor mask = gt(random_tensor({3, 4}, kFloat32), 0.0);
  const Tensor r = x.index({mask});
  const Tensor nz = nonzero(mask);
  ASSERT_EQ(r.sizes(), (Shape{nz.size(0), 5}));
  const auto c = nz.to_vector<std::int64_t>();
  for (std::int64_t n = 0; n < nz.size(0); ++n)
    expect_equal(
        r.select(0, n),
        x.select(0, c[static_cast<std::size_t>(2 * n)]).select(0, c[static_cast<std::size_t>(2 * n + 1)]).contiguous(),
        "mask row");
  expect_equal(x.index({mask}), x.index({mask.to(kUInt8)}), "uint8 mask");
  expect_equal(masked_select(x, mask.unsqueeze(2)), x.index({mask}).reshape({-1}), "masked_select broadcast");
  EXPECT_EQ(x.index({true}).sizes(), (Shape{1, 3, 4, 5}));
  EXPECT_EQ(x.index({false}).sizes(), (Shape{0, 3, 4, 5}));
}

TEST(IndexPut, WritesAndAccumulatesAsPyTorch) {
  Tensor x = zeros({4, 3}, kFloat64);
  x.index_put_({from_vector(std::vector<std::int64_t>{0, 2}, {2}), Slice(1, None)}, 5.0);
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0, 5, 5, 0, 0, 0, 0, 5, 5, 0, 0, 0}));
  x.index_put_({gt(x, 1.0)}, tensor({1, 2, 3, 4}, kFloat64));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0, 1, 2, 0, 0, 0, 0, 3, 4, 0, 0, 0}));
  // accumulate sums repeats; an undefined entry keeps its dim whole.
  Tensor y = zeros({3, 2}, kInt64);
  y.index_put_({from_vector(std::vector<std::int64_t>{1, 1, -1}, {3})}, ones({3, 2}, kInt64), true);
  EXPECT_EQ(y.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 2, 2, 1, 1}));
  Tensor z = zeros({2, 3}, kFloat32);
  z.index_put_(std::vector<Tensor>{Tensor(), from_vector(std::vector<std::int64_t>{2}, {1})}, full({2, 1}, 3.0));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{0, 0, 3, 0, 0, 3}));
  // No tensor entry: a plain copy into the view.
  Tensor w = zeros({2, 3}, kFloat32);
  w.index_put_({1}, tensor({1, 2, 3}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 2, 3}));
}

// ---- every dtype against float64 ---------------------------------------------------------------------------------

namespace {
/// op(x.to(dtype)) against op(x in float64).to(dtype): the values are exact in every dtype, so any difference is
/// the op's. The accumulating ops use values whose sums are exact (values_of).
void expect_all_dtypes(const std::string& what, const Shape& shape,
                       const std::function<Tensor(const Tensor&, const Tensor&)>& op, bool accumulates) {
  for (const DType dt : kAllDTypes) {
    const Tensor x = values_of(shape, dt), other = values_of(shape, dt);
    const Tensor got = op(x, other);
    Tensor want = op(x.to(kFloat64), other.to(kFloat64));
    if (accumulates && dt == kBool) want = ne(want, 0.0);
    expect_equal(got, want.to(dt), what + " " + dtype_name(dt));
  }
}
}  // namespace

TEST(IndexingDTypes, EveryOpTakesEveryDType) {
  const Shape s{5, 6};
  const Tensor i = random_index({4, 6}, 5, 11), j = random_index({3}, 6, 12), k = random_index({7}, 5, 13);
  expect_all_dtypes(
      "gather", s, [&](const Tensor& x, const Tensor&) { return gather(x, 0, i); }, false);
  expect_all_dtypes(
      "index", s,
      [&](const Tensor& x, const Tensor&) {
        return x.index({k, Slice(None, None, 2)});
      },
      false);
  expect_all_dtypes(
      "index 2", s,
      [&](const Tensor& x, const Tensor&) {
        return x.index({k.unsqueeze(1), j});
      },
      false);
  expect_all_dtypes(
      "index_select", s, [&](const Tensor& x, const Tensor&) { return index_select(x, 1, j); }, false);
  expect_all_dtypes(
      "take_along_dim", s, [&](const Tensor& x, const Tensor&) { return take_along_dim(x, i, 0); }, false);
  expect_all_dtypes(
      "masked_select", s, [&](const Tensor& x, const Tensor& o) { return masked_select(x, gt(o, 0)); }, false);
  expect_all_dtypes(
      "nonzero", s, [&](const Tensor& x, const Tensor&) { return nonzero(x).to(x.dtype()); }, false);
  const Tensor perm = from_vector(std::vector<std::int64_t>{3, 0, 4, 1}, {4, 1}).expand({4, 6}).contiguous();
  expect_all_dtypes(
      "scatter", s, [&](const Tensor& x, const Tensor& o) { return scatter(x, 0, perm, o); }, false);
  expect_all_dtypes(
      "scatter value", s, [&](const Tensor& x, const Tensor&) { return scatter(x, 0, perm, 1); }, false);
  expect_all_dtypes(
      "index_put", s,
      [&](const Tensor& x, const Tensor& o) {
        return x.index_put({from_vector(std::vector<std::int64_t>{4, 1}, {2})}, o.narrow(0, 0, 2));
      },
      false);
  expect_all_dtypes(
      "scatter_add", s, [&](const Tensor& x, const Tensor& o) { return scatter_add(x, 0, i, o.narrow(0, 0, 4)); },
      true);
  expect_all_dtypes(
      "index_add", s, [&](const Tensor& x, const Tensor& o) { return index_add(x, 0, k, index_select(o, 0, k)); },
      true);
  expect_all_dtypes(
      "index_put accumulate", s,
      [&](const Tensor& x, const Tensor& o) { return x.index_put({k}, index_select(o, 0, k), true); }, true);
}

// ---- gradients ------------------------------------------------------------------------------------------------

namespace {
void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                      const std::string& what) {
  EXPECT_TRUE(gradcheck(fn, inputs)) << what;
}

/// Strided stand-ins for an input of `shape`: a transposed copy, a slice of a larger tensor and an expanded one.
std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> layouts() {
  return {{"contiguous", [](const Tensor& t) { return t; }},
          {"transposed", [](const Tensor& t) { return t.transpose(0, 1).contiguous().transpose(0, 1); }},
          {"sliced", [](const Tensor& t) {
             Shape big = t.sizes();
             big.back() *= 2;
             Tensor b = zeros(big, kFloat64);
             b.slice(-1, 0, big.back(), 2).copy_(t);
             return b.slice(-1, 0, big.back(), 2);
           }}};
}
}  // namespace

TEST(IndexingGrad, GradcheckThroughStridedInputs) {
  const Tensor i = random_index({3, 4}, 4, 21), j = random_index({5}, 4, 22), mask = gt(random_tensor({4, 4}), 0.0);
  const Tensor perm = from_vector(std::vector<std::int64_t>{2, 0, 3}, {3, 1}).expand({3, 4}).contiguous();
  for (const auto& [name, layout] : layouts()) {
    Tensor x = random_tensor({4, 4}, kFloat64, true), src = random_tensor({3, 4}, kFloat64, true);
    Tensor v = random_tensor({5, 4}, kFloat64, true);
    const auto L = layout;
    expect_gradcheck([&](const std::vector<Tensor>& in) { return L(in[0]).index({Slice(), j}); }, {x}, "index " + name);
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) {
          return L(in[0]).index({j, Slice(None, None, 2)});
        },
        {x}, "index rows " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return L(in[0]).index({mask}); }, {x}, "mask " + name);
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) {
          return L(in[0]).index({i, remainder(add(i, 1), 4)});
        },
        {x}, "two tensors " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return gather(L(in[0]), 0, i); }, {x}, "gather " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return scatter(L(in[0]), 0, perm, in[1]); }, {x, src},
                     "scatter " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return scatter(L(in[0]), 1, perm.narrow(1, 0, 1), 2.0); },
                     {x}, "scatter value " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return scatter_add(L(in[0]), 0, i, in[1]); }, {x, src},
                     "scatter_add " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return index_add(L(in[0]), 0, j, in[1], 2.0); }, {x, v},
                     "index_add " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return index_select(L(in[0]), 1, j); }, {x},
                     "index_select " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return masked_select(L(in[0]), mask); }, {x},
                     "masked_select " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return take_along_dim(L(in[0]), i, 0); }, {x},
                     "take_along_dim " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return take_along_dim(L(in[0]), j); }, {x},
                     "take_along_dim flat " + name);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return index_put(L(in[0]), {j}, in[1], true); }, {x, v},
                     "index_put accumulate " + name);
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) {
          return index_put(L(in[0]), {from_vector(std::vector<std::int64_t>{3, 1}, {2})}, in[1].narrow(0, 0, 2));
        },
        {x, v}, "index_put " + name);
  }
  // Expanded inputs, a larger src (its extra elements get zero), and the in-place forms through a clone.
  Tensor row = random_tensor({1, 4}, kFloat64, true), big = random_tensor({4, 5}, kFloat64, true);
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return gather(in[0].expand({4, 4}), 0, i);
      },
      {row}, "gather expanded");
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return index_select(in[0].expand({3, 4}), 0, remainder(j, 3));
      },
      {row}, "index_select expanded");
  Tensor x = random_tensor({4, 4}, kFloat64, true);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return scatter(in[0], 0, perm, in[1]); }, {x, big},
                   "scatter larger src");
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) {
        Tensor y = in[0].clone();
        y.index_put_({Slice(), from_vector(std::vector<std::int64_t>{0, 2}, {2})},
                     in[1].narrow(0, 0, 4).narrow(1, 0, 2));
        return y;
      },
      {x, big}, "index_put_ through a view");
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return in[0].clone().scatter_add_(1, i.narrow(0, 0, 3), in[1].narrow(1, 0, 4));
      },
      {x, big}, "scatter_add_");
}

TEST(IndexingGrad, SecondOrderGradientsFlow) {
  // gather's gradient is a scatter_add, whose gradient is a gather: differentiate twice.
  const Tensor i = random_index({3, 4}, 4, 31);
  Tensor x = random_tensor({4, 4}, kFloat64, true);
  const Tensor w = random_tensor({3, 4}, kFloat64);
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) {
        Tensor y = gather(in[0] * in[0], 0, i);
        return y;
      },
      {x}, "gather of a square");
}

TEST(IndexingGrad, RepeatedIndicesSumTheirGradients) {
  Tensor x = random_tensor({3, 2}, kFloat64, true);
  const Tensor idx = from_vector(std::vector<std::int64_t>{2, 0, 2, -1}, {4});
  const Tensor w = random_tensor({4, 2}, kFloat64);
  (x.index({idx}) * w).sum().backward();
  const auto g = x.grad().to_vector<double>(), wv = w.to_vector<double>();
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(g[static_cast<std::size_t>(c)], wv[static_cast<std::size_t>(2 + c)]);
    EXPECT_EQ(g[static_cast<std::size_t>(2 + c)], 0.0);
    // In index order: w[0] + w[2] + w[3], as the CPU sums.
    EXPECT_EQ(
        g[static_cast<std::size_t>(4 + c)],
        (wv[static_cast<std::size_t>(c)] + wv[static_cast<std::size_t>(4 + c)]) + wv[static_cast<std::size_t>(6 + c)]);
  }
}

// ---- errors -----------------------------------------------------------------------------------------------------

namespace {
void expect_index_errors(Device dev) {
  const std::string on = dev.is_cuda() ? " (cuda)" : " (cpu)";
  const TensorOptions i64 = TensorOptions(kInt64).device(dev);
  const Tensor x = random_tensor({3, 4}, kFloat32).to(dev);
  const auto ix = [&](std::vector<std::int64_t> v, Shape shape) { return from_vector(v, shape).to(dev); };
  expect_error<IndexError>(
      [&] {
        gather(x, 1, ix({0, 4, 1}, {1, 3}));
      },
      {"gather", "index[0, 1] = 4", "dimension 1", "size 4", "[0, 4)"}, "gather" + on);
  expect_error<IndexError>(
      [&] {
        gather(x, 1, ix({-1}, {1, 1}));
      },
      {"gather", "index[0, 0] = -1"}, "gather negative" + on);
  expect_error<IndexError>(
      [&] {
        scatter(x, 0, ix({3}, {1, 1}), 1.0);
      },
      {"scatter", "index[0, 0] = 3", "size 3"}, "scatter" + on);
  expect_error<IndexError>(
      [&] {
        scatter_add(x, 0, ix({0, -2}, {1, 2}), ones({1, 2}).to(dev));
      },
      {"scatter_add", "index[0, 1] = -2"}, "scatter_add" + on);
  expect_error<IndexError>(
      [&] {
        index_add(x, 0, ix({0, 5}, {2}), ones({2, 4}).to(dev));
      },
      {"index_add", "index[1] = 5", "size 3"}, "index_add" + on);
  expect_error<IndexError>(
      [&] {
        index_select(x, 1, ix({1, 2, 9}, {3}));
      },
      {"index_select", "index[2] = 9"}, "index_select" + on);
  expect_error<IndexError>(
      [&] {
        x.index({Slice(), ix({0, -5}, {2})});
      },
      {"index", "indices[0][1] = -5", "[-4, 4)"}, "index" + on);
  expect_error<IndexError>([&] { x.clone().index_put_({ix({3}, {1})}, 1.0); }, {"index_put_", "indices[0][0] = 3"},
                           "index_put_" + on);
  expect_error<IndexError>([&] { take_along_dim(x, ix({12}, {1})); }, {"take_along_dim", "[0, 12)"},
                           "take_along_dim" + on);
  (void)i64;
  // The device is usable after the rejected calls, and nothing was left half-checked.
  expect_equal(gather(x, 1, ix({3, 0}, {1, 2})).cpu(),
               gather(x.cpu(), 1, from_vector(std::vector<std::int64_t>{3, 0}, {1, 2})), "after errors" + on);
}
}  // namespace

TEST(IndexingErrors, OutOfRangeIndicesOnTheCpu) { expect_index_errors(Device(kCPU)); }

TEST(IndexingErrors, OutOfRangeIndicesOnTheGpu) {
  MINIDL_REQUIRE_GPU();
  expect_index_errors(Device(kCUDA));
}

TEST(IndexingErrors, BadArgumentsNameTheOpAndArgument) {
  const Tensor x = random_tensor({3, 4}, kFloat32);
  const Tensor i = from_vector(std::vector<std::int64_t>{0, 1}, {1, 2});
  expect_error<TypeError>([&] { gather(x, 1, i.to(kInt32)); }, {"gather", "'index'", "int64", "int32"}, "gather int32");
  expect_error<ValueError>([&] { gather(x, 1, i.reshape({2})); }, {"gather", "'index'", "dimensions"}, "gather dims");
  expect_error<ValueError>(
      [&] {
        gather(x, 1, zeros({4, 1}, kInt64));
      },
      {"gather", "no larger than 'self'"}, "gather size");
  expect_error<IndexError>([&] { gather(x, 2, i); }, {"gather", "dimension out of range"}, "gather dim");
  expect_error<ValueError>([&] { gather(x, 1, i, true); }, {"gather", "sparse_grad"}, "sparse");
  expect_error<TypeError>(
      [&] {
        scatter(x, 1, i, ones({1, 2}, kFloat64));
      },
      {"scatter", "'src'", "float32", "float64"}, "scatter dtype");
  expect_error<ValueError>([&] { scatter(x, 1, i, ones({1, 1})); }, {"scatter", "no larger than 'src'"}, "scatter src");
  expect_error<ValueError>(
      [&] {
        scatter_add(x, 0, zeros({2, 5}, kInt64), ones({2, 5}));
      },
      {"scatter_add", "no larger than 'self'"}, "scatter_add size");
  expect_error<TypeError>(
      [&] {
        index_add(x, 0, i.reshape({2}), ones({2, 4}, kFloat64));
      },
      {"index_add", "'source'", "float64"}, "index_add dtype");
  expect_error<ValueError>(
      [&] {
        index_add(x, 0, i.reshape({2}), ones({3, 4}));
      },
      {"index_add", "'index'", "3"}, "index_add count");
  expect_error<ValueError>(
      [&] {
        index_add(x, 0, i.reshape({2}), ones({2, 5}));
      },
      {"index_add", "'source'", "dimension 1"}, "index_add shape");
  expect_error<TypeError>([&] { zeros({3}, kInt64).index_add_(0, i.reshape({2}), ones({2}, kInt64), 0.5); },
                          {"index_add_", "alpha"}, "index_add alpha");
  expect_error<ValueError>([&] { index_select(x, 0, i); }, {"index_select", "'index'", "[1, 2]"}, "index_select 2-d");
  expect_error<TypeError>([&] { index_select(x, 0, tensor({0.0})); }, {"index_select", "int64", "float32"},
                          "index_select float");
  expect_error<TypeError>([&] { masked_select(x, ones({3, 4})); }, {"masked_select", "'mask'", "bool"}, "mask dtype");
  expect_error<ValueError>(
      [&] {
        masked_select(x, ones({2, 4}, kBool));
      },
      {"masked_select", "broadcast"}, "mask shape");
  expect_error<ValueError>([&] { take_along_dim(x, i.reshape({2}), 0); }, {"take_along_dim", "dimensions"},
                           "take_along_dim dims");
  expect_error<IndexError>([&] { x.index({0, 1, 2}); }, {"index", "too many indices"}, "too many");
  expect_error<IndexError>([&] { x.index({Ellipsis, 0, Ellipsis}); }, {"index", "ellipsis"}, "two ellipses");
  expect_error<IndexError>([&] { x.index({5}); }, {"index", "index 5", "size 3"}, "int out of range");
  expect_error<ValueError>([&] { x.index({Slice(None, None, -1)}); }, {"index", "step"}, "negative step");
  expect_error<ValueError>([] { Slice(0, 1, 0); }, {"Slice", "zero"}, "zero step");
  expect_error<ValueError>([] { TensorIndex("..x"); }, {"TensorIndex", "..x"}, "bad ellipsis string");
  expect_error<IndexError>([&] { x.index({tensor({1.0})}); }, {"index", "int64", "float32"}, "float index tensor");
  expect_error<IndexError>([&] { x.index({ones({2}, kBool)}); }, {"index", "mask", "[2]", "[3, 4]"}, "mask shape");
  expect_error<IndexError>(
      [&] {
        x.index(
            {from_vector(std::vector<std::int64_t>{0, 1}, {2}), from_vector(std::vector<std::int64_t>{0, 1, 2}, {3})});
      },
      {"index", "broadcast"}, "index shapes");
  expect_error<TypeError>(
      [&] { x.clone().index_put_({from_vector(std::vector<std::int64_t>{0}, {1})}, ones({4}, kFloat64)); },
      {"index_put_", "'values'", "float64"}, "index_put dtype");
  expect_error<ValueError>([&] { x.clone().index_put_({from_vector(std::vector<std::int64_t>{0}, {1})}, ones({3})); },
                           {"index_put_", "shape mismatch", "[3]", "[1, 4]"}, "index_put shape");
  expect_error<ValueError>(
      [&] {
        Tensor e = zeros({1, 4}).expand({3, 4});
        NoGradGuard ng;
        e.scatter_(0, i, 1.0);
      },
      {"scatter_", "share memory"}, "scatter_ into an expanded tensor");
  Tensor leaf = random_tensor({3, 4}, kFloat32, true);
  expect_error<AutogradError>([&] { leaf.scatter_(0, i, 1.0); }, {"scatter_", "leaf"}, "scatter_ on a leaf");
  expect_error<ValueError>([&] { gather(Tensor(), 0, i); }, {"gather", "'self'"}, "undefined");
}

TEST(Indexing, EmptyAndZeroDimOperands) {
  const Tensor s = tensor({2.5}).reshape({});
  const Tensor zero = zeros({}, kInt64);
  EXPECT_EQ(gather(s, 0, zero).sizes(), Shape{});
  EXPECT_EQ(gather(s, 0, zero).item<float>(), 2.5f);
  EXPECT_EQ(scatter_add(s, 0, zero, s).item<float>(), 5.0f);
  EXPECT_EQ(index_add(s, 0, zeros({1}, kInt64), s).item<float>(), 5.0f);
  EXPECT_EQ(index_select(s, 0, zeros({1}, kInt64)).sizes(), Shape{});
  EXPECT_EQ(nonzero(s).sizes(), (Shape{1, 0}));
  EXPECT_EQ(masked_select(s, ones({}, kBool)).sizes(), Shape{1});
  const Tensor x = random_tensor({3, 0, 2}, kFloat32);
  EXPECT_EQ(x.index({Slice(), Slice(), zeros({5}, kInt64)}).sizes(), (Shape{3, 0, 5}));
  EXPECT_EQ(gather(random_tensor({3, 4}), 1, zeros({0}, kInt64)).sizes(), Shape{0});
  EXPECT_EQ(nonzero(x).sizes(), (Shape{0, 3}));
  EXPECT_EQ(masked_select(x, ones({2}, kBool)).sizes(), Shape{0});
  EXPECT_EQ(index_select(random_tensor({3, 4}), 0, zeros({0}, kInt64)).sizes(), (Shape{0, 4}));
}

// ---- GPU against CPU ----------------------------------------------------------------------------------------------

namespace {
/// op on CUDA against op on the CPU, for every dtype, the inputs strided as `layout` makes them.
void expect_gpu_matches_cpu(const std::string& what, const Shape& shape,
                            const std::function<Tensor(const Tensor&, const Tensor&, Device)>& op) {
  for (const DType dt : kAllDTypes) {
    const Tensor x = values_of(shape, dt), other = values_of(shape, dt);
    const Tensor want = op(x, other, Device(kCPU));
    const Tensor got = op(x.cuda(), other.cuda(), Device(kCUDA));
    ASSERT_TRUE(got.is_cuda()) << what;
    expect_equal(got.cpu(), want, what + " " + dtype_name(dt));
  }
}
}  // namespace

TEST(IndexingGpu, EveryOpMatchesTheCpuForEveryDType) {
  MINIDL_REQUIRE_GPU();
  for (const Shape& s : {Shape{7, 13}, Shape{33, 64}, Shape{1, 1}, Shape{5, 129}}) {
    const std::int64_t r = s[0], c = s[1];
    const Tensor i = random_index({r + 2, c}, r, 41), j = random_index({c + 3}, c, 42),
                 k = random_index({2 * r + 1}, r, 43);
    const Tensor perm = random_index({1, c}, r, 44).expand({1, c}).contiguous();
    const std::string at = " " + shape_str(s);
    const auto D = [](const Tensor& t, Device d) { return t.to(d); };
    expect_gpu_matches_cpu("gather" + at, s,
                           [&](const Tensor& x, const Tensor&, Device d) { return gather(x, 0, D(i, d)); });
    expect_gpu_matches_cpu("gather transposed" + at, s, [&](const Tensor& x, const Tensor&, Device d) {
      return gather(x.t(), 1,
                    D(i, d).t().narrow(0, 0, std::min(r, c)).contiguous().narrow(1, 0, std::min<std::int64_t>(r, 2)));
    });
    expect_gpu_matches_cpu("index rows" + at, s,
                           [&](const Tensor& x, const Tensor&, Device d) { return x.index({D(k, d)}); });
    expect_gpu_matches_cpu("index cols" + at, s, [&](const Tensor& x, const Tensor&, Device d) {
      return x.index({Slice(), D(j, d)});
    });
    expect_gpu_matches_cpu("index both" + at, s, [&](const Tensor& x, const Tensor&, Device d) {
      return x.index({D(k, d).unsqueeze(1), D(j, d)});
    });
    expect_gpu_matches_cpu("index sliced" + at, s, [&](const Tensor& x, const Tensor&, Device d) {
      return x.index({D(k, d), Slice(None, None, 3)});
    });
    expect_gpu_matches_cpu("index_select" + at, s,
                           [&](const Tensor& x, const Tensor&, Device d) { return index_select(x, 1, D(j, d)); });
    expect_gpu_matches_cpu("masked_select" + at, s,
                           [&](const Tensor& x, const Tensor& o, Device) { return masked_select(x, gt(o, 0)); });
    expect_gpu_matches_cpu("nonzero" + at, s, [&](const Tensor& x, const Tensor&, Device) { return nonzero(x); });
    expect_gpu_matches_cpu("take_along_dim" + at, s,
                           [&](const Tensor& x, const Tensor&, Device d) { return take_along_dim(x, D(i, d), 0); });
    expect_gpu_matches_cpu("scatter" + at, s,
                           [&](const Tensor& x, const Tensor& o, Device d) { return scatter(x, 0, D(perm, d), o); });
    expect_gpu_matches_cpu("index_put" + at, s, [&](const Tensor& x, const Tensor& o, Device d) {
      return x.index_put({Tensor(), D(j.narrow(0, 0, 1), d)}, o.narrow(1, 0, 1));
    });
    // Sums of exact values: the atomics' order cannot show.
    expect_gpu_matches_cpu("scatter_add" + at, s, [&](const Tensor& x, const Tensor& o, Device d) {
      return scatter_add(x, 0, D(i, d).narrow(0, 0, r), o);
    });
    expect_gpu_matches_cpu("index_add" + at, s, [&](const Tensor& x, const Tensor& o, Device d) {
      return index_add(x, 1, D(j, d), index_select(o, 1, D(j, d)));
    });
    expect_gpu_matches_cpu("index_put accumulate" + at, s, [&](const Tensor& x, const Tensor& o, Device d) {
      return x.index_put({D(k, d)}, index_select(o, 0, D(k, d)), true);
    });
  }
}

TEST(IndexingGpu, LargeRowsAndGradientsMatchTheCpu) {
  MINIDL_REQUIRE_GPU();
  // Rows of 16-byte packs (the vectorised path) and of odd widths, float gradients within rounding (atomics) and,
  // deterministic, bitwise.
  for (const std::int64_t width : {256, 77}) {
    Tensor x = random_tensor({500, width}, kFloat32);
    const Tensor idx = random_index({3000}, 500, 51);
    expect_equal(x.cuda().index({idx.cuda()}).cpu(), x.index({idx}), "rows " + std::to_string(width));
    expect_equal(index_select(x.cuda(), 0, idx.cuda()).cpu(), index_select(x, 0, idx), "index_select rows");
    Tensor xc = x.clone().requires_grad_(true), xg = x.cuda().requires_grad_(true);
    const Tensor w = random_tensor({3000, width}, kFloat32);
    (xc.index({idx}) * w).sum().backward();
    (xg.index({idx.cuda()}) * w.cuda()).sum().backward();
    expect_close(xg.grad(), xc.grad(), 1e-5, 1e-5, "grad atomics");
    {
      set_deterministic(true);
      Tensor xd = x.cuda().requires_grad_(true);
      (xd.index({idx.cuda()}) * w.cuda()).sum().backward();
      set_deterministic(false);
      expect_equal(xd.grad().cpu(), xc.grad(), "grad deterministic");
    }
  }
  for (const DType dt : {kBFloat16, kHalf, kFloat64}) {
    const Tensor src = random_tensor({40, 30}, dt), ix = random_index({40, 30}, 7, 52);
    set_deterministic(true);
    const Tensor got = scatter_add(zeros({7, 30}, dt).cuda(), 0, ix.cuda(), src.cuda()).cpu();
    set_deterministic(false);
    expect_equal(got, scatter_add(zeros({7, 30}, dt), 0, ix, src), std::string("deterministic ") + dtype_name(dt));
    expect_close(scatter_add(zeros({7, 30}, dt).cuda(), 0, ix.cuda(), src.cuda()).cpu(), got, rtol_of(dt) * 4,
                 dt == kFloat64 ? 1e-12 : 1e-2, std::string("atomics ") + dtype_name(dt));
  }
}

TEST(IndexingGpu, RowsStagedInSharedMemoryMatchTheCpu) {
  MINIDL_REQUIRE_GPU();
  // Gathers and accumulating scatters whose index walks the last dim (the shared-memory kernels): rows enough for
  // a block each (scatters) and few rows (gathers split each into parts), an index longer than the row, a strided
  // row, negative indices.
  for (const Shape& s : {Shape{300, 64}, Shape{3, 40}}) {
    const std::int64_t r = s[0], c = s[1];
    const Tensor i = random_index({r, c}, c, 71), wide = random_index({r, 3000}, c, 72),
                 neg = random_index({2 * c + 1}, c, 73, -c);
    const std::string at = " " + shape_str(s);
    const auto D = [](const Tensor& t, Device d) { return t.to(d); };
    const auto strided = [](const Tensor& x) { return x.t().contiguous().t(); };
    expect_gpu_matches_cpu("gather last" + at, s,
                           [&](const Tensor& x, const Tensor&, Device d) { return gather(x, 1, D(i, d)); });
    expect_gpu_matches_cpu("gather last, long index" + at, s,
                           [&](const Tensor& x, const Tensor&, Device d) { return gather(x, 1, D(wide, d)); });
    expect_gpu_matches_cpu("gather last, strided row" + at, s,
                           [&](const Tensor& x, const Tensor&, Device d) { return gather(strided(x), 1, D(i, d)); });
    expect_gpu_matches_cpu("index cols, negative" + at, s, [&](const Tensor& x, const Tensor&, Device d) {
      return x.index({Slice(), D(neg, d)});
    });
    // Sums of exact values: the atomics' order cannot show.
    expect_gpu_matches_cpu("scatter_add last" + at, s,
                           [&](const Tensor& x, const Tensor& o, Device d) { return scatter_add(x, 1, D(i, d), o); });
    expect_gpu_matches_cpu("scatter_add_ last, strided row" + at, s, [&](const Tensor& x, const Tensor& o, Device d) {
      Tensor y = strided(x.to(d));
      y.scatter_add_(1, D(i, d), o.to(d));
      return y;
    });
    expect_gpu_matches_cpu("index_put accumulate cols, negative" + at, s,
                           [&](const Tensor& x, const Tensor& o, Device d) {
                             const Tensor v = o.to(d).index({Slice(), D(neg, d)});
                             return x.to(d).index_put({Tensor(), D(neg, d)}, v, true);
                           });
  }
  // An index out of range is a typed error on these paths too.
  std::vector<std::int64_t> v(300 * 64, 5);
  v[4321] = 64;
  const Tensor bad = from_vector(v, {300, 64}).cuda();
  const Tensor x = random_tensor({300, 64}, kFloat32).cuda();
  expect_error<IndexError>([&] { (void)gather(x, 1, bad); }, {"gather", "= 64", "out of range"}, "gather last");
  expect_error<IndexError>([&] { x.clone().scatter_add_(1, bad, x); }, {"scatter_add_", "= 64", "out of range"},
                           "scatter_add_ last");
  const Tensor below = from_vector(std::vector<std::int64_t>{3, -65}, {2}).cuda();
  expect_error<IndexError>(
      [&] {
        (void)x.index({Slice(), below});
      },
      {"index", "= -65", "out of range"}, "index cols below -size");
}

TEST(IndexingGpu, EmptyZeroDimAndCpuIndices) {
  MINIDL_REQUIRE_GPU();
  const Tensor s = tensor({2.5}).reshape({}).cuda();
  EXPECT_EQ(gather(s, 0, zeros({}, kInt64).cuda()).item<float>(), 2.5f);
  EXPECT_EQ(nonzero(s).sizes(), (Shape{1, 0}));
  const Tensor x = random_tensor({3, 0, 2}, kFloat32).cuda();
  EXPECT_EQ(x.index({Slice(), Slice(), zeros({5}, kInt64).cuda()}).sizes(), (Shape{3, 0, 5}));
  EXPECT_EQ(nonzero(x).sizes(), (Shape{0, 3}));
  // Index tensors of x.index may live on the CPU, as in PyTorch.
  const Tensor y = random_tensor({4, 3}, kFloat32);
  const Tensor idx = from_vector(std::vector<std::int64_t>{3, 1}, {2});
  expect_equal(y.cuda().index({idx}).cpu(), y.index({idx}), "cpu index");
  expect_equal(y.cuda().index({gt(y, 0.0)}).cpu(), y.index({gt(y, 0.0)}), "cpu mask");
}

// Effective bandwidth of the memory-bound accesses on large tensors (bytes read and written once / time), for
// the lead's benchmark table: run with --gtest_also_run_disabled_tests --gtest_filter='*Bandwidth*'.
TEST(IndexingGpu, DISABLED_BandwidthOfLargeAccesses) {
  MINIDL_REQUIRE_GPU();
  const auto time = [](const std::function<void()>& f) {
    f();
    cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 10; ++r) f();
    cuda::synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 10;
  };
  const std::int64_t rows = 1 << 20, width = 256;  // 1 GiB of float32
  const Tensor x = rand({rows, width}, TensorOptions(kFloat32).device(Device(kCUDA)));
  const Tensor idx = random_index({rows}, rows, 61).cuda();
  const Tensor idx2d = random_index({rows, width}, rows, 62).cuda();
  const double bytes = static_cast<double>(rows * width * 4);
  const auto report = [&](const char* name, double moved, double s) {
    std::printf("BANDWIDTH %-28s %8.1f GB/s (%.3f ms)\n", name, moved / s / 1e9, s * 1e3);
  };
  Tensor copy = empty({rows, width}, TensorOptions(kFloat32).device(Device(kCUDA)));
  report("copy_", 2 * bytes, time([&] { copy.copy_(x); }));
  report("index rows", 2 * bytes + rows * 8, time([&] { (void)x.index({idx}); }));
  report("index_select rows", 2 * bytes + rows * 8, time([&] { (void)index_select(x, 0, idx); }));
  report("gather dim 0 (random)", 2 * bytes + 2 * bytes, time([&] { (void)gather(x, 0, idx2d); }));
  const Tensor cols = remainder(idx2d, width);
  report("gather dim 1 (random)", 2 * bytes + 2 * bytes, time([&] { (void)gather(x, 1, cols); }));
  Tensor acc = zeros({rows, width}, TensorOptions(kFloat32).device(Device(kCUDA)));
  report("scatter_add_ dim 0", 3 * bytes + 2 * bytes, time([&] { acc.scatter_add_(0, idx2d, x); }));
  report("index_add_ rows", 3 * bytes + rows * 8, time([&] { acc.index_add_(0, idx, x); }));
  report("index_put_ accumulate rows", 3 * bytes + rows * 8,
         time([&] { acc.index_put_(std::vector<Tensor>{idx}, x, true); }));
  const Tensor mask = gt(x, 0.5);
  report("masked_select (half true)", bytes * 1.25 + bytes / 4 * 2 + bytes,
         time([&] { (void)masked_select(x, mask); }));
}
