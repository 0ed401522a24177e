// The fast paths of the GPU's memory-bound kernels (src/cuda/elementwise.cu, dropout.cu, reduce.cu). Elementwise ops
// and dropout move 16-byte packs when every pointer is 16-byte aligned and go element by element otherwise, so each op
// runs on fresh (aligned) tensors and on views one element into their storage (misaligned), and must give the CPU's
// results for every element and bitwise the same values on both paths; sizes leave tails of 0 to 3 elements.
// Also: in-place ops writing through misaligned views (neighbouring elements untouched), dropout's masks against
// rand(), the cross-entropy kernels (sub-warps of 1 to 32 lanes per sample) against the CPU, their run-to-run
// determinism and NaN for an out-of-range target, and gpu::channel_sum against a double-precision sum.
// Every test skips visibly without a usable GPU.
#include "minidl/config.h"

#if MINIDL_CUDA_ENABLED

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/activation.h"
#include "cuda/reduce.h"
#include "kernels/backend.h"
#include "minidl/nn/functional.h"
#include "test_util.h"

namespace minidl {
namespace {

namespace F = nn::functional;
using minidl::testing::expect_close;
using minidl::testing::storage_view;

const Device kGpu("cuda");
const std::vector<std::int64_t> kSizes = {1, 3, 4, 5, 6, 7, 8, 1027, 262147};

double rtol_of(DType dt) { return dt == kFloat32 ? 1e-5 : 1e-12; }
double atol_of(DType dt) { return dt == kFloat32 ? 1e-6 : 1e-13; }

std::uintptr_t address(const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()); }

/// A GPU buffer of n + 2 elements holding `sentinel`, `values`, `sentinel`, and the view of the values: one
/// element past the buffer's (16-byte aligned) start, so kernels on the view take the element-by-element path.
struct Misaligned {
  Tensor buffer, view;
};
Misaligned misaligned(const Tensor& values, double sentinel = 1234.5) {
  const std::int64_t n = values.numel();
  Misaligned m;
  m.buffer = full({n + 2}, sentinel, TensorOptions(values.dtype()).device(kGpu));
  m.view = storage_view(m.buffer, 1, {n});
  m.view.copy_(values.detach().reshape({n}));
  EXPECT_EQ(address(m.buffer) % 16, 0u) << "a fresh allocation is 16-byte aligned";
  EXPECT_NE(address(m.view) % 16, 0u);
  return m;
}

/// Expects the buffer's first and last elements (around the view) to still hold the sentinel.
void expect_sentinels(const Misaligned& m, double sentinel, const std::string& what) {
  const std::vector<double> b = m.buffer.cpu().to(kFloat64).to_vector<double>();
  EXPECT_EQ(b.front(), sentinel) << what << ": the element before the view was written";
  EXPECT_EQ(b.back(), sentinel) << what << ": the element after the view was written";
}

/// Expects a and b to hold bitwise the same values (the packed and the element-by-element path).
void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const Tensor ca = a.detach().cpu(), cb = b.detach().cpu();
  const std::size_t bytes = element_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(ca.data_ptr());
  const auto* pb = static_cast<const unsigned char*>(cb.data_ptr());
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i * bytes, pb + i * bytes, bytes) != 0) {
      ADD_FAILURE() << what << ": element " << i << " differs between the packed and the element-by-element path";
      return;
    }
  }
}

struct MapCase {
  std::string name;
  int inputs;
  double lo;  // inputs are uniform in [lo, 2)
  std::function<Tensor(const std::vector<Tensor>&)> fn;
};

std::vector<MapCase> map_cases() {
  using V = std::vector<Tensor>;
  return {
      {"neg", 1, -2.0, [](const V& in) { return neg(in[0]); }},
      {"exp", 1, -2.0, [](const V& in) { return exp(in[0]); }},
      {"log", 1, 0.25, [](const V& in) { return log(in[0]); }},
      {"sqrt", 1, 0.25, [](const V& in) { return sqrt(in[0]); }},
      {"abs", 1, -2.0, [](const V& in) { return abs(in[0]); }},
      {"relu", 1, -2.0, [](const V& in) { return relu(in[0]); }},
      {"leaky_relu", 1, -2.0, [](const V& in) { return leaky_relu(in[0], 0.2); }},
      {"gelu", 1, -2.0, [](const V& in) { return gelu(in[0]); }},
      {"sigmoid", 1, -2.0, [](const V& in) { return sigmoid(in[0]); }},
      {"tanh", 1, -2.0, [](const V& in) { return tanh(in[0]); }},
      {"add_scalar", 1, -2.0, [](const V& in) { return add(in[0], 0.375); }},
      {"mul_scalar", 1, -2.0, [](const V& in) { return mul(in[0], -1.5); }},
      {"pow_scalar", 1, 0.25, [](const V& in) { return pow(in[0], 1.7); }},
      {"add", 2, -2.0, [](const V& in) { return add(in[0], in[1], 0.5); }},
      {"sub", 2, -2.0, [](const V& in) { return sub(in[0], in[1]); }},
      {"mul", 2, -2.0, [](const V& in) { return mul(in[0], in[1]); }},
      {"div", 2, 0.25, [](const V& in) { return div(in[0], in[1]); }},
      {"maximum", 2, -2.0, [](const V& in) { return maximum(in[0], in[1]); }},
      {"pow", 2, 0.25, [](const V& in) { return pow(in[0], in[1]); }},
  };
}

TEST(GpuElementwiseFast, OpsOnAlignedAndMisalignedInputs) {
  MINIDL_REQUIRE_GPU();
  for (const DType dt : {kFloat32, kFloat64}) {
    for (const std::int64_t n : kSizes) {
      for (const MapCase& c : map_cases()) {
        const std::string what = c.name + " " + dtype_name(dt) + " n=" + std::to_string(n);
        std::vector<Tensor> cpu_in, aligned_in, misaligned_in, mixed_in;
        for (int k = 0; k < c.inputs; ++k) {
          cpu_in.push_back(uniform({n}, c.lo, 2.0, TensorOptions(dt)));
          aligned_in.push_back(cpu_in.back().to(kGpu));
          misaligned_in.push_back(misaligned(cpu_in.back()).view);  // the view keeps the buffer's storage
          mixed_in.push_back(k == 0 ? aligned_in.back() : misaligned_in.back());  // binary: one of each
        }
        const Tensor expected = c.fn(cpu_in);
        const Tensor fast = c.fn(aligned_in), slow = c.fn(misaligned_in);
        expect_close(fast, expected, rtol_of(dt), atol_of(dt), what + " (packed path)");
        expect_close(slow, expected, rtol_of(dt), atol_of(dt), what + " (element path)");
        expect_same_bits(fast, slow, what);
        if (c.inputs == 2) expect_same_bits(fast, c.fn(mixed_in), what + ", one input misaligned");
      }
    }
  }
}

// The backward of relu is the binary ReluGradOp kernel (the 9.4 M-element kernel of the example's step).
TEST(GpuElementwiseFast, ReluBackwardOnBothPaths) {
  MINIDL_REQUIRE_GPU();
  for (const DType dt : {kFloat32, kFloat64}) {
    for (const std::int64_t n : kSizes) {
      const std::string what = std::string("relu backward ") + dtype_name(dt) + " n=" + std::to_string(n);
      const Tensor x = uniform({n}, -1.0, 1.0, TensorOptions(dt)), g = uniform({n}, -1.0, 1.0, TensorOptions(dt));
      const Tensor xc = x.clone().requires_grad_(true);
      relu(xc).backward(g);
      Tensor xa = x.to(kGpu);
      xa.requires_grad_(true);
      relu(xa).backward(g.to(kGpu));
      Misaligned xm = misaligned(x), gm = misaligned(g);
      xm.view.requires_grad_(true);
      relu(xm.view).backward(gm.view);
      expect_close(xa.grad(), xc.grad(), 0.0, 0.0, what);
      expect_close(xm.view.grad(), xc.grad(), 0.0, 0.0, what + " (element path)");
    }
  }
}

TEST(GpuElementwiseFast, InPlaceThroughMisalignedViews) {
  MINIDL_REQUIRE_GPU();
  const double sentinel = 1234.5;
  for (const DType dt : {kFloat32, kFloat64}) {
    for (const std::int64_t n : kSizes) {
      const std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      const Tensor x = uniform({n}, -1.0, 1.0, TensorOptions(dt)), y = uniform({n}, -1.0, 1.0, TensorOptions(dt));
      for (const bool offset : {false, true}) {
        const std::string path = what + (offset ? " (element path)" : " (packed path)");
        Misaligned m = misaligned(x, sentinel);
        Tensor t = offset ? m.view : x.to(kGpu);
        Tensor expected = x.clone();
        relu_(t);
        relu_(expected);
        expect_close(t, expected, 0.0, 0.0, "relu_ " + path);
        t.add_(y.to(kGpu), -0.5);  // a fused multiply-add on either side or not: compared with tolerances
        expected.add_(y, -0.5);
        expect_close(t, expected, rtol_of(dt), atol_of(dt), "add_ " + path);
        t.mul_(3.0);
        expected.mul_(3.0);
        expect_close(t, expected, rtol_of(dt), atol_of(dt), "mul_ " + path);
        t.add_(0.25);
        expected.add_(0.25);
        expect_close(t, expected, rtol_of(dt), atol_of(dt), "add_(scalar) " + path);
        t.fill_(-0.625);
        expect_close(t, full({n}, -0.625, TensorOptions(dt)), 0.0, 0.0, "fill_ " + path);
        if (offset) expect_sentinels(m, sentinel, path);
      }
    }
  }
}

// Step counters: the one integer elementwise kernel (int64 add of a scalar), and int64 fill.
TEST(GpuElementwiseFast, Int64AddScalarAndFill) {
  MINIDL_REQUIRE_GPU();
  for (const std::int64_t n : kSizes) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = 7 * i - 3;
    const Tensor x = from_vector(v, {n});
    for (const bool offset : {false, true}) {
      const std::string what = std::string("int64 n=") + std::to_string(n) + (offset ? " (element path)" : "");
      Misaligned m = misaligned(x, -99.0);
      Tensor t = offset ? m.view : x.to(kGpu);
      t.add_(5);  // an integral scalar: a float one cannot be added into an int64 tensor in place
      std::vector<std::int64_t> got = t.cpu().to_vector<std::int64_t>();
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], 7 * i + 2) << what << " element " << i;
      t.fill_(41.0);
      got = t.cpu().to_vector<std::int64_t>();
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], 41) << what << " element " << i;
      if (offset) expect_sentinels(m, -99.0, what);
    }
  }
}

// The epilogue of cuDNN's convolutions, called on raw device pointers.
TEST(GpuElementwiseFast, ActivateInPlace) {
  MINIDL_REQUIRE_GPU();
  for (const std::int64_t n : kSizes) {
    const Tensor x = uniform({n}, -1.0, 1.0, TensorOptions(kFloat32));
    const Tensor expected = relu(x);
    for (const bool offset : {false, true}) {
      const std::string what = std::string("activate_in_place n=") + std::to_string(n) + (offset ? " (element path)" : "");
      Misaligned m = misaligned(x);
      Tensor t = offset ? m.view : x.to(kGpu);
      gpu::activate_in_place(kernels::Activation::Relu, t.data_ptr<float>(), n);
      expect_close(t, expected, 0.0, 0.0, what);
      if (offset) expect_sentinels(m, 1234.5, what);
    }
    Tensor t = x.to(kGpu);
    gpu::activate_in_place(kernels::Activation::None, t.data_ptr<float>(), n);
    expect_close(t, x, 0.0, 0.0, "Activation::None leaves the values");
  }
}

// ---- random numbers and dropout -------------------------------------------------------------------------------------

TEST(GpuElementwiseFast, DropoutSameMasksOnBothPaths) {
  MINIDL_REQUIRE_GPU();
  const double p = 0.3;
  for (const DType dt : {kFloat32, kFloat64}) {
    for (const std::int64_t n : kSizes) {
      const std::string what = std::string("dropout ") + dtype_name(dt) + " n=" + std::to_string(n);
      const Tensor x = uniform({n}, 0.5, 1.5, TensorOptions(dt));
      const TensorOptions on_gpu = TensorOptions(dt).device(kGpu);
      Tensor out = empty({n}, on_gpu), mask = empty({n}, on_gpu);
      manual_seed(77);
      gpu::dropout(x.to(kGpu), p, out, mask);
      // Every pointer misaligned, then only x (out and mask fresh): the element-by-element path both times.
      Misaligned xm = misaligned(x), om = misaligned(x), mm = misaligned(x);
      manual_seed(77);
      gpu::dropout(xm.view, p, om.view, mm.view);
      expect_same_bits(out, om.view, what + " output");
      expect_same_bits(mask, mm.view, what + " mask");
      expect_sentinels(om, 1234.5, what + " output");
      expect_sentinels(mm, 1234.5, what + " mask");
      Tensor out2 = empty({n}, on_gpu), mask2 = empty({n}, on_gpu);
      manual_seed(77);
      gpu::dropout(xm.view, p, out2, mask2);
      expect_same_bits(out, out2, what + " output, x misaligned");
      expect_same_bits(mask, mask2, what + " mask, x misaligned");
      // The rule: element i is kept (mask 1/(1-p), output x * mask) exactly when rand()'s draw i is at least p.
      manual_seed(77);
      const std::vector<double> u = rand({n}, on_gpu).cpu().to(kFloat64).to_vector<double>();
      const std::vector<double> xv = x.to(kFloat64).to_vector<double>();
      const std::vector<double> mv = mask.cpu().to(kFloat64).to_vector<double>();
      const std::vector<double> ov = out.cpu().to(kFloat64).to_vector<double>();
      const double keep = dt == kFloat32 ? static_cast<double>(1.0f / (1.0f - static_cast<float>(p))) : 1.0 / (1.0 - p);
      const double threshold = dt == kFloat32 ? static_cast<double>(static_cast<float>(p)) : p;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::size_t s = static_cast<std::size_t>(i);
        ASSERT_EQ(mv[s], u[s] >= threshold ? keep : 0.0) << what << " element " << i;
        const double product = dt == kFloat32 ? static_cast<double>(static_cast<float>(xv[s]) * static_cast<float>(mv[s]))
                                              : xv[s] * mv[s];
        ASSERT_EQ(ov[s], product) << what << " element " << i;
      }
    }
  }
}

TEST(GpuElementwiseFast, RandomDrawsIndependentOfAlignment) {
  MINIDL_REQUIRE_GPU();
  for (const DType dt : {kFloat32, kFloat64}) {
    for (const std::int64_t n : kSizes) {
      const std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      const Tensor zeros_cpu = zeros({n}, TensorOptions(dt));
      for (const bool normal : {false, true}) {
        const auto draw = [normal](Tensor& t) { normal ? gpu::normal(t, 0.5, 2.0) : gpu::uniform(t, -3.0, 0.5); };
        Tensor a = empty({n}, TensorOptions(dt).device(kGpu));
        Misaligned m = misaligned(zeros_cpu);
        manual_seed(5);
        draw(a);
        manual_seed(5);
        draw(m.view);
        expect_same_bits(a, m.view, (normal ? "normal " : "uniform ") + what);
        expect_sentinels(m, 1234.5, what);
        if (!normal) {
          for (const double v : a.cpu().to(kFloat64).to_vector<double>()) {
            ASSERT_TRUE(v >= -3.0 && v < 0.5) << what << ": uniform value " << v << " outside [-3, 0.5)";
          }
        }
      }
      Tensor u = empty({n}, TensorOptions(dt).device(kGpu));
      gpu::uniform(u, 0.0, 1.0);  // the unit interval: dropout's draws
      for (const double v : u.cpu().to(kFloat64).to_vector<double>()) {
        ASSERT_TRUE(v >= 0.0 && v < 1.0) << what << ": unit uniform value " << v << " outside [0, 1)";
      }
    }
  }
}

// ---- cross-entropy --------------------------------------------------------------------------------------------------

struct CeShape {
  std::int64_t n, c;
};

TEST(GpuElementwiseFast, CrossEntropyMatchesCpu) {
  MINIDL_REQUIRE_GPU();
  // Class counts giving sub-warps of 1, 2, 4 (the example's 10), 8, 16 and 32 lanes, rows longer than a warp,
  // batches ending inside a warp, and the reduced loss's one block (n <= 4096) next to the per-sample path.
  const std::vector<CeShape> shapes = {{1, 1},   {7, 2},    {3, 3},    {256, 10},  {255, 10}, {64, 17},
                                       {33, 40}, {4096, 10}, {4097, 10}, {100, 127}, {9, 129},  {256, 1000},
                                       {5000, 40}};
  using R = nn::Reduction;
  for (const DType dt : {kFloat32, kFloat64}) {
    const double rtol = dt == kFloat32 ? 1e-4 : 1e-10, atol = dt == kFloat32 ? 1e-5 : 1e-10;
    for (const CeShape& s : shapes) {
      const Tensor logits = uniform({s.n, s.c}, -4.0, 4.0, TensorOptions(dt));
      const Tensor target = (rand({s.n}, TensorOptions(kFloat64)) * static_cast<double>(s.c)).to(kInt64);
      const Tensor lg = logits.to(kGpu), tg = target.to(kGpu);
      for (const double eps : {0.0, 0.1}) {
        for (const R r : {R::None, R::Sum, R::Mean}) {
          const std::string what = std::string("cross_entropy ") + dtype_name(dt) + " " + std::to_string(s.n) + "x" +
                                   std::to_string(s.c) + " eps=" + std::to_string(eps) + " reduction " +
                                   std::to_string(static_cast<int>(r));
          const Tensor expected = F::cross_entropy(logits, target, r, eps);
          const Tensor got = F::cross_entropy(lg, tg, r, eps);
          expect_close(got, expected, rtol, atol, what);
          expect_same_bits(got, F::cross_entropy(lg, tg, r, eps), what + ": a second run");
        }
      }
      const std::string what = std::string("nll_loss ") + dtype_name(dt) + " " + std::to_string(s.n) + "x" +
                               std::to_string(s.c);
      expect_close(F::nll_loss(lg, tg, R::None), F::nll_loss(logits, target, R::None), rtol, atol, what);
      expect_close(F::nll_loss(lg, tg, R::Sum), F::nll_loss(logits, target, R::Sum), rtol, atol, what + " sum");
    }
  }
}

TEST(GpuElementwiseFast, CrossEntropyOutOfRangeTargetIsNan) {
  MINIDL_REQUIRE_GPU();
  using R = nn::Reduction;
  for (const std::int64_t n : {7, 5000}) {
    for (const std::int64_t bad : {-1, 10}) {
      std::vector<std::int64_t> t(static_cast<std::size_t>(n), 3);
      t[static_cast<std::size_t>(n / 2)] = bad;
      const Tensor logits = uniform({n, 10}, -4.0, 4.0, TensorOptions(kGpu));
      const Tensor target = from_vector(t, {n}).to(kGpu);
      const std::string what = "n=" + std::to_string(n) + ", target " + std::to_string(bad);
      const std::vector<float> losses = F::cross_entropy(logits, target, R::None).cpu().to_vector<float>();
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::isnan(losses[static_cast<std::size_t>(i)]), i == n / 2) << what << " sample " << i;
      }
      EXPECT_TRUE(std::isnan(F::cross_entropy(logits, target, R::Mean).item<float>())) << what;
      EXPECT_TRUE(std::isnan(F::cross_entropy(logits, target, R::Sum).item<float>())) << what;
    }
  }
}

// ---- channel_sum ----------------------------------------------------------------------------------------------------

template <class T>
void check_channel_sum(std::int64_t n, std::int64_t k, std::int64_t pq) {
  const std::string what = std::string("channel_sum<") + dtype_name(dtype_of<T>::value) + "> n=" + std::to_string(n) +
                           " k=" + std::to_string(k) + " pq=" + std::to_string(pq);
  const Tensor dy = uniform({n * k * pq}, -1.0, 1.0, TensorOptions(dtype_of<T>::value));
  const std::vector<T> v = dy.to_vector<T>();
  std::vector<double> sum(static_cast<std::size_t>(k), 0.0), mag(static_cast<std::size_t>(k), 0.0);
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t c = 0; c < k; ++c) {
      for (std::int64_t q = 0; q < pq; ++q) {
        const double x = static_cast<double>(v[static_cast<std::size_t>((b * k + c) * pq + q)]);
        sum[static_cast<std::size_t>(c)] += x;
        mag[static_cast<std::size_t>(c)] += std::fabs(x);
      }
    }
  }
  const Tensor dg = dy.to(kGpu);
  Tensor out = full({k}, NAN, TensorOptions(dtype_of<T>::value).device(kGpu));
  Tensor again = full({k}, NAN, TensorOptions(dtype_of<T>::value).device(kGpu));
  gpu::channel_sum(dg.data_ptr<T>(), n, k, pq, out.data_ptr<T>());
  gpu::channel_sum(dg.data_ptr<T>(), n, k, pq, again.data_ptr<T>());
  const std::vector<T> got = out.cpu().to_vector<T>();
  const double rel = std::is_same<T, float>::value ? 1e-5 : 1e-13;
  for (std::int64_t c = 0; c < k; ++c) {
    const std::size_t s = static_cast<std::size_t>(c);
    ASSERT_NEAR(static_cast<double>(got[s]), sum[s], rel * (mag[s] + 1.0)) << what << " channel " << c;
  }
  expect_same_bits(out, again, what + ": a second run");
}

TEST(GpuElementwiseFast, ChannelSum) {
  MINIDL_REQUIRE_GPU();
  // One element, no spatial extent, one sample, the example's conv shapes, rows longer than the row chunk
  // (65536) and more samples than the column chunk (1024), and empty sums.
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 1, 1},   {1, 5, 1},      {3, 4, 1},    {1, 3, 49},
                                                         {2, 3, 7},   {256, 32, 196}, {64, 64, 49}, {2, 3, 70001},
                                                         {1500, 3, 2}, {0, 3, 5},     {4, 3, 0}};
  for (const auto& s : shapes) {
    check_channel_sum<float>(s[0], s[1], s[2]);
    check_channel_sum<double>(s[0], s[1], s[2]);
  }
}

}  // namespace
}  // namespace minidl

#endif  // MINIDL_CUDA_ENABLED
