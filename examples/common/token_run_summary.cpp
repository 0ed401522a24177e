#include "token_run_summary.h"

#include <spdlog/fmt/fmt.h>

#include <cstdio>
#include <filesystem>

namespace examples {

void TokenRunSummary::add(std::int64_t n, const EpochTiming& timing) {
  iters += n;
  steady_seconds += timing.steady_seconds;
  one_time_seconds += timing.one_time_seconds;
  one_time_steps += timing.one_time_steps;
  steady_measured = steady_measured && timing.steady_measured;
}

void print_token_run_summary(const std::vector<TokenRunSummary>& runs, const std::string& one_time_work) {
  std::printf("\n%-8s %10s %12s %10s %10s\n", "device", "ms/iter", "tokens/s", "val loss", "speedup");
  double cpu_ms = 0;
  for (const TokenRunSummary& r : runs) {
    if (r.iters == 0) continue;
    const double ms = 1e3 * r.steady_seconds / static_cast<double>(r.iters);
    if (r.device.is_cpu()) cpu_ms = ms;
    const std::string speedup = cpu_ms > 0 && r.device.is_cuda() ? fmt::format("{:.1f}x", cpu_ms / ms) : "";
    std::printf("%-8s %10.2f %12.0f %10.4f %10s\n", r.device.str().c_str(), ms,
                1e3 * static_cast<double>(r.tokens_per_iter) / ms, r.last_val, speedup.c_str());
  }
  for (const TokenRunSummary& r : runs) {
    if (r.iters == 0) continue;
    if (r.steady_measured) {
      std::printf("%s: one-time cost %.3f s in %lld step(s) (%s), not in ms/iter above\n", r.device.str().c_str(),
                  r.one_time_seconds, static_cast<long long>(r.one_time_steps),
                  r.device.is_cuda() ? one_time_work.c_str() : "the first step");
    } else {
      std::printf("%s: every step did one-time work, so ms/iter above includes it\n", r.device.str().c_str());
    }
  }
}

std::string metrics_path(const std::string& path, bool per_device, const minidl::Device& device) {
  if (!per_device) return path;
  std::filesystem::path p(path);
  const std::string ext = p.extension().string();
  p.replace_extension();
  return p.string() + "." + (device.is_cuda() ? "cuda" : "cpu") + ext;
}

}  // namespace examples
