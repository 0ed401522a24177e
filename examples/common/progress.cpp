#include "progress.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

namespace examples {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
std::string clock_str(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d:%02d", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}
}  // namespace

Progress::Progress(std::string label, std::int64_t total, std::int64_t items_per_step, std::string item,
                   std::string step)
    : label_(std::move(label)), item_(std::move(item)), step_(std::move(step)), total_(total),
      items_per_step_(items_per_step), tty_(isatty(STDOUT_FILENO) != 0), start_(Clock::now()), last_(start_) {}

bool Progress::due() const { return seconds(Clock::now() - last_) >= (tty_ ? 0.2 : 5.0); }

void Progress::update(std::int64_t done, double loss) { update(done, {{"loss", loss}}); }

void Progress::update(std::int64_t done, const std::vector<std::pair<std::string, double>>& values) {
  last_ = Clock::now();
  const double elapsed = seconds(last_ - start_);
  const double ips = elapsed > 0 ? static_cast<double>(done * items_per_step_) / elapsed : 0.0;
  const double eta = done > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
  if (tty_) {
    const int width = 30;
    const int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
    std::string bar(static_cast<std::size_t>(filled), '=');
    if (filled < width) bar += '>' + std::string(static_cast<std::size_t>(width - filled - 1), ' ');
    std::string shown;
    for (const auto& [name, value] : values) shown += fmt::format("  {} {:.4f}", name, value);
    std::printf("\r%s [%s] %lld/%lld%s  %.0f %s/s  ETA %s ", label_.c_str(), bar.c_str(), static_cast<long long>(done),
                static_cast<long long>(total_), shown.c_str(), ips, item_.c_str(), clock_str(eta).c_str());
    std::fflush(stdout);
  } else {
    std::string shown;
    for (const auto& [name, value] : values) shown += fmt::format(", {} {:.4f}", name, value);
    spdlog::info("{} {}/{} {}{}, {:.0f} {}/s, ETA {}", label_, done, total_, step_, shown, ips, item_, clock_str(eta));
  }
}

void Progress::finish() {
  if (tty_) {
    std::printf("\n");
    std::fflush(stdout);
  }
}

}  // namespace examples
