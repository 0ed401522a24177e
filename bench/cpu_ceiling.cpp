// cpu_ceiling: what this machine's cores deliver when all of them work at once, the ceiling of any thread
// scaling claim. Each of --threads threads runs the same kernel on its own data, with no synchronisation
// between them, for --seconds; the table gives per-thread rates (min / median / max) and their total.
//
//   fma     register-resident fused multiply-adds (16-lane vectors, 16 independent chains): the arithmetic peak
//   gemm    cpu::gemm of conv2's forward product as one GEMM per image (64 x 576 x 288, without Winograd),
//           operands in the thread's cache: what a compute-bound kernel of the training step can reach
//   stream  y += a * x over 2 x 32 MB per thread: memory bandwidth
//
// On a shared virtual machine cores differ (other guests on the same physical cores) and clocks drop as more
// cores are busy, so 16 threads do not give 8 times what 2 give even with no synchronisation at all: the
// totals at two thread counts bound the speedup a program can show there (bench/cpu_scaling.py --ceiling runs
// this beside the training benchmark, round by round).
#include <CLI/CLI.hpp>
#include <minidl/run_main.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu/cpu_clones.h"
#include "cpu/gemm.h"

namespace {

using Clock = std::chrono::steady_clock;

/// One kernel: per thread, set-up (allocation, first touch) and then repeated calls of a unit of work.
struct Kernel {
  const char* unit;  // of `work_per_call`
  double work_per_call;
  std::function<std::function<void()>()> make;  // called on the thread: returns the unit of work
};

typedef float v16 __attribute__((vector_size(64)));

/// 16 independent chains of 16-lane FMAs (two FMA units of 4-cycle latency need 8 in flight), 2048 steps each.
MINIDL_CPU_CLONES float fma_chains(float seed) {
  constexpr int kChains = 16;
  v16 acc[kChains];
  const v16 a = v16{} + 0.999999f, b = v16{} + 1e-7f;
  for (int c = 0; c < kChains; ++c) acc[c] = v16{} + (seed + static_cast<float>(c));
  for (int i = 0; i < 2048; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  float s = 0;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < 16; ++l) s += acc[c][l];
  return s;
}

MINIDL_CPU_CLONES void axpy(float a, const float* __restrict x, float* __restrict y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

Kernel fma_kernel() {
  return {"GFLOP/s", 2.0 * 16 * 16 * 2048, [] {
            return std::function<void()>([sink = 0.0f]() mutable { sink += fma_chains(sink * 1e-30f); });
          }};
}

Kernel gemm_kernel() {
  static constexpr std::int64_t m = 64, n = 576, k = 288;
  return {"GFLOP/s", 2.0 * m * n * k, [] {
            auto a = std::make_shared<std::vector<float>>(m * k, 0.5f);
            auto b = std::make_shared<std::vector<float>>(k * n, 0.25f);
            auto c = std::make_shared<std::vector<float>>(m * n, 0.0f);
            return std::function<void()>([a, b, c] {
              minidl::cpu::gemm<float>({m, n, k, {a->data(), k, 1}, {b->data(), n, 1}, {c->data(), n, 1}, false});
            });
          }};
}

Kernel stream_kernel() {
  static constexpr std::size_t n = std::size_t(8) << 20;  // 32 MB of floats per array
  return {"GB/s", 3.0 * sizeof(float) * n, [] {  // x read, y read and written
            auto x = std::make_shared<std::vector<float>>(n, 1.0f);
            auto y = std::make_shared<std::vector<float>>(n, 0.0f);
            return std::function<void()>([x, y] { axpy(1e-9f, x->data(), y->data(), n); });
          }};
}

/// Per-thread rates (work units per second / 1e9) of `kernel` run by `threads` threads at once.
std::vector<double> run(const Kernel& kernel, int threads, double seconds) {
  std::vector<double> rates(static_cast<std::size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::function<void()> work = kernel.make();
      work();  // first touch, caches warm
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      const Clock::time_point start = Clock::now();
      const Clock::time_point stop = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
      std::int64_t calls = 0;
      Clock::time_point now;
      do {
        work();
        ++calls;
        now = Clock::now();
      } while (now < stop);
      rates[static_cast<std::size_t>(t)] =
          kernel.work_per_call * static_cast<double>(calls) / std::chrono::duration<double>(now - start).count() / 1e9;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true);
  for (std::thread& th : pool) th.join();
  return rates;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

/// main's body; main runs it under minidl::run_main.
int run_program(int argc, char** argv) {
  CLI::App app{"cpu_ceiling: per-thread and total rates of FMAs, an in-cache GEMM and streaming, all threads at once"};
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double seconds = 1.0;
  std::string kernels = "fma,gemm,stream";
  app.add_option("--threads", threads, "threads running at once")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "how long each kernel runs")->check(CLI::PositiveNumber);
  app.add_option("--kernels", kernels, "comma-separated: fma, gemm, stream");
  CLI11_PARSE(app, argc, argv);

  std::printf("%-7s | %-7s | %-7s | %-28s | %s\n", "kernel", "threads", "unit", "per thread: min / median / max",
              "total");
  for (const std::string& name : split(kernels)) {
    Kernel kernel;
    if (name == "fma") {
      kernel = fma_kernel();
    } else if (name == "gemm") {
      kernel = gemm_kernel();
    } else if (name == "stream") {
      kernel = stream_kernel();
    } else {
      std::fprintf(stderr, "cpu_ceiling: unknown kernel '%s' (expected fma, gemm or stream)\n", name.c_str());
      return 2;
    }
    std::vector<double> rates = run(kernel, threads, seconds);
    std::sort(rates.begin(), rates.end());
    double total = 0;
    for (double r : rates) total += r;
    char per_thread[64];
    std::snprintf(per_thread, sizeof per_thread, "%.1f / %.1f / %.1f", rates.front(), rates[rates.size() / 2],
                  rates.back());
    std::printf("%-7s | %-7d | %-7s | %-28s | %.1f\n", name.c_str(), threads, kernel.unit, per_thread, total);
    std::printf("RESULT kernel=%s threads=%d unit=%s total=%.2f min=%.2f median=%.2f max=%.2f\n", name.c_str(),
                threads, kernel.unit, total, rates.front(), rates[rates.size() / 2], rates.back());
  }
  return 0;
}

int main(int argc, char** argv) {
  return minidl::run_main("cpu_ceiling", [&] { return run_program(argc, argv); });
}
