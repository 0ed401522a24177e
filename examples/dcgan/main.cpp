// dcgan: trains DCGAN on Fashion-MNIST padded to 32x32 (or on random images), on the CPU or a GPU, or on both
// (--compare) to measure the speedup; writes a PNG grid of generated samples after every epoch, metrics and
// checkpoints. Exit status: 0 success, 1 runtime error, 2 command-line error, 130 interrupted by Ctrl-C (after
// the current step; the last checkpoint stays intact).
#include <minidl/minidl.h>
#include <minidl/run_main.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "data.h"
#include "device_choice.h"
#include "interrupt.h"
#include "metrics.h"
#include "options.h"
#include "reference_dump.h"
#include "sample_grid.h"
#include "trainer.h"

namespace fs = std::filesystem;
using minidl::Device;

namespace {

using dcgan::Options;

struct RunSummary {
  Device device;
  std::int64_t steps = 0, images = 0, one_time_steps = 0;
  double steady_seconds = 0, one_time_seconds = 0;
  bool steady_measured = true;
  dcgan::GanStats last;
};

/// Fashion-MNIST's training images from --data, or --synthetic random ones.
std::shared_ptr<const dcgan::ImageSet> load_data(const Options& o) {
  auto set = std::make_shared<const dcgan::ImageSet>(
      o.synthetic ? dcgan::ImageSet::synthetic(o.train_limit > 0 ? o.train_limit : 60000, o.seed)
                  : dcgan::fashion_mnist(o.data, o.train_limit));
  spdlog::info("data: {}", set->description());
  return set;
}

/// `path` as it is, or with --compare the device before its extension (FILE.cpu.csv, epoch_001.cuda.png).
std::string per_device(const Options& o, const std::string& path, const Device& device) {
  if (!o.compare) return path;
  fs::path p(path);
  const std::string ext = p.extension().string();
  p.replace_extension();
  return p.string() + "." + (device.is_cuda() ? "cuda" : "cpu") + ext;
}

dcgan::TrainConfig train_config(const Options& o, Device device) {
  dcgan::TrainConfig c;
  c.device = device;
  c.model.latent = o.latent;
  c.batch_size = o.batch_size;
  c.lr = o.lr;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.seed = o.seed;
  c.log_every = o.log_every;
  c.progress = !o.no_progress;
  c.stop_requested = examples::interrupt_requested;
  return c;
}

RunSummary run(const Options& o, Device device, const std::shared_ptr<const dcgan::ImageSet>& data) {
  dcgan::Trainer trainer(train_config(o, device), data);
  std::int64_t g_params = 0, d_params = 0;
  for (const minidl::Tensor& p : trainer.generator()->parameters()) g_params += p.numel();
  for (const minidl::Tensor& p : trainer.discriminator()->parameters()) d_params += p.numel();
  spdlog::info("DCGAN on {} ({} CPU threads): {}; generator {:.2f}M, discriminator {:.2f}M parameters", device.str(),
               minidl::get_num_threads(), trainer.model()->config().str(), static_cast<double>(g_params) / 1e6,
               static_cast<double>(d_params) / 1e6);
  if (!o.resume.empty()) {
    trainer.resume(o.resume);
    spdlog::info("resumed from {} after epoch {} (step {})", o.resume, trainer.epoch(), trainer.iter());
  }
  std::unique_ptr<dcgan::MetricsWriter> metrics;
  if (!o.metrics.empty()) {
    metrics = std::make_unique<dcgan::MetricsWriter>(per_device(o, o.metrics, device), !o.resume.empty());
  }
  if (!o.samples_dir.empty()) fs::create_directories(o.samples_dir);

  RunSummary summary{device};
  while (trainer.epoch() < o.epochs) {
    const dcgan::EpochStats s = trainer.train_epoch([&](const dcgan::IntervalStats& is) {
      if (metrics) metrics->write(is);
    });
    const dcgan::GanStats& m = s.means;
    spdlog::info(
        "epoch {} on {}: loss_D {:.4f}, loss_G {:.4f}, D(x) {:.3f}, D(G(z)) {:.3f} / {:.3f} ({:.1f} s, "
        "{:.1f} ms/step, {:.0f} img/s{})",
        s.epoch, device.str(), m.loss_d, m.loss_g, m.d_x, m.d_g_z1, m.d_g_z2, s.seconds,
        1e3 * s.seconds / static_cast<double>(s.steps), static_cast<double>(s.images) / s.seconds,
        s.timing.one_time_steps > 0 ? fmt::format("; {:.2f} s of it one-time work in {} step(s)",
                                                  s.timing.one_time_seconds, s.timing.one_time_steps)
                                    : std::string());
    if (!o.samples_dir.empty()) {
      const std::string png =
          per_device(o, (fs::path(o.samples_dir) / fmt::format("epoch_{:03d}.png", s.epoch)).string(), device);
      dcgan::save_sample_grid(trainer.fixed_samples(), png);
      spdlog::info("wrote {}", png);
    }
    if (!o.save.empty()) trainer.save(o.save);
    summary.steps += s.steps;
    summary.images += s.images;
    summary.steady_seconds += s.timing.steady_seconds;
    summary.one_time_seconds += s.timing.one_time_seconds;
    summary.one_time_steps += s.timing.one_time_steps;
    summary.steady_measured = summary.steady_measured && s.timing.steady_measured;
    summary.last = m;
  }
  return summary;
}

/// The runs' steady-state speed (each batch size's first step taken out, on a line of its own).
void print_summary(const std::vector<RunSummary>& runs) {
  std::printf("\n%-8s %10s %10s %10s %10s %10s\n", "device", "ms/step", "images/s", "loss_D", "loss_G", "speedup");
  double cpu_ms = 0;
  for (const RunSummary& r : runs) {
    if (r.steps == 0) continue;
    const double ms = 1e3 * r.steady_seconds / static_cast<double>(r.steps);
    if (r.device.is_cpu()) cpu_ms = ms;
    const std::string speedup = cpu_ms > 0 && r.device.is_cuda() ? fmt::format("{:.1f}x", cpu_ms / ms) : "";
    std::printf("%-8s %10.2f %10.0f %10.4f %10.4f %10s\n", r.device.str().c_str(), ms,
                static_cast<double>(r.images) / r.steady_seconds, r.last.loss_d, r.last.loss_g, speedup.c_str());
  }
  for (const RunSummary& r : runs) {
    if (r.steps == 0) continue;
    if (r.steady_measured) {
      std::printf(
          "%s: one-time cost %.3f s in %lld step(s) (the first step of each batch size%s), not in ms/step "
          "above\n",
          r.device.str().c_str(), r.one_time_seconds, static_cast<long long>(r.one_time_steps),
          r.device.is_cuda() ? ": cuDNN's algorithm search" : "");
    } else {
      std::printf("%s: every step did one-time work, so ms/step above includes it\n", r.device.str().c_str());
    }
  }
}

int run_program(int argc, char** argv) {
  CLI::App app{"dcgan: train DCGAN on Fashion-MNIST with minidl"};
  Options o;
  dcgan::add_options(app, o);
  try {
    app.parse(argc, argv);
    dcgan::check_options(o, app);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    spdlog::set_level(spdlog::level::from_str(o.log_level));
    if (o.threads > 0) minidl::set_num_threads(o.threads);
    examples::install_interrupt_handler();
    const auto data = load_data(o);
    if (!o.dump_reference.empty()) {
      dcgan::dump_reference(train_config(o, examples::pick_device(o.device)), data, o.dump_reference);
      spdlog::info("wrote {} and {}", o.dump_reference, dcgan::reference_path(o.dump_reference));
      return 0;
    }
    std::vector<RunSummary> runs;
    for (const Device& device : examples::training_devices(o.device, o.compare)) runs.push_back(run(o, device, data));
    print_summary(runs);
  } catch (const dcgan::Interrupted& e) {
    std::fprintf(stderr, "dcgan: %s\n", e.what());
    return 130;  // 128 + SIGINT, as a shell reports a process killed by Ctrl-C
  } catch (const minidl::OutOfMemoryError& e) {
    minidl::print_error("dcgan", e);
    std::fprintf(stderr, "Try a smaller --batch-size.\n");
    return 1;
  }
  return 0;
}

}  // namespace

// Every other error: its type and message on stderr, exit status 1 (minidl::run_main).
int main(int argc, char** argv) {
  return minidl::run_main("dcgan", [&] { return run_program(argc, argv); });
}
