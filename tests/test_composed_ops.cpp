// The ops composed from others (ops/diagonal.cpp, stacking.cpp, reduce_compositions.cpp, view.cpp's movedim and
// diagonal): against PyTorch's values and gradients (golden/composed_golden.json, from gen_composed_golden.py) on
// the CPU and the GPU, float64 gradcheck, views of non-contiguous inputs, empty inputs and bad arguments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "golden_file.h"
#include "test_util.h"

namespace minidl {
namespace {

using nlohmann::json;
using testing::expect_close;
using testing::random_tensor;
using i64 = std::int64_t;

std::vector<i64> ints(const json& j) { return j.get<std::vector<i64>>(); }
std::vector<double> numbers(const json& j) {
  std::vector<double> v;
  for (const json& x : j) v.push_back(testing::golden_number(x));
  return v;
}

/// The case's op on its inputs, as its generator called PyTorch's.
std::vector<Tensor> run_case(const std::string& name, const json& a, const std::vector<Tensor>& x) {
  const auto opt = [&](const char* key, auto fallback) {
    return a.contains(key) ? a[key].get<decltype(fallback)>() : fallback;
  };
  if (name.rfind("diagonal", 0) == 0)
    return {x[0].diagonal(opt("offset", i64{0}), opt("dim1", i64{0}), opt("dim2", i64{1}))};
  if (name.rfind("diag of", 0) == 0) return {diag(x[0], opt("offset", i64{0}))};
  if (name == "trace") return {trace(x[0])};
  if (name == "movedim") return {movedim(x[0], ints(a["source"]), ints(a["destination"]))};
  if (name == "tensor_split sections") return tensor_split(x[0], a["sections"].get<i64>());
  if (name == "tensor_split indices") return x[0].tensor_split(ints(a["indices"]), a["dim"].get<i64>());
  if (name.rfind("hstack", 0) == 0) return {hstack(x)};
  if (name == "vstack") return {vstack(x)};
  if (name == "dstack") return {dstack(x)};
  if (name.rfind("tile", 0) == 0) return {x[0].tile(ints(a["dims"]))};
  if (name == "nansum") return {nansum(x[0])};
  if (name == "nansum dim 1") return {nansum(x[0], ints(a["dim"]), a["keepdim"].get<bool>())};
  if (name == "var_mean") {
    auto [v, m] = var_mean(x[0], a["dim"].get<std::vector<i64>>()[0]);
    return {v, m};
  }
  if (name == "var_mean correction 0 keepdim") {
    const std::vector<i64> dims = ints(a["dim"]);
    auto [v, m] = var_mean(x[0], dims, a["unbiased"].get<bool>(), a["keepdim"].get<bool>());
    return {v, m};
  }
  if (name == "std_mean") {
    auto [s, m] = std_mean(x[0], a["dim"].get<std::vector<i64>>()[0]);
    return {s, m};
  }
  if (name == "argwhere") return {argwhere(x[0])};
  throw ValueError("no op for golden case " + name);
}

/// Compares every case's outputs and input gradients on `device` with PyTorch's.
void check_golden(const json& golden, Device device) {
  for (const json& c : golden["cases"]) {
    const std::string name = c["name"].get<std::string>() + " on " + device.str();
    std::vector<Tensor> inputs;
    for (const json& in : c["inputs"]) {
      Tensor t = from_vector(numbers(in["values"]), ints(in["shape"]));
      inputs.push_back(t.to(device).requires_grad_(true));
    }
    const std::vector<Tensor> outs = run_case(c["name"], c["args"], inputs);
    ASSERT_EQ(outs.size(), c["outputs"].size()) << name;
    Tensor total;
    double k = 1.0;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      const json& want = c["outputs"][i];
      ASSERT_EQ(outs[i].sizes(), ints(want["shape"])) << name << " output " << i;
      EXPECT_EQ(dtype_name(outs[i].dtype()), want["dtype"].get<std::string>()) << name << " output " << i;
      EXPECT_EQ(outs[i].device(), device) << name;
      expect_close(outs[i], from_vector(numbers(want["values"]), ints(want["shape"])), 1e-12, 1e-12,
                   name + " output " + std::to_string(i));
      if (is_floating_point(outs[i].dtype()) && outs[i].numel() > 0) {
        const Tensor w =
            arange(k, k + static_cast<double>(outs[i].numel()), 1.0, TensorOptions(kFloat64).device(device))
                .reshape(outs[i].sizes());
        const Tensor term = (outs[i] * w).sum();
        total = total.defined() ? total + term : term;
      }
      k += static_cast<double>(outs[i].numel());
    }
    if (!total.defined() || !total.requires_grad()) continue;
    total.backward();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (c["grads"][i].is_null()) continue;
      expect_close(inputs[i].grad(), from_vector(numbers(c["grads"][i]), inputs[i].sizes()), 1e-12, 1e-12,
                   name + " grad " + std::to_string(i));
    }
  }
}

TEST(ComposedOps, ValuesAndGradientsMatchPyTorch) {
  const json golden = testing::read_golden("composed_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(golden, "composed_golden.json", "gen_composed_golden.py");
  check_golden(golden, Device(kCPU));
}

TEST(ComposedOpsGpu, ValuesAndGradientsMatchPyTorch) {
  MINIDL_REQUIRE_GPU();
  const json golden = testing::read_golden("composed_golden.json");
  MINIDL_REQUIRE_GOLDEN_FILE(golden, "composed_golden.json", "gen_composed_golden.py");
  check_golden(golden, Device(kCUDA));
}

TEST(ComposedOps, Gradcheck) {
  const auto check = [](const char* what, auto fn, const std::vector<Tensor>& in) {
    EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& x) { return fn(x); }, in)) << what;
  };
  const Tensor m = random_tensor({4, 5}, kFloat64, true), v = random_tensor({3}, kFloat64, true);
  const Tensor t3 = random_tensor({2, 3, 4}, kFloat64, true);
  check("diagonal", [](auto& x) { return x[0].diagonal(-1, 1, 0); }, {t3});
  check("diag", [](auto& x) { return diag(x[0], 1); }, {v});
  check("diag of a matrix", [](auto& x) { return diag(x[0], -2); }, {m});
  check("trace", [](auto& x) { return trace(x[0]); }, {m});
  check("movedim", [](auto& x) { return x[0].movedim(0, -1); }, {t3});
  check("tensor_split", [](auto& x) { return tensor_split(x[0], 3, 1)[1]; }, {m});
  check("hstack", [](auto& x) { return hstack({x[0], x[0] * 2.0}); }, {m});
  check("vstack", [](auto& x) { return vstack({x[0], x[1]}); }, {v, random_tensor({2, 3}, kFloat64, true)});
  check("dstack", [](auto& x) { return dstack({x[0], x[0]}); }, {m});
  check("tile", [](auto& x) { return x[0].tile({2, 1, 3}); }, {m});
  check("nansum", [](auto& x) { return nansum(x[0], {0}); }, {m});
  check("var_mean",
        [](auto& x) {
          auto [a, b] = var_mean(x[0], {1}, true, true);
          return a * b;
        },
        {m});
  check("std_mean",
        [](auto& x) {
          auto [a, b] = std_mean(x[0], true);
          return a + b;
        },
        {m});
}

TEST(ComposedOps, ViewsShareStorageAndTakeStridedInputs) {
  const Tensor base = random_tensor({5, 6}, kFloat32);
  const Tensor t = base.t();  // non-contiguous
  EXPECT_EQ(t.diagonal(1).to_vector<float>(), t.contiguous().diagonal(1).to_vector<float>());
  Tensor d = base.diagonal();
  d.fill_(7.0);  // a view: writes reach base
  for (i64 i = 0; i < 5; ++i) EXPECT_EQ(base.select(0, i).select(0, i).item<float>(), 7.0f);
  EXPECT_EQ(trace(t).item<float>(), trace(t.contiguous()).item<float>());
  EXPECT_EQ(t.tile({2, 2}).to_vector<float>(), t.contiguous().tile({2, 2}).to_vector<float>());
  EXPECT_EQ(hstack({t, t}).to_vector<float>(), hstack({t.contiguous(), t.contiguous()}).to_vector<float>());
  const std::vector<Tensor> parts = t.tensor_split(4, 1);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].size(1), 2);  // 5 = 2 + 1 + 1 + 1
  EXPECT_EQ(parts[3].size(1), 1);
  EXPECT_EQ(parts[1].data_ptr(), t.narrow(1, 2, 1).data_ptr());  // views, nothing copied
  EXPECT_EQ(t.movedim({0, 1}, {1, 0}).strides(), base.strides());
  EXPECT_EQ(swapaxes(t, 0, 1).data_ptr(), base.data_ptr());
  EXPECT_EQ(t.moveaxis(1, 0).sizes(), base.sizes());
}

TEST(ComposedOps, EmptyInputs) {
  EXPECT_EQ(zeros({0, 3}).diagonal().sizes(), Shape{0});
  EXPECT_EQ(zeros({2, 3}).diagonal(5).sizes(), Shape{0});
  EXPECT_EQ(diag(zeros({0})).sizes(), (Shape{0, 0}));
  EXPECT_EQ(trace(zeros({0, 0})).item<float>(), 0.0f);
  EXPECT_EQ(nansum(zeros({0, 2})).item<float>(), 0.0f);
  const std::vector<Tensor> parts = tensor_split(zeros({0, 2}), 3);
  ASSERT_EQ(parts.size(), 3u);
  for (const Tensor& p : parts) EXPECT_EQ(p.sizes(), (Shape{0, 2}));
  EXPECT_EQ(hstack({zeros({2, 0}), ones({2, 1})}).sizes(), (Shape{2, 1}));
  EXPECT_EQ(zeros({2, 0}).tile({3, 2}).sizes(), (Shape{6, 0}));
  EXPECT_EQ(argwhere(zeros({2, 3})).sizes(), (Shape{0, 2}));
}

TEST(ComposedOps, IntegralInputsKeepSumsRules) {
  const Tensor i = arange(0, 9, 1, TensorOptions(kInt32)).reshape({3, 3});
  EXPECT_EQ(trace(i).dtype(), kInt64);
  EXPECT_EQ(trace(i).item<std::int64_t>(), 12);
  EXPECT_EQ(nansum(i).item<std::int64_t>(), 36);
  EXPECT_EQ(diag(i, -1).to_vector<std::int32_t>(), (std::vector<std::int32_t>{3, 7}));
}

TEST(ComposedOps, BadInput) {
  const Tensor m = zeros({3, 4});
  EXPECT_ERROR(ValueError, zeros({3}).diagonal(), "diagonal", "2 dims", "[3]");
  EXPECT_ERROR(ValueError, m.diagonal(0, 1, -1), "diagonal", "same dim");
  EXPECT_ERROR(IndexError, m.diagonal(0, 0, 2), "diagonal", "out of range");
  EXPECT_ERROR(ValueError, diag(zeros({2, 2, 2})), "diag", "1-D or 2-D", "[2, 2, 2]");
  EXPECT_ERROR(ValueError, trace(zeros({3})), "trace", "matrix", "[3]");
  EXPECT_ERROR(ValueError, movedim(m, {0, 1}, {1}), "movedim", "same number");
  EXPECT_ERROR(ValueError, movedim(m, {0, 0}, {1, 0}), "movedim", "repeated dim in `source`");
  EXPECT_ERROR(ValueError, movedim(m, {0, 1}, {1, 1}), "movedim", "repeated dim in `destination`");
  EXPECT_ERROR(ValueError, tensor_split(m, 0), "tensor_split", "larger than 0", "0");
  EXPECT_ERROR(ValueError, tensor_split(zeros({}), 2), "tensor_split", "1-dimensional");
  EXPECT_ERROR(ValueError, hstack({}), "hstack", "non-empty");
  EXPECT_ERROR(ValueError, vstack({zeros({2, 3}), zeros({2, 4})}), "cat");
}

}  // namespace
}  // namespace minidl
