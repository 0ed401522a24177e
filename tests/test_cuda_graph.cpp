// Whole-step CUDA-graph capture: the replayed step computes what the eager step computes, draws fresh
// random numbers at every replay, and allocates nothing in steady state.
#include "file_helpers.h"
#include "test_util.h"

using namespace minidl;
using minidl::testing::expect_close;
namespace F = minidl::nn::functional;

namespace {

struct SmallNet : nn::Module {
  SmallNet() : Module("SmallNet"), conv(nn::Conv2dOptions(1, 4, 3)), fc(4 * 3 * 3, 5) {
    register_module("conv", conv.ptr());
    register_module("fc", fc.ptr());
  }
  Tensor forward(const Tensor& x) override { return fc(F::max_pool2d(F::relu(conv(x)), 2).flatten(1)); }
  nn::Conv2d conv;
  nn::Linear fc;
};

/// Trains `steps` SGD-momentum steps on fixed random batches, eagerly or by replaying one captured step.
std::vector<std::vector<float>> train(bool graph, int steps) {
  manual_seed(3);
  SmallNet net;
  net.to(Device("cuda"));
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.05).momentum(0.9));
  manual_seed(4);
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < steps; ++i) {
    xs.push_back(randn({3, 1, 8, 8}).cuda());
    ys.push_back(arange(3, kInt64).cuda());
  }
  auto step = [&](const Tensor& x, const Tensor& y) {
    F::cross_entropy(net.forward(x), y).backward();
    opt.step();
  };
  Tensor sx = xs[0].clone(), sy = ys[0].clone();
  cuda::CUDAGraph g;
  for (int i = 0; i < steps; ++i) {
    if (!graph || i < 2) {
      opt.zero_grad();
      step(xs[i], ys[i]);
      continue;
    }
    sx.copy_(xs[i]);
    sy.copy_(ys[i]);
    if (!g.captured()) {
      opt.zero_grad();
      g.capture_begin();
      step(sx, sy);
      g.capture_end();
    }
    g.replay();
  }
  std::vector<std::vector<float>> out;
  for (const Tensor& p : net.parameters()) out.push_back(p.cpu().to_vector<float>());
  return out;
}

}  // namespace

TEST(CudaGraph, CapturedStepMatchesEagerStep) {
  MINIDL_REQUIRE_GPU();
  set_deterministic(true);
  cuda::set_allow_tf32(false, false);
  const auto eager = train(false, 20), captured = train(true, 20);
  set_deterministic(false);
  ASSERT_EQ(eager.size(), captured.size());
  for (std::size_t p = 0; p < eager.size(); ++p) {
    ASSERT_EQ(eager[p].size(), captured[p].size());
    for (std::size_t i = 0; i < eager[p].size(); ++i) {
      EXPECT_EQ(eager[p][i], captured[p][i]) << "parameter " << p << " element " << i;
    }
  }
}

TEST(CudaGraph, DeterministicRunsAreBitwiseIdentical) {
  MINIDL_REQUIRE_GPU();
  set_deterministic(true);
  const auto first = train(false, 10), second = train(false, 10);
  set_deterministic(false);
  EXPECT_EQ(first, second);
}

TEST(CudaGraph, ReplaysDrawFreshDropoutMasks) {
  MINIDL_REQUIRE_GPU();
  Tensor x = ones({4096}, Device("cuda")), y;
  cuda::CUDAGraph g;
  g.capture_begin();
  y = F::dropout(x, 0.5, true);
  g.capture_end();
  g.replay();
  const auto first = y.cpu().to_vector<float>();
  g.replay();
  const auto second = y.cpu().to_vector<float>();
  int kept = 0, differ = 0;
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_TRUE(first[i] == 0.f || first[i] == 2.f) << first[i];
    kept += first[i] != 0.f;
    differ += first[i] != second[i];
  }
  EXPECT_NEAR(kept, 2048, 5 * 32);  // 5 sigma of Binomial(4096, 0.5)
  EXPECT_GT(differ, 1500);          // independent masks differ in about half the places
}

// The tensor ops a model's step uses (joining, indexing, where, reductions, scans, sorting) capture: replayed on
// fresh inputs copied into the captured ones, each gives what the eager op gives on those inputs.
TEST(CudaGraph, TensorOpsOfAModelStepCaptureAndReplay) {
  MINIDL_REQUIRE_GPU();
  using namespace minidl::indexing;
  const Device gpu("cuda");
  Tensor x = randn({37, 300}, gpu), y = randn({37, 300}, gpu);
  const Tensor rows = randint(0, 37, {50}, TensorOptions(kInt64).device(gpu));
  const Tensor cols = randint(0, 300, {37, 300}, TensorOptions(kInt64).device(gpu));
  const auto ops = [&] {
    return std::vector<Tensor>{cat({x, y}, 1),
                               x.index({rows}),
                               x.index({Slice(1, None, 3), Slice(None, None, 2)}),
                               gather(x, 1, cols),
                               zeros_like(x).scatter_add_(1, cols, y),
                               where(x > 0, x, y),
                               x.masked_fill(y < 0, 2.5),
                               x.sum(1),
                               x.sum(0),
                               x.cumsum(1),
                               std::get<0>(x.topk(7)),
                               std::get<1>(x.topk(7)),
                               std::get<0>(x.sort(1, true)),
                               x.argsort(0)};
  };
  ops();  // warm-up outside the capture
  std::vector<Tensor> captured;
  cuda::CUDAGraph g;
  g.capture_begin();
  captured = ops();
  g.capture_end();
  for (int replay = 0; replay < 3; ++replay) {
    {
      NoGradGuard no_grad;
      x.copy_(randn({37, 300}, gpu));
      y.copy_(randn({37, 300}, gpu));
    }
    g.replay();
    const std::vector<Tensor> eager = ops();
    ASSERT_EQ(eager.size(), captured.size());
    for (std::size_t i = 0; i < eager.size(); ++i) {
      // scatter_add_ (op 4) adds with atomics, in an order that can differ between any two runs.
      const bool exact = i != 4;
      EXPECT_TRUE(exact ? equal(captured[i].cpu(), eager[i].cpu())
                        : allclose(captured[i].cpu(), eager[i].cpu(), 1e-5, 1e-6))
          << "op " << i << " replay " << replay;
    }
  }
}

TEST(CudaGraph, SteadyStateReplaysAllocateNothing) {
  MINIDL_REQUIRE_GPU();
  MINIDL_REQUIRE_CACHING_ALLOCATOR();
  SmallNet net;
  net.to(Device("cuda"));
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x = randn({2, 1, 8, 8}).cuda(), y = zeros({2}, kInt64).cuda();
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    F::cross_entropy(net.forward(x), y).backward();
    opt.step();
  }
  opt.zero_grad();
  cuda::CUDAGraph g;
  g.capture_begin();
  F::cross_entropy(net.forward(x), y).backward();
  opt.step();
  g.capture_end();
  EXPECT_GT(g.num_nodes(), 5u);
  g.replay();
  cuda::synchronize();
  const auto before = cuda::memory_stats(0);
  for (int i = 0; i < 50; ++i) g.replay();
  cuda::synchronize();
  const auto after = cuda::memory_stats(0);
  EXPECT_EQ(after.num_device_allocs, before.num_device_allocs);
  EXPECT_EQ(after.allocated, before.allocated);
}

TEST(CudaGraph, DebugDumpWritesTheNodesAndTheirOrder) {
  MINIDL_REQUIRE_GPU();
  const Tensor a = randn({1000}).cuda();
  cuda::CUDAGraph g;
  EXPECT_THROW(g.debug_dump("unused.dot"), ValueError);
  g.capture_begin();
  Tensor b = (a * 2.0).relu();
  Tensor c = b.clone();
  g.capture_end();
  test_files::TempDir dir;
  g.debug_dump(dir.file("step.dot"));
  const test_files::Bytes bytes = test_files::slurp(dir.file("step.dot"));
  const std::string dot(bytes.begin(), bytes.end());
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << dot.substr(0, 200);
  EXPECT_NE(dot.find("->"), std::string::npos) << "no dependency edges";
  // One entry per captured node: the multiply, the ReLU and the copy.
  std::size_t kernels = 0;
  for (std::size_t at = dot.find("KERNEL"); at != std::string::npos; at = dot.find("KERNEL", at + 1)) ++kernels;
  EXPECT_GE(kernels, 2u);
  try {
    g.debug_dump(dir.file("missing/dir/step.dot"));
    ADD_FAILURE() << "expected IOError for a path in a missing directory";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

TEST(CudaGraph, MisuseIsAClearError) {
  cuda::CUDAGraph g;
  EXPECT_THROW(g.replay(), Error);
  if (!cuda::is_available()) GTEST_SKIP() << "no usable CUDA device; the capture part needs one";
  EXPECT_THROW(g.capture_end(), ValueError);
}
