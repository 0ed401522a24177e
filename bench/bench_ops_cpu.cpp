// Google Benchmark microbenchmarks of the CPU kernels the example CNN spends its time in, at its shapes
// (batch 64): conv1 (1->32, 28x28, k3), conv2 (32->64, 26x26, k3), fc1 (9216->128), max-pool 2x2 of conv2's
// output. Convolutions and GEMMs report achieved GFLOP/s ("FLOPS" counter, a rate over wall time); pooling
// reports input elements per second. The argument is the thread count of the library's pool.
//
// The context line "peak_estimate" is cores x clock x FLOPs per cycle, read from /proc/cpuinfo: with AVX-512,
// 2 FMA units x 16 float lanes x 2 = 64 FLOPs per cycle and core (the server cores minidl targets have two
// 512-bit FMA units), with AVX2 + FMA 32, else 8. The clock is /proc/cpuinfo's "cpu MHz", in a VM usually the
// nominal one; turbo clocks are higher (see BM_gemm_isa at one thread).
// On the 2-core development VM (Xeon, Sapphire Rapids, AVX-512, 2.6 GHz nominal) the estimate is
// 2 x 2.6 GHz x 64 = 333 GFLOP/s, 166 per core. gemm_isa/avx512 (conv2's forward GEMM, one core) measured
// 140-166 GFLOP/s there, and conv2's backward-input GEMM shape up to 200: the cores clock above nominal.
//
//   build/bench/bench_ops_cpu --benchmark_filter=conv2 --benchmark_min_time=0.5
#include <benchmark/benchmark.h>
#include <minidl/minidl.h>
#include <minidl/run_main.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu/gemm.h"
#include "kernels/backend.h"
#include "op_cases.h"

namespace {

using minidl::bench::Pass;

const minidl::bench::Backend kCpu{&minidl::cpu::conv2d_forward<float>,      &minidl::cpu::conv2d_backward_input<float>,
                                  &minidl::cpu::conv2d_backward_weight<float>, &minidl::cpu::matmul,
                                  &minidl::cpu::max_pool2d_forward<float>,   &minidl::cpu::max_pool2d_backward<float>};

std::vector<float> random_vector(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void set_rate(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOPS"] = benchmark::Counter(flops_per_iteration * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

/// A convolution (conv1 or conv2 at batch 64, see op_cases.h) or fc1's GEMMs, as the layer runs them.
template <class Case>
void BM_layer(benchmark::State& state, Case c, Pass pass) {
  minidl::set_num_threads(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    c.run(kCpu, pass);
    benchmark::ClobberMemory();
  }
  set_rate(state, c.cost().flops);
}

void BM_max_pool(benchmark::State& state, Pass pass) {
  minidl::set_num_threads(static_cast<int>(state.range(0)));
  minidl::manual_seed(0);
  minidl::bench::MaxPoolCase c(minidl::bench::pool(64), minidl::kCPU, kCpu);
  for (auto _ : state) {
    c.run(kCpu, pass);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * c.input_elements());
}

/// conv2's forward GEMM (64 x 576 x 288) for one image on one thread, per instruction-set build: what the
/// run-time dispatch gains over the portable baseline.
void BM_gemm_isa(benchmark::State& state, minidl::cpu::CpuIsa isa) {
  const std::int64_t m = 64, n = 576, k = 288;
  std::vector<float> a = random_vector(m * k, 1), b = random_vector(k * n, 2), c(static_cast<std::size_t>(m * n));
  const minidl::cpu::GemmArgs<float> g{m, n, k, {a.data(), k, 1}, {b.data(), n, 1}, {c.data(), n, 1}, false};
  for (auto _ : state) {
    minidl::cpu::gemm(g, isa);
    benchmark::ClobberMemory();
  }
  set_rate(state, 2.0 * static_cast<double>(m * n * k));
}

std::string peak_estimate() {
  std::ifstream in("/proc/cpuinfo");
  double mhz = 0;
  std::string flags, line, model;
  while (std::getline(in, line)) {
    const auto value = [&] { return line.substr(line.find(':') + 2); };
    if (mhz == 0 && line.rfind("cpu MHz", 0) == 0) mhz = std::stod(value());
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = " " + value() + " ";
    if (model.empty() && line.rfind("model name", 0) == 0) model = value();
  }
  const bool avx512 = flags.find(" avx512f ") != std::string::npos;
  const bool fma = flags.find(" fma ") != std::string::npos && flags.find(" avx2 ") != std::string::npos;
  const int per_cycle = avx512 ? 64 : fma ? 32 : 8;
  const unsigned cores = std::thread::hardware_concurrency();
  std::ostringstream s;
  s << cores << " cores x " << mhz / 1000 << " GHz x " << per_cycle << " FLOP/cycle ("
    << (avx512 ? "AVX-512, 2 FMA units" : fma ? "AVX2, 2 FMA units" : "SSE") << ") = "
    << static_cast<int>(cores * mhz / 1000 * per_cycle) << " GFLOP/s fp32; " << model
    << "; gemm runs " << minidl::cpu::isa_name(minidl::cpu::active_isa());
  return s.str();
}

void thread_args(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  if (hw > 2) b->Arg(hw);
}

}  // namespace

/// main's body; main runs it under minidl::run_main.
int run_program(int argc, char** argv) {
  using minidl::bench::ConvCase;
  using minidl::bench::LinearCase;
  minidl::manual_seed(0);
  const ConvCase conv1(minidl::bench::conv1(64), minidl::kCPU), conv2(minidl::bench::conv2(64), minidl::kCPU);
  const LinearCase fc1(minidl::bench::fc1(64), minidl::kCPU);
  benchmark::RegisterBenchmark("conv1/forward", BM_layer<ConvCase>, conv1, Pass::Forward)->Apply(thread_args);
  benchmark::RegisterBenchmark("conv1/backward_weight", BM_layer<ConvCase>, conv1, Pass::BackwardWeight)->Apply(thread_args);
  benchmark::RegisterBenchmark("conv2/forward", BM_layer<ConvCase>, conv2, Pass::Forward)->Apply(thread_args);
  benchmark::RegisterBenchmark("conv2/backward_input", BM_layer<ConvCase>, conv2, Pass::BackwardInput)->Apply(thread_args);
  benchmark::RegisterBenchmark("conv2/backward_weight", BM_layer<ConvCase>, conv2, Pass::BackwardWeight)->Apply(thread_args);
  benchmark::RegisterBenchmark("fc1/forward", BM_layer<LinearCase>, fc1, Pass::Forward)->Apply(thread_args);
  benchmark::RegisterBenchmark("fc1/backward_input", BM_layer<LinearCase>, fc1, Pass::BackwardInput)->Apply(thread_args);
  benchmark::RegisterBenchmark("fc1/backward_weight", BM_layer<LinearCase>, fc1, Pass::BackwardWeight)->Apply(thread_args);
  benchmark::RegisterBenchmark("max_pool/forward", BM_max_pool, Pass::Forward)->Apply(thread_args);
  benchmark::RegisterBenchmark("max_pool/backward", BM_max_pool, Pass::BackwardInput)->Apply(thread_args);
  for (minidl::cpu::CpuIsa isa : minidl::cpu::available_isas()) {
    benchmark::RegisterBenchmark((std::string("gemm_isa/") + minidl::cpu::isa_name(isa)).c_str(), BM_gemm_isa, isa)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::AddCustomContext("peak_estimate", peak_estimate());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

int main(int argc, char** argv) {
  return minidl::run_main("bench_ops_cpu", [&] { return run_program(argc, argv); });
}
