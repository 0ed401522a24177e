// resnet: trains ResNet-18 (CIFAR form) on Fashion-MNIST padded to 32x32 (or on random images), on the CPU or a
// GPU, or on both (--compare) to measure the speedup; evaluates the test set after every epoch, writes metrics and
// checkpoints. Exit status: 0 success, 1 runtime error, 2 command-line error, 130 interrupted by Ctrl-C (after the
// current step; the last checkpoint stays intact).
#include <minidl/minidl.h>
#include <minidl/run_main.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <limits>
#include <memory>
#include <vector>

#include "amp_mode.h"
#include "classifier_metrics.h"
#include "data.h"
#include "device_choice.h"
#include "interrupt.h"
#include "options.h"
#include "reference_dump.h"
#include "trainer.h"

using minidl::Device;

namespace {

using resnet::Options;

struct RunSummary {
  Device device;
  std::int64_t steps = 0, images = 0, one_time_steps = 0;
  double steady_seconds = 0, one_time_seconds = 0;
  bool steady_measured = true;
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();
};

struct DataSets {
  std::shared_ptr<const examples::ImageSet> train, test;
};

/// Fashion-MNIST's two splits from --data, or --synthetic random ones (1000 test images unless --test-limit).
DataSets load_data(const Options& o) {
  DataSets d;
  if (o.synthetic) {
    d.train = std::make_shared<const examples::ImageSet>(
        examples::ImageSet::synthetic(o.train_limit > 0 ? o.train_limit : 60000, o.seed));
    d.test = std::make_shared<const examples::ImageSet>(
        examples::ImageSet::synthetic(o.test_limit > 0 ? o.test_limit : 1000, o.seed + 1));
  } else {
    d.train = std::make_shared<const examples::ImageSet>(resnet::fashion_mnist(o.data, true, o.train_limit));
    d.test = std::make_shared<const examples::ImageSet>(resnet::fashion_mnist(o.data, false, o.test_limit));
  }
  spdlog::info("data: {}; test: {}", d.train->description(), d.test->description());
  return d;
}

resnet::TrainConfig train_config(const Options& o, Device device) {
  resnet::TrainConfig c;
  c.device = device;
  c.model.width = o.width;
  c.model.blocks = resnet::ModelConfig::parse_blocks(o.blocks);
  c.epochs = o.epochs;
  c.batch_size = o.batch_size;
  c.lr = o.lr;
  c.seed = o.seed;
  c.augment = !o.no_augment;
  c.amp = examples::parse_amp(o.amp);
  c.cuda_graph = !o.no_cuda_graph;
  c.progress = !o.no_progress;
  c.stop_requested = examples::interrupt_requested;
  return c;
}

RunSummary run(const Options& o, Device device, const DataSets& data, examples::ClassifierMetricsWriter* metrics) {
  resnet::Trainer trainer(train_config(o, device), data.train, data.test);
  std::int64_t params = 0;
  for (const minidl::Tensor& p : trainer.model()->parameters()) params += p.numel();
  spdlog::info("ResNet on {} ({} CPU threads): {}, {:.2f}M parameters; batch {}, {} steps per epoch, --amp {}{}",
               device.str(), minidl::get_num_threads(), trainer.model()->config().str(),
               static_cast<double>(params) / 1e6, o.batch_size, trainer.steps_per_epoch(), o.amp,
               device.is_cuda() ? (o.no_cuda_graph ? ", eager steps" : ", CUDA-graph steps") : "");
  if (!o.resume.empty()) {
    trainer.resume(o.resume);
    spdlog::info("resumed from {} after epoch {} (step {})", o.resume, trainer.epoch(), trainer.iter());
  }
  RunSummary summary{device};
  while (trainer.epoch() < o.epochs) {
    const resnet::EpochStats s = trainer.train_epoch();
    spdlog::info(
        "epoch {} on {}: train loss {:.4f} acc {:.4f}, test loss {:.4f} acc {:.4f}, lr {:.4g} ({:.1f} s, {:.1f} "
        "ms/step, {:.0f} img/s{})",
        s.epoch, device.str(), s.train.loss, s.train.accuracy, s.test.loss, s.test.accuracy, s.lr, s.train.seconds,
        1e3 * s.train.seconds / static_cast<double>(s.steps), static_cast<double>(s.train.images) / s.train.seconds,
        s.timing.one_time_steps > 0 ? fmt::format("; {:.2f} s of it one-time work in {} step(s)",
                                                  s.timing.one_time_seconds, s.timing.one_time_steps)
                                    : std::string());
    if (metrics) {
      metrics->write(s.epoch, device.str(), "train", s.train.loss, s.train.accuracy, s.train.seconds,
                     static_cast<double>(s.train.images) / s.train.seconds);
      metrics->write(s.epoch, device.str(), "test", s.test.loss, s.test.accuracy, s.test.seconds,
                     static_cast<double>(s.test.images) / s.test.seconds);
    }
    if (!o.save.empty()) trainer.save(o.save);
    summary.steps += s.steps;
    summary.images += s.train.images;
    summary.steady_seconds += s.timing.steady_seconds;
    summary.one_time_seconds += s.timing.one_time_seconds;
    summary.one_time_steps += s.timing.one_time_steps;
    summary.steady_measured = summary.steady_measured && s.timing.steady_measured;
    summary.test_accuracy = s.test.accuracy;
  }
  return summary;
}

/// The runs' steady-state speed (the one-time work on a line of its own), in the table bench/compare_programs.py
/// reads (a header `device ms/iter ...`, then one row per device) and reference/time_step.py prints for PyTorch.
void print_summary(const std::vector<RunSummary>& runs) {
  std::printf("\n%-8s %10s %10s %10s %10s\n", "device", "ms/iter", "images/s", "test acc", "speedup");
  double cpu_ms = 0;
  for (const RunSummary& r : runs) {
    if (r.steps == 0) continue;
    const double ms = 1e3 * r.steady_seconds / static_cast<double>(r.steps);
    if (r.device.is_cpu()) cpu_ms = ms;
    const std::string speedup = cpu_ms > 0 && r.device.is_cuda() ? fmt::format("{:.1f}x", cpu_ms / ms) : "";
    std::printf("%-8s %10.2f %10.0f %10.4f %10s\n", r.device.str().c_str(), ms,
                static_cast<double>(r.images) / r.steady_seconds, r.test_accuracy, speedup.c_str());
  }
  for (const RunSummary& r : runs) {
    if (r.steps == 0) continue;
    if (r.steady_measured) {
      std::printf("%s: one-time cost %.3f s in %lld step(s) (%s), not in ms/iter above\n", r.device.str().c_str(),
                  r.one_time_seconds, static_cast<long long>(r.one_time_steps),
                  r.device.is_cuda() ? "the algorithm search, the CUDA-graph capture" : "the first step");
    } else {
      std::printf("%s: every step did one-time work, so ms/iter above includes it\n", r.device.str().c_str());
    }
  }
}

int run_program(int argc, char** argv) {
  CLI::App app{"resnet: train ResNet-18 on Fashion-MNIST with minidl"};
  Options o;
  resnet::add_options(app, o);
  try {
    app.parse(argc, argv);
    resnet::check_options(o, app);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    spdlog::set_level(spdlog::level::from_str(o.log_level));
    if (o.threads > 0) minidl::set_num_threads(o.threads);
    examples::install_interrupt_handler();
    const DataSets data = load_data(o);
    if (!o.dump_reference.empty()) {
      resnet::dump_reference(train_config(o, examples::pick_device(o.device)), data.train, o.dump_reference);
      spdlog::info("wrote {} and {}", o.dump_reference, resnet::reference_path(o.dump_reference));
      return 0;
    }
    std::unique_ptr<examples::ClassifierMetricsWriter> metrics;
    if (!o.metrics.empty()) metrics = std::make_unique<examples::ClassifierMetricsWriter>(o.metrics, !o.resume.empty());
    std::vector<RunSummary> runs;
    for (const Device& device : examples::training_devices(o.device, o.compare)) {
      runs.push_back(run(o, device, data, metrics.get()));
    }
    print_summary(runs);
  } catch (const resnet::Interrupted& e) {
    std::fprintf(stderr, "resnet: %s\n", e.what());
    return 130;  // 128 + SIGINT, as a shell reports a process killed by Ctrl-C
  } catch (const minidl::OutOfMemoryError& e) {
    minidl::print_error("resnet", e);
    std::fprintf(stderr, "Try a smaller --batch-size.\n");
    return 1;
  }
  return 0;
}

}  // namespace

// Every other error: its type and message on stderr, exit status 1 (minidl::run_main).
int main(int argc, char** argv) {
  return minidl::run_main("resnet", [&] { return run_program(argc, argv); });
}
