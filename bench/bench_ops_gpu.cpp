// Google Benchmark microbenchmarks of the GPU kernels the example CNN's training step runs, each pass alone, at
// batch 64 and 256 (shapes in op_cases.h): the convolutions (cuDNN) and linear GEMMs (cuBLAS) forward,
// backward-input and backward-weight with TF32 off and on, and the memory-bound 2x2 max-pool and ReLUs
// (own kernels). conv1's input gradient is left out: the training step never computes it (the image needs none).
// tensor_ops/<op>/<shape>: the memory-bound tensor ops of a model's hot path (cat, indexing, gather, scatter_add,
// where, masked_fill, reductions, cumsum, topk, GPT's LayerNorm forward and forward+backward) through the public
// API on large float32 tensors, against tensor_ops/copy (bench/compare_tensor_ops.py times PyTorch's same calls
// beside them).
// attention/fwd_bwd: scaled_dot_product_attention forward and backward at B=16, 12 heads, T=1024, head dim 64,
// causal, float32, through the flash-attention kernels (fused:1) and the composed reference path (fused:0).
// lstm/fwd_bwd: nn::LSTM (2 layers, 512 hidden, input 512) forward and backward at T=128, batch 64, float32,
// through cuDNN (cudnn:1) and minidl's own recurrence kernels (cudnn:0).
// gemm/<M>x<K>x<N>: nn::functional::linear's forward GEMM (x M x K times the N x K weight transposed, the bias in
// cuBLASLt's epilogue when bias:1) in float32 (TF32 off and on), bfloat16 and float16, float32 accumulation: a
// square 4096 product and GPT-2's MLP (16384 tokens, 768 -> 3072 and back); TFLOP/s in the FLOPS counter.
// bench/compare_layers.py times PyTorch's same layers beside these.
//
// Timing: the first call of a pass runs eagerly (cuDNN's algorithm search and workspace allocation happen
// there), then kCallsPerSample calls are captured into one CUDA graph, as the training step runs them. Every
// benchmark iteration replays that graph between two CUDA events and reports the mean time per call (manual
// time); another replay queued just before keeps the GPU busy, so the events bracket device time rather than
// the host's launch. With --launch=eager the calls are launched directly instead, and the time includes
// whatever launch overhead the GPU waits for.
//
// Counters per call: FLOPS and bytes (rates over the device time; bytes are the least traffic, every operand
// read or written once, so repeated calls whose operands stay in the 50 MB L2 can exceed the HBM rate), floor%
// (the floor time over the measured time) and kernels (graph nodes per call). The floor of a pass is the larger
// of its FLOPs at the arithmetic peak and its bytes at the HBM bandwidth; the peaks are the H200's: fp32 67
// TFLOP/s (TF32 off), TF32 tensor cores 495 TFLOP/s dense (TF32 on), HBM 4.3 TB/s (measured; 4.8 nominal).
// The label names the floor and what sets it. "tf32:1" allows TF32 in both cuDNN and cuBLAS
// (cuda::set_allow_tf32(true, true)); PyTorch's default is convolutions only.
//
//   build/bench/bench_ops_gpu [--launch=graph|eager] [--benchmark_filter=conv2] [--benchmark_format=json]
//
// Without a usable GPU it prints why and exits with status 0.
#include <benchmark/benchmark.h>
#include <minidl/minidl.h>
#include <minidl/run_main.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/conv2d_staged.h"
#include "kernels/backend.h"
#include "op_cases.h"

namespace {

using minidl::bench::Cost;
using minidl::bench::Pass;
namespace gpu = minidl::gpu;
using minidl::Shape;

const minidl::bench::Backend kGpu{&gpu::conv2d_forward<float>,       &gpu::conv2d_backward_input<float>,
                                  &gpu::conv2d_backward_weight<float>, &gpu::matmul,
                                  &gpu::max_pool2d_forward<float>,    &gpu::max_pool2d_backward<float>};

/// A limit of the H200 that a pass's floor time is computed against.
struct Peak {
  double per_second;  // FLOP/s or bytes/s
  const char* name;
};
constexpr Peak kFp32{67e12, "fp32 67 TFLOP/s"}, kTf32{495e12, "TF32 495 TFLOP/s"}, kHbm{4.3e12, "HBM 4.3 TB/s"};
constexpr Peak kBf16{989e12, "bf16/fp16 989 TFLOP/s"};
constexpr int kCallsPerSample = 20;  // between two events: their resolution (0.5 us) is small against the sample
constexpr int kSamples = 100;        // benchmark iterations, fixed: each is kCallsPerSample calls

enum class Launch { Graph, Eager };
Launch g_launch = Launch::Graph;

const minidl::Device kDevice(minidl::kCUDA, 0);

class Event {
 public:
  Event() { MINIDL_CUDA_CHECK(cudaEventCreate(&event_)); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record() { MINIDL_CUDA_CHECK(cudaEventRecord(event_, gpu::stream())); }
  /// Seconds from `start` to this event, waiting for this one.
  double seconds_since(const Event& start) const {
    MINIDL_CUDA_CHECK(cudaEventSynchronize(event_));
    float ms = 0;
    MINIDL_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

/// Times `call` (one pass, queued on gpu::stream()) as described at the top, and sets the counters from its
/// cost; `arithmetic` is the peak of the math mode in use.
template <class Call>
void time_on_device(benchmark::State& state, const Cost& cost, const Peak& arithmetic, Call call) {
  call();
  minidl::cuda::CUDAGraph graph;
  if (g_launch == Launch::Graph) {
    graph.capture_begin();
    for (int i = 0; i < kCallsPerSample; ++i) call();
    graph.capture_end();
  }
  const auto sample = [&] {
    if (g_launch == Launch::Graph) {
      graph.replay();
    } else {
      for (int i = 0; i < kCallsPerSample; ++i) call();
    }
  };
  Event start, stop;
  double total = 0;
  for (auto _ : state) {
    sample();
    start.record();
    sample();
    stop.record();
    const double per_call = stop.seconds_since(start) / kCallsPerSample;
    state.SetIterationTime(per_call);
    total += per_call;
  }
  const double iterations = static_cast<double>(state.iterations());
  if (cost.flops > 0) {
    state.counters["FLOPS"] = benchmark::Counter(cost.flops * iterations, benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
  }
  state.counters["bytes"] =
      benchmark::Counter(cost.bytes * iterations, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  const double compute_floor = cost.flops / arithmetic.per_second, memory_floor = cost.bytes / kHbm.per_second;
  const double floor = std::max(compute_floor, memory_floor);
  state.counters["floor%"] = 100 * floor / (total / iterations);
  if (g_launch == Launch::Graph) {
    state.counters["kernels"] = static_cast<double>(graph.num_nodes()) / kCallsPerSample;
  }
  std::ostringstream label;
  label.precision(3);
  label << "floor " << floor * 1e6 << " us: " << (compute_floor >= memory_floor ? arithmetic.name : kHbm.name);
  state.SetLabel(label.str());
}

/// Runs `body`, turning a library error into a skipped benchmark with its message instead of ending the run.
template <class Body>
void guarded(benchmark::State& state, Body body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

/// state.range(0) is the batch, state.range(1) whether TF32 is allowed.
template <class Case, class Shape>
void BM_layer(benchmark::State& state, Shape (*shape)(std::int64_t), Pass pass) {
  guarded(state, [&] {
    const bool tf32 = state.range(1) != 0;
    minidl::cuda::set_allow_tf32(tf32, tf32);
    minidl::manual_seed(0);
    Case c(shape(state.range(0)), kDevice);
    time_on_device(state, c.cost(), tf32 ? kTf32 : kFp32, [&] { c.run(kGpu, pass); });
  });
}

void BM_max_pool(benchmark::State& state, Pass pass) {
  guarded(state, [&] {
    minidl::manual_seed(0);
    minidl::bench::MaxPoolCase c(minidl::bench::pool(state.range(0)), kDevice, kGpu);
    time_on_device(state, c.cost(), kFp32, [&] { c.run(kGpu, pass); });
  });
}

/// The ReLU after a convolution, on its output: forward y = max(x, 0), backward dx = dy where x > 0.
void BM_relu(benchmark::State& state, minidl::kernels::Conv2dParams (*conv)(std::int64_t), Pass pass) {
  guarded(state, [&] {
    const minidl::kernels::Conv2dParams p = conv(state.range(0));
    minidl::manual_seed(0);
    const minidl::Tensor x = minidl::randn({p.N, p.K, p.P, p.Q}, kDevice), dy = minidl::randn(x.sizes(), kDevice);
    minidl::Tensor out = minidl::empty_like(x);
    const double n = static_cast<double>(x.numel());
    const bool forward = pass == Pass::Forward;
    time_on_device(state, Cost{0, (forward ? 8 : 12) * n}, kFp32, [&] {
      if (forward) {
        gpu::unary(minidl::kernels::UnaryOp::Relu, 0.0, x, out);
      } else {
        gpu::binary(minidl::kernels::BinaryOp::ReluGrad, 0.0, dy, x, out);
      }
    });
  });
}

/// minidl's staged TF32 kernel for conv2, called directly at band choice state.range(1) (an index into
/// staged_band_choices(), which the search times one by one): what each choice costs, whichever the search keeps.
void BM_staged(benchmark::State& state, Pass pass) {
  guarded(state, [&] {
    const minidl::kernels::Conv2dParams p = minidl::bench::conv2(state.range(0));
    const gpu::ConvPass which = pass == Pass::Forward         ? gpu::ConvPass::kForward
                                : pass == Pass::BackwardInput ? gpu::ConvPass::kBackwardInput
                                                              : gpu::ConvPass::kBackwardWeight;
    const std::vector<int> choices = gpu::staged_band_choices(p, which);
    if (state.range(1) >= static_cast<std::int64_t>(choices.size())) {
      state.SkipWithError("no such band choice for this shape");
      return;
    }
    const int bands = choices[static_cast<std::size_t>(state.range(1))];
    minidl::manual_seed(0);
    const minidl::Tensor x = minidl::randn({p.N, p.C, p.H, p.W}, kDevice), w = minidl::randn({p.K, p.C, p.R, p.S}, kDevice);
    const minidl::Tensor b = minidl::randn({p.K}, kDevice), dy = minidl::randn({p.N, p.K, p.P, p.Q}, kDevice);
    minidl::Tensor y = minidl::empty_like(dy), dx = minidl::empty_like(x), dw = minidl::empty_like(w);
    const double flops = 2.0 * static_cast<double>(p.N * p.K * p.P * p.Q * p.C * p.R * p.S);
    const double bytes = 4.0 * static_cast<double>(x.numel() + w.numel() + dy.numel());
    time_on_device(state, Cost{flops, bytes}, kTf32, [&] {
      if (pass == Pass::Forward) {
        gpu::staged_conv2d_forward(p, x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                   y.data_ptr<float>(), minidl::kernels::Activation::Relu, bands);
      } else if (pass == Pass::BackwardInput) {
        gpu::staged_conv2d_backward_input(p, dy.data_ptr<float>(), w.data_ptr<float>(), dx.data_ptr<float>(), bands);
      } else {  // without the bias gradient, as the layer calls it
        gpu::staged_conv2d_backward_weight(p, x.data_ptr<float>(), dy.data_ptr<float>(), dw.data_ptr<float>(), nullptr,
                                           bands);
      }
    });
    state.counters["bands"] = bands;
  });
}

void compute_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "tf32"})->ArgsProduct({{64, 256}, {0, 1}});
  b->UseManualTime()->Iterations(kSamples)->Unit(benchmark::kMicrosecond);
}

void memory_args(benchmark::internal::Benchmark* b) {
  b->ArgName("batch")->Arg(64)->Arg(256);
  b->UseManualTime()->Iterations(kSamples)->Unit(benchmark::kMicrosecond);
}

/// Takes --launch=graph|eager out of argv (Google Benchmark rejects flags it does not know); false on a bad value.
bool parse_launch(int& argc, char** argv) {
  const char* prefix = "--launch=";
  int kept = 0;
  bool ok = true;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) {
      const std::string value = argv[i] + std::strlen(prefix);
      if (value == "graph" || value == "eager") {
        g_launch = value == "graph" ? Launch::Graph : Launch::Eager;
      } else {
        std::cerr << "bench_ops_gpu: --launch must be graph or eager, found '" << value << "'\n";
        ok = false;
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return ok;
}

/// A memory-bound tensor op of a model's hot path, through the public API, on a large tensor: its bytes are every
/// operand read once and the result written once. The cases' names (tensor_ops/<op>/<shape>) are what
/// bench/compare_tensor_ops.py builds PyTorch's same call from; tensor_ops/copy is the bandwidth they are
/// measured against.
struct TensorOpCase {
  const char* op;
  Shape shape;
};

void BM_tensor_op(benchmark::State& state, const TensorOpCase& c) {
  guarded(state, [&] {
    using minidl::Tensor;
    minidl::manual_seed(0);
    const Shape& s = c.shape;
    const double n = static_cast<double>(minidl::shape_numel(s));
    const auto randn = [&] { return minidl::randn(s, kDevice); };
    const auto indices = [&](const Shape& shape, std::int64_t high) {
      return minidl::randint(0, high, shape, minidl::TensorOptions(minidl::kInt64).device(kDevice));
    };
    const std::string op = c.op;
    std::function<void()> call;
    double bytes = 0;
    Tensor a = randn(), b, out, idx;
    if (op == "copy") {
      out = minidl::empty_like(a);
      call = [&] { out.copy_(a); };
      bytes = 8 * n;
    } else if (op == "cat_dim0" || op == "cat_dim1") {
      b = randn();
      const std::int64_t dim = op == "cat_dim0" ? 0 : 1;
      call = [&, dim] { out = minidl::cat({a, b}, dim); };
      bytes = 16 * n;
    } else if (op == "index_rows") {
      idx = indices({s[0]}, s[0]);
      call = [&] { out = a.index({idx}); };
      bytes = 8 * n + 8.0 * static_cast<double>(s[0]);
    } else if (op == "gather_last") {
      idx = indices(s, s.back());
      call = [&] { out = minidl::gather(a, -1, idx); };
      bytes = 16 * n;
    } else if (op == "scatter_add_last") {
      b = randn();
      idx = indices(s, s.back());
      call = [&] { a.scatter_add_(-1, idx, b); };
      bytes = 20 * n;
    } else if (op == "where") {
      const Tensor cond = randn() > 0;
      b = randn();
      call = [&, cond] { out = minidl::where(cond, a, b); };
      bytes = 13 * n;
    } else if (op == "masked_fill") {
      const Tensor mask = randn() > 0;
      call = [&, mask] { out = a.masked_fill(mask, 0.0); };
      bytes = 9 * n;
    } else if (op == "sum_last") {
      call = [&] { out = a.sum(-1); };
      bytes = 4 * n;
    } else if (op == "sum_middle") {
      call = [&] { out = a.sum(1); };
      bytes = 4 * n;
    } else if (op == "cumsum_last") {
      call = [&] { out = minidl::cumsum(a, -1); };
      bytes = 8 * n;
    } else if (op.rfind("topk", 0) == 0) {
      const std::int64_t k = std::stoll(op.substr(4));
      call = [&, k] { out = std::get<0>(minidl::topk(a, k, -1)); };
      bytes = 4 * n;
    } else if (op == "layer_norm" || op == "layer_norm_fwd_bwd") {
      // GPT's LayerNorm over the last dim, with weight and bias; the forward and backward reads x (and dy) and
      // writes y (and dx) once each: 8 and 20 bytes per element (the per-row statistics and parameters aside).
      const std::int64_t c = s.back();
      Tensor w = minidl::randn({c}, kDevice), bias = minidl::randn({c}, kDevice);
      if (op == "layer_norm") {
        call = [&, w, bias] { out = minidl::nn::functional::layer_norm(a, {c}, w, bias); };
        bytes = 8 * n;
      } else {
        b = randn();  // the upstream gradient
        for (Tensor* t : {&a, &w, &bias}) t->requires_grad_(true);
        call = [&, w, bias] {
          for (Tensor t : {a, w, bias}) t.mutable_grad() = Tensor();  // fresh gradients, not accumulated ones
          out = minidl::nn::functional::layer_norm(a, {c}, w, bias);
          out.backward(b);
        };
        bytes = 20 * n;
      }
    }
    std::optional<minidl::NoGradGuard> no_grad;
    if (op != "layer_norm_fwd_bwd") no_grad.emplace();
    time_on_device(state, Cost{0, bytes}, kFp32, call);
  });
}

/// state.range(0): whether the flash-attention kernels run (else the composed path). FLOPs: the causal half of
/// Q·Kᵀ and P·V forward, 2.5 times that backward (FlashAttention's count: recomputation not included); bytes:
/// q, k, v, out, the output gradient and the three input gradients once each.
void BM_attention(benchmark::State& state) {
  guarded(state, [&] {
    const std::int64_t B = 16, H = 12, T = 1024, d = 64;
    const bool fused = state.range(0) != 0;
    minidl::cuda::set_allow_tf32(false, false);
    minidl::cuda::set_flash_attention_enabled(fused);
    minidl::manual_seed(0);
    const auto leaf = [&] { return minidl::randn({B, H, T, d}, kDevice).requires_grad_(true); };
    const minidl::Tensor q = leaf(), k = leaf(), v = leaf(), g = minidl::randn({B, H, T, d}, kDevice);
    const double bhttd = static_cast<double>(B * H * T) * static_cast<double>(T * d);
    const Cost cost{3.5 * 2.0 * bhttd, 8.0 * 4.0 * static_cast<double>(B * H * T * d)};
    time_on_device(state, cost, kFp32, [&] {
      minidl::nn::functional::scaled_dot_product_attention(q, k, v, {}, 0.0, true).backward(g);
    });
    minidl::cuda::set_flash_attention_enabled(true);
  });
}

/// linear(x, w, bias) at M x K x N (see the top). state.range(0): 0 float32, 1 float32 with TF32, 2 bfloat16,
/// 3 float16; state.range(1): with a bias. Bytes: x, w, out (and the bias) once each.
void BM_gemm(benchmark::State& state, std::int64_t M, std::int64_t K, std::int64_t N) {
  guarded(state, [&] {
    const std::int64_t mode = state.range(0);
    const minidl::DType dt = mode == 2 ? minidl::kBFloat16 : mode == 3 ? minidl::kFloat16 : minidl::kFloat32;
    minidl::cuda::set_allow_tf32(false, mode == 1);
    minidl::manual_seed(0);
    const auto make = [&](const Shape& s) { return minidl::randn(s, kDevice).to(dt); };
    const minidl::Tensor x = make({M, K}), w = make({N, K}), bias = state.range(1) ? make({N}) : minidl::Tensor();
    minidl::Tensor out;
    const double element = static_cast<double>(minidl::element_size(dt));
    const Cost cost{2.0 * static_cast<double>(M) * static_cast<double>(K) * static_cast<double>(N),
                    element * static_cast<double>(M * K + N * K + M * N + (bias.defined() ? N : 0))};
    const minidl::NoGradGuard no_grad;
    time_on_device(state, cost, mode >= 2 ? kBf16 : mode == 1 ? kTf32 : kFp32,
                   [&] { out = minidl::nn::functional::linear(x, w, bias); });
    minidl::cuda::set_allow_tf32(false, false);
  });
}

/// nn::LSTM, 2 layers of 512 on inputs of 512, T = 128, batch 64: forward and backward (input and parameter
/// gradients), as a user's module runs them: through cuDNN (cudnn:1, opt-in for now) or minidl's own recurrence (the default)
/// kernels (cudnn:0, cuda::set_cudnn_rnn_enabled(false)). FLOPs: the input and recurrent GEMMs of both layers,
/// forward and twice that backward.
void BM_lstm(benchmark::State& state) {
  guarded(state, [&] {
    const std::int64_t T = 128, B = 64, I = 512, H = 512;
    minidl::cuda::set_allow_tf32(false, false);
    minidl::cuda::set_cudnn_rnn_enabled(state.range(0) != 0);
    minidl::manual_seed(0);
    minidl::nn::LSTM lstm(minidl::nn::LSTMOptions(I, H).num_layers(2));
    lstm->to(kDevice);
    const minidl::Tensor x = minidl::randn({T, B, I}, kDevice).requires_grad_(true);
    const minidl::Tensor g = minidl::randn({T, B, H}, kDevice);
    const double gemm = 2.0 * static_cast<double>(T * B) * static_cast<double>(4 * H) * static_cast<double>(I + H);
    const Cost cost{3.0 * 2.0 * gemm, 0};
    time_on_device(state, cost, kFp32, [&] { std::get<0>(lstm->forward(x)).backward(g); });
    minidl::cuda::set_cudnn_rnn_enabled(true);
  });
}

const std::vector<TensorOpCase>& tensor_op_cases() {
  static const std::vector<TensorOpCase> cases = {
      {"copy", {1 << 26}},
      {"cat_dim0", {4096, 8192}},
      {"cat_dim1", {4096, 8192}},
      {"index_rows", {262144, 256}},
      {"gather_last", {8192, 4096}},
      {"scatter_add_last", {8192, 4096}},
      {"where", {1 << 26}},
      {"masked_fill", {1 << 26}},
      {"sum_last", {8192, 8192}},
      {"sum_middle", {64, 4096, 256}},
      {"cumsum_last", {8192, 8192}},
      {"topk50", {512, 50304}},
      {"layer_norm", {16 * 1024, 768}},
      {"layer_norm_fwd_bwd", {16 * 1024, 768}},
  };
  return cases;
}

std::string shape_name(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

}  // namespace

/// main's body; main runs it under minidl::run_main.
int run_program(int argc, char** argv) {
  if (!parse_launch(argc, argv)) return 1;
  if (!minidl::cuda::is_available()) {
    const std::string why = minidl::cuda::versions().error;
    std::cout << "bench_ops_gpu: skipped, no usable CUDA device" << (why.empty() ? "" : ": " + why) << "\n";
    return 0;
  }
  using minidl::bench::conv1;
  using minidl::bench::conv2;
  const auto conv = BM_layer<minidl::bench::ConvCase, minidl::kernels::Conv2dParams>;
  const auto linear = BM_layer<minidl::bench::LinearCase, minidl::bench::LinearShape>;
  benchmark::RegisterBenchmark("conv1/forward", conv, conv1, Pass::Forward)->Apply(compute_args);
  benchmark::RegisterBenchmark("conv1/backward_weight", conv, conv1, Pass::BackwardWeight)->Apply(compute_args);
  for (Pass pass : {Pass::Forward, Pass::BackwardInput, Pass::BackwardWeight}) {
    const std::string name = pass == Pass::Forward         ? "/forward"
                             : pass == Pass::BackwardInput ? "/backward_input"
                                                           : "/backward_weight";
    benchmark::RegisterBenchmark(("conv2" + name).c_str(), conv, conv2, pass)->Apply(compute_args);
    benchmark::RegisterBenchmark(("fc1" + name).c_str(), linear, minidl::bench::fc1, pass)->Apply(compute_args);
    benchmark::RegisterBenchmark(("fc2" + name).c_str(), linear, minidl::bench::fc2, pass)->Apply(compute_args);
  }
  for (Pass pass : {Pass::Forward, Pass::BackwardInput, Pass::BackwardWeight}) {
    const char* const name = pass == Pass::Forward         ? "conv2/staged_forward"
                             : pass == Pass::BackwardInput ? "conv2/staged_backward_input"
                                                           : "conv2/staged_backward_weight";
    benchmark::RegisterBenchmark(name, BM_staged, pass)
        ->ArgNames({"batch", "choice"})
        ->ArgsProduct({{64, 256}, {0, 1, 2}})
        ->UseManualTime()
        ->Iterations(kSamples)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("max_pool/forward", BM_max_pool, Pass::Forward)->Apply(memory_args);
  benchmark::RegisterBenchmark("max_pool/backward", BM_max_pool, Pass::BackwardInput)->Apply(memory_args);
  benchmark::RegisterBenchmark("relu1/forward", BM_relu, conv1, Pass::Forward)->Apply(memory_args);
  benchmark::RegisterBenchmark("relu1/backward", BM_relu, conv1, Pass::BackwardInput)->Apply(memory_args);
  benchmark::RegisterBenchmark("relu2/forward", BM_relu, conv2, Pass::Forward)->Apply(memory_args);
  benchmark::RegisterBenchmark("relu2/backward", BM_relu, conv2, Pass::BackwardInput)->Apply(memory_args);
  benchmark::RegisterBenchmark("lstm/fwd_bwd", BM_lstm)
      ->ArgNames({"cudnn"})
      ->Args({1})
      ->Args({0})
      ->UseManualTime()
      ->Iterations(kSamples)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("attention/fwd_bwd", BM_attention)
      ->ArgNames({"fused"})
      ->Args({1})
      ->Args({0})
      ->UseManualTime()
      ->Iterations(kSamples)
      ->Unit(benchmark::kMicrosecond);
  for (const auto& [M, K, N] : {std::array<std::int64_t, 3>{4096, 4096, 4096}, {16384, 768, 3072},
                                {16384, 3072, 768}}) {
    const std::string name = "gemm/" + std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
    benchmark::RegisterBenchmark(name.c_str(), BM_gemm, M, K, N)
        ->ArgNames({"dtype", "bias"})
        ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
        ->UseManualTime()
        ->Iterations(kSamples)
        ->Unit(benchmark::kMicrosecond);
  }
  for (const TensorOpCase& c : tensor_op_cases()) {
    benchmark::RegisterBenchmark(("tensor_ops/" + std::string(c.op) + "/" + shape_name(c.shape)).c_str(),
                                 BM_tensor_op, c)
        ->UseManualTime()
        ->Iterations(kSamples)
        ->Unit(benchmark::kMicrosecond);
  }

  const minidl::cuda::VersionInfo v = minidl::cuda::versions();
  benchmark::AddCustomContext("device", minidl::cuda::device_name(0));
  benchmark::AddCustomContext("cuda_runtime", minidl::cuda::format_cuda_version(v.runtime));
  benchmark::AddCustomContext("cudnn", minidl::cuda::format_cudnn_version(v.cudnn));
  benchmark::AddCustomContext("launch", std::string(g_launch == Launch::Graph ? "one CUDA graph of " : "eager, ") +
                                            std::to_string(kCallsPerSample) + " calls per sample");
  benchmark::AddCustomContext("floors", std::string(kFp32.name) + ", " + kTf32.name + " (dense), " + kHbm.name +
                                            " (H200 peaks, used on any GPU)");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

int main(int argc, char** argv) {
  return minidl::run_main("bench_ops_gpu", [&] { return run_program(argc, argv); });
}
