// The layer ops in bfloat16 and float16 (mixed-precision training of the example CNN, a ResNet and a GPT): each
// op's forward and backward against the float64 result of the same rounded inputs, on the CPU (the float path of
// layers/lowp.h) and the GPU (the 16-bit kernels and cuDNN; skipped without a GPU), CPU against GPU,
// non-contiguous and empty inputs, mixed float32 parameters, and the typed errors of unsupported dtypes.
//
// Tolerances: PyTorch's per-dtype rtol (bfloat16 1.6e-2, float16 1e-3) with its default atol 1e-5 where every
// output is one rounding of a float32 result. For results that sum terms of both signs from a rounded value
// (the GPU's softmax / cross-entropy backward, which read the rounded saved output, cuDNN's 16-bit algorithms, and
// embedding's weight gradient, which adds the rows of repeated indices in the weight's dtype)
// the atol is rtol times the largest reference magnitude, the per-op widening PyTorch's OpInfo tests make
// for these ops in 16-bit.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "golden_file.h"
#include "test_util.h"

namespace minidl {
namespace {

namespace F = nn::functional;
using testing::expect_close;
using testing::random_tensor;

double rtol_of(DType d) { return d == kBFloat16 ? 1.6e-2 : 1e-3; }

/// One op under test: its inputs' shapes, which of them stay float32 (mixed-precision parameters), and the op.
struct Case {
  std::string name;
  std::vector<Shape> shapes;
  /// The op on the inputs and `index` (the int64 targets or indices of the ops that take some, on their device).
  std::function<Tensor(const std::vector<Tensor>&, const Tensor&)> op;
  std::vector<bool> float32_params = {};  // per input: true keeps it float32 beside 16-bit activations
  bool sums = false;                      // atol scaled by the reference's magnitude (see the file comment)
  bool empty_batch = true;                // whether the op takes a batch of 0 (conv2d and pooling refuse one)
  Tensor index = {};                      // int64 on the CPU, or undefined
};

Tensor index_on(const Case& c, Device device) { return c.index.defined() ? c.index.to(device) : Tensor(); }

bool keeps_float32(const Case& c, std::size_t i) { return i < c.float32_params.size() && c.float32_params[i]; }

/// A fresh random input of `shape` rounded to `dtype` on `device`; `strided`: a transposed view of the last two
/// dims (non-contiguous).
Tensor make_input(const Shape& shape, DType dtype, Device device, bool strided) {
  if (!strided || shape.size() < 2) return random_tensor(shape, kFloat64).to(dtype).to(device);
  Shape swapped = shape;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  Tensor t = random_tensor(swapped, kFloat64).to(dtype).to(device).transpose(-1, -2);
  EXPECT_FALSE(t.is_contiguous() && t.numel() > 1);
  return t;
}

double atol_for(const Case& c, DType d, const Tensor& ref) {
  if (!c.sums || ref.numel() == 0) return 1e-5;
  return 1e-5 + rtol_of(d) * ref.detach().abs().max().item<double>();
}

/// Runs c in `dtype` on `device` and in float64 on the same rounded values; compares outputs and every gradient.
void check_case(const Case& c, DType dtype, Device device, bool strided = false) {
  SCOPED_TRACE(c.name + " " + dtype_name(dtype) + " on " + device.str() + (strided ? " (non-contiguous)" : ""));
  std::vector<Tensor> low, ref;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    const DType d = keeps_float32(c, i) ? kFloat32 : dtype;
    Tensor x = make_input(c.shapes[i], d, device, strided && i == 0).detach().requires_grad_(true);
    low.push_back(x);
    ref.push_back(x.detach().cpu().to(kFloat64).requires_grad_(true));
  }
  const Tensor y = c.op(low, index_on(c, device)), y_ref = c.op(ref, c.index);
  EXPECT_EQ(y.dtype(), dtype);
  EXPECT_EQ(y.device(), device);
  const double rtol = rtol_of(dtype);
  expect_close(y, y_ref, rtol, atol_for(c, dtype, y_ref), c.name + " forward");
  const Tensor g = random_tensor(y_ref.sizes(), kFloat64).to(dtype);
  y.backward(g.to(device));
  y_ref.backward(g.to(kFloat64));
  for (std::size_t i = 0; i < low.size(); ++i) {
    const std::string what = c.name + " gradient of input " + std::to_string(i);
    ASSERT_TRUE(low[i].grad().defined()) << what;
    EXPECT_EQ(low[i].grad().dtype(), low[i].dtype()) << what;
    expect_close(low[i].grad(), ref[i].grad(), rtol, atol_for(c, dtype, ref[i].grad()), what);
  }
}

/// The ops of the example CNN, a ResNet and a GPT, with batch `n` (0: empty inputs).
std::vector<Case> cases(std::int64_t n) {
  std::vector<Case> v;
  v.push_back({"conv2d",
               {{n, 3, 7, 6}, {4, 3, 3, 3}, {4}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::conv2d(t[0], t[1], t[2], 1, 1); },
               {},
               true,
               false});
  v.push_back({"conv2d_relu (stride 2)",
               {{n, 4, 8, 8}, {5, 4, 3, 3}, {5}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::conv2d_relu(t[0], t[1], t[2], 2, 1); },
               {},
               true,
               false});
  v.push_back({"conv_transpose2d",
               {{n, 4, 5, 5}, {4, 3, 3, 3}, {3}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::conv_transpose2d(t[0], t[1], t[2], 2, 1); },
               {},
               true});
  v.push_back({"conv1d",
               {{n, 3, 9}, {4, 3, 3}, {4}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::conv1d(t[0], t[1], t[2], 1, 1); },
               {},
               true,
               false});
  v.push_back({"max_pool2d",
               {{n, 3, 8, 6}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::max_pool2d(t[0], 2); },
               {},
               false,
               false});
  v.push_back({"max_pool2d (overlapping, padded)",
               {{n, 2, 7, 7}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::max_pool2d(t[0], 3, 2, 1); },
               {},
               false,
               false});
  v.push_back({"avg_pool2d",
               {{n, 3, 6, 6}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::avg_pool2d(t[0], 3, 2, 1); },
               {},
               false,
               false});
  v.push_back({"adaptive_avg_pool2d (global)", {{n, 4, 5, 5}}, [](const std::vector<Tensor>& t, const Tensor&) {
                 return F::adaptive_avg_pool2d(t[0], 1);
               }});
  v.push_back(
      {"softmax", {{n, 7}}, [](const std::vector<Tensor>& t, const Tensor&) { return F::softmax(t[0], 1); }, {}, true});
  v.push_back({"log_softmax (strided dim)",
               {{4, n, 5}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::log_softmax(t[0], 0); },
               {},
               true});
  v.push_back({"layer_norm (float32 weight, bias)",
               {{n, 3, 16}, {16}, {16}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::layer_norm(t[0], {16}, t[1], t[2]); },
               {false, true, true}});
  v.push_back({"layer_norm (16-bit weight, bias)",
               {{n, 16}, {16}, {16}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::layer_norm(t[0], {16}, t[1], t[2]); }});
  v.push_back({"rms_norm",
               {{n, 12}, {12}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::rms_norm(t[0], {12}, t[1]); },
               {false, true}});
  v.push_back({"group_norm",
               {{n, 6, 3, 3}, {6}, {6}},
               [](const std::vector<Tensor>& t, const Tensor&) { return F::group_norm(t[0], 3, t[1], t[2]); },
               {false, true, true}});
  return v;
}

/// Ops that need a non-empty batch (training statistics, losses over samples, embedding lookups).
std::vector<Case> batch_cases() {
  std::vector<Case> v;
  v.push_back({"batch_norm (training, float32 affine)",
               {{5, 4, 3, 3}, {4}, {4}},
               [](const std::vector<Tensor>& t, const Tensor&) {
                 const TensorOptions o = TensorOptions(t[1].dtype()).device(t[0].device());  // as the weight
                 return F::batch_norm(t[0], zeros({4}, o), ones({4}, o), t[1], t[2], true);
               },
               {false, true, true}});
  v.push_back(
      {"batch_norm (training, 16-bit affine)", {{6, 3}, {3}, {3}}, [](const std::vector<Tensor>& t, const Tensor&) {
         return F::batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true);
       }});
  const Tensor target = randint(0, 5, {6}, TensorOptions(kInt64));
  const Tensor index = randint(0, 7, {3, 4}, TensorOptions(kInt64));
  v.push_back({"cross_entropy",
               {{6, 5}},
               [](const std::vector<Tensor>& t, const Tensor& target) { return F::cross_entropy(t[0], target); },
               {},
               true,
               true,
               target});
  v.push_back({"cross_entropy (sum, label smoothing)",
               {{6, 5}},
               [](const std::vector<Tensor>& t, const Tensor& target) {
                 return F::cross_entropy(t[0], target, nn::Reduction::Sum, 0.1);
               },
               {},
               true,
               true,
               target});
  v.push_back({"nll_loss (per sample)",
               {{6, 5}},
               [](const std::vector<Tensor>& t, const Tensor& target) {
                 return F::nll_loss(t[0], target, nn::Reduction::None);
               },
               {},
               false,
               true,
               target});
  v.push_back({"embedding",
               {{7, 5}},
               [](const std::vector<Tensor>& t, const Tensor& index) { return F::embedding(index, t[0]); },
               {},
               true,
               true,
               index});  // the weight gradient adds rows of repeated indices
  return v;
}

void check_all(DType dtype, Device device) {
  for (const Case& c : cases(3)) check_case(c, dtype, device);
  for (const Case& c : cases(3)) check_case(c, dtype, device, true);
  for (const Case& c : cases(0)) {
    if (c.empty_batch) check_case(c, dtype, device);
  }
  for (const Case& c : batch_cases()) check_case(c, dtype, device);
}

TEST(LayersLowp, CpuBFloat16) { check_all(kBFloat16, Device(kCPU)); }
TEST(LayersLowp, CpuFloat16) { check_all(kFloat16, Device(kCPU)); }

TEST(LayersLowp, GpuBFloat16) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  check_all(kBFloat16, Device(kCUDA));
}
TEST(LayersLowp, GpuFloat16) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  check_all(kFloat16, Device(kCUDA));
}

/// The same rounded inputs on both devices: outputs and gradients agree within the dtype's tolerance (both are
/// one rounding of a float32 result, up to the order of the float32 sums).
TEST(LayersLowp, CpuMatchesGpu) {
  MINIDL_REQUIRE_GPU();
  cuda::set_allow_tf32(false, false);
  for (DType dtype : {kBFloat16, kFloat16}) {
    std::vector<Case> all = cases(3);
    for (Case& c : batch_cases()) all.push_back(c);
    for (const Case& c : all) {
      SCOPED_TRACE(c.name + " " + dtype_name(dtype));
      std::vector<Tensor> on_cpu, on_gpu;
      for (std::size_t i = 0; i < c.shapes.size(); ++i) {
        const Tensor x = random_tensor(c.shapes[i], kFloat64).to(keeps_float32(c, i) ? kFloat32 : dtype);
        on_cpu.push_back(x.clone().requires_grad_(true));
        on_gpu.push_back(x.cuda().requires_grad_(true));
      }
      const Tensor y_cpu = c.op(on_cpu, c.index), y_gpu = c.op(on_gpu, index_on(c, Device(kCUDA)));
      const double rtol = 2 * rtol_of(dtype), atol = atol_for(c, dtype, y_cpu.to(kFloat64));
      expect_close(y_gpu, y_cpu, rtol, atol, c.name + " forward");
      const Tensor g = random_tensor(y_cpu.sizes(), kFloat64).to(dtype);
      y_cpu.backward(g);
      y_gpu.backward(g.cuda());
      for (std::size_t i = 0; i < on_cpu.size(); ++i) {
        expect_close(on_gpu[i].grad(), on_cpu[i].grad(), rtol, atol_for(c, dtype, on_cpu[i].grad().to(kFloat64)),
                     c.name + " gradient " + std::to_string(i));
      }
    }
  }
}

/// Dropout in 16-bit: every element is 0 or x / (1 - p) (rounded once), the gradient is masked where the output
/// is, the running statistics of a 16-bit batch norm are updated; on each device there is.
void check_dropout(DType dtype, Device device) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " on " + device.str());
  const double p = 0.3;
  Tensor x = (random_tensor({64, 33}, kFloat64, false, 0.5, 1.0)).to(dtype).to(device).requires_grad_(true);
  const Tensor y = F::dropout(x, p, true);
  EXPECT_EQ(y.dtype(), dtype);
  y.backward(ones_like(y));
  const std::vector<double> xs = x.detach().cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> ys = y.detach().cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> gs = x.grad().cpu().to(kFloat64).to_vector<double>();
  const double scale = 1.0 / (1.0 - p), rtol = rtol_of(dtype);
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (ys[i] == 0.0) {
      ++dropped;
      EXPECT_EQ(gs[i], 0.0) << "element " << i;
    } else {
      EXPECT_NEAR(ys[i], xs[i] * scale, rtol * xs[i] * scale) << "element " << i;
      EXPECT_NEAR(gs[i], scale, rtol * scale) << "element " << i;
    }
  }
  EXPECT_GT(dropped, xs.size() / 5);
  EXPECT_LT(dropped, xs.size() * 2 / 5);
  EXPECT_EQ(F::dropout(x.narrow(0, 0, 0), p, true).numel(), 0);
}

TEST(LayersLowp, Dropout) {
  for (DType dtype : {kBFloat16, kFloat16}) {
    check_dropout(dtype, Device(kCPU));
    if (testing::gpu_available()) check_dropout(dtype, Device(kCUDA));
  }
}

/// batch_norm's running statistics in training: float32 buffers beside 16-bit activations are updated in place,
/// 16-bit ones rounded from the float update; both as float64 would have it within the dtype's tolerance.
TEST(LayersLowp, BatchNormRunningStatistics) {
  std::vector<Device> devices = {Device(kCPU)};
  if (testing::gpu_available()) devices.push_back(Device(kCUDA));
  for (const Device& device : devices) {
    for (DType stats : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(device.str() + ", statistics in " + dtype_name(stats));
      const Tensor x = random_tensor({8, 3, 2, 2}, kFloat64).to(kBFloat16);
      Tensor mean = zeros({3}, TensorOptions(stats).device(device)),
             var = ones({3}, TensorOptions(stats).device(device));
      Tensor mean64 = zeros({3}, TensorOptions(kFloat64)), var64 = ones({3}, TensorOptions(kFloat64));
      F::batch_norm(x.to(device), mean, var, Tensor(), Tensor(), true, 0.1);
      F::batch_norm(x.to(kFloat64), mean64, var64, Tensor(), Tensor(), true, 0.1);
      EXPECT_EQ(mean.dtype(), stats);
      expect_close(mean, mean64, 1.6e-2, 1e-5, "running_mean");
      expect_close(var, var64, 1.6e-2, 1e-5, "running_var");
      // Evaluation with those statistics: the input's dtype out.
      const Tensor y = F::batch_norm(x.to(device), mean, var, Tensor(), Tensor(), false);
      EXPECT_EQ(y.dtype(), kBFloat16);
      expect_close(
          y, F::batch_norm(x.to(kFloat64), mean.cpu().to(kFloat64), var.cpu().to(kFloat64), Tensor(), Tensor(), false),
          1.6e-2, 1e-5, "evaluation");
    }
  }
}

// PyTorch's results (tests/golden/layers_lowp_golden.json, from gen_layers_lowp_golden.py): the cases above by
// name, with PyTorch's inputs (16-bit values, float32 parameters), its 16-bit output and gradients. minidl runs each
// on the same inputs; the two agree within the dtype's tolerance (each is within it of the exact result).
const nlohmann::json& golden() {
  static const nlohmann::json g = testing::read_golden("layers_lowp_golden.json");
  return g;
}

Tensor golden_tensor(const nlohmann::json& t) {
  std::vector<double> values;
  for (const auto& v : t["values"]) values.push_back(testing::golden_number(v));
  const Shape shape = t["shape"].get<Shape>();
  return from_vector<double>(values, shape).to(testing::dtype_named(t["dtype"]));
}

void check_golden_on(Device device) {
  std::vector<Case> all = cases(3);
  for (Case& c : batch_cases()) all.push_back(c);
  int checked = 0;
  for (const auto& g : golden()["cases"]) {
    const std::string name = g["name"];
    const DType dtype = testing::dtype_named(g["dtype"]);
    SCOPED_TRACE(name + " " + dtype_name(dtype) + " on " + device.str());
    const auto c = std::find_if(all.begin(), all.end(), [&](const Case& k) { return k.name == name; });
    ASSERT_NE(c, all.end()) << "no case named " << name;
    std::vector<Tensor> inputs;
    for (const auto& t : g["inputs"]) inputs.push_back(golden_tensor(t).to(device).requires_grad_(true));
    const Tensor index = g["index"].is_null() ? Tensor() : golden_tensor(g["index"]).to(device);
    const Tensor y = c->op(inputs, index);
    const Tensor expected = golden_tensor(g["output"]);
    EXPECT_EQ(y.dtype(), expected.dtype());
    const double rtol = 2 * rtol_of(dtype);
    expect_close(y, expected, rtol, atol_for(*c, dtype, expected.to(kFloat64)), name + " forward");
    y.backward(golden_tensor(g["grad_output"]).to(device));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor want = golden_tensor(g["grads"][i]);
      EXPECT_EQ(inputs[i].grad().dtype(), want.dtype());
      expect_close(inputs[i].grad(), want, rtol, atol_for(*c, dtype, want.to(kFloat64)),
                   name + " gradient " + std::to_string(i));
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(LayersLowpGolden, MatchesPyTorchOnCpu) {
  MINIDL_REQUIRE_GOLDEN_FILE(golden(), "layers_lowp_golden.json", "gen_layers_lowp_golden.py")
  check_golden_on(Device(kCPU));
}

TEST(LayersLowpGolden, MatchesPyTorchOnGpu) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_GOLDEN_FILE(golden(), "layers_lowp_golden.json", "gen_layers_lowp_golden.py")
  cuda::set_allow_tf32(false, false);
  check_golden_on(Device(kCUDA));
}

TEST(LayersLowp, UnsupportedDtypesAreTypedErrors) {
  const Tensor b = random_tensor({2, 3, 4, 4}).to(kBFloat16), h = random_tensor({2, 3, 4, 4}).to(kFloat16);
  // Ops without a 16-bit form name themselves and the dtype.
  EXPECT_ERROR(TypeError, F::instance_norm(b), "instance_norm", "bfloat16");
  // interpolate has no 16-bit kernel: it takes the float path of layers/lowp.h and keeps the input's dtype.
  EXPECT_EQ(F::interpolate(h, F::InterpolateFuncOptions().size(std::vector<std::int64_t>{8, 8})).dtype(), kFloat16);
  // Integer inputs to the 16-bit-capable ops.
  const Tensor i = randint(0, 3, {2, 3, 4, 4}, TensorOptions(kInt64));
  EXPECT_ERROR(TypeError, F::max_pool2d(i, 2), "max_pool2d", "int64");
  EXPECT_ERROR(TypeError, F::conv2d(i, randint(0, 3, {2, 3, 3, 3}, TensorOptions(kInt64))), "conv2d", "int64");
  // Parameters: float32 beside 16-bit activations is mixed precision; other mixes are refused by name.
  EXPECT_ERROR(TypeError, F::layer_norm(random_tensor({2, 4}).to(kFloat32), {4}, ones({4}, TensorOptions(kBFloat16))),
               "layer_norm", "weight", "bfloat16");
  EXPECT_ERROR(TypeError, F::batch_norm(b, Tensor(), Tensor(), ones({3}, TensorOptions(kFloat64)), Tensor(), true),
               "batch_norm", "weight", "float64");
  EXPECT_ERROR(TypeError, F::group_norm(h, 3, ones({3}, TensorOptions(kBFloat16))), "group_norm", "weight", "bfloat16");
  // A 16-bit conv weight beside a float32 input (no silent promotion).
  EXPECT_ERROR(TypeError, F::conv2d(b.to(kFloat32), random_tensor({2, 3, 3, 3}).to(kBFloat16)), "conv2d", "bfloat16");
}

}  // namespace
}  // namespace minidl
