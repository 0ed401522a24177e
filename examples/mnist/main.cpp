// mnist_train: trains the classic MNIST CNN on MNIST or Fashion-MNIST on the CPU or a GPU, or on both
// (--compare) to measure the speedup. Exit status: 0 success, 1 runtime error, 2 command-line error,
// 130 interrupted by Ctrl-C (after the current step; the last checkpoint stays intact).
#include <CLI/CLI.hpp>
#include <minidl/diagnose.h>
#include <minidl/io/checkpoint.h>
#include <minidl/minidl.h>
#include <minidl/random.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "download.h"
#include "export_logits.h"
#include "interrupt.h"
#include "options.h"
#include "trainer.h"

namespace fs = std::filesystem;
using minidl::Device;

namespace {

using mnist::Options;

bool has_idx_files(const fs::path& dir) {
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                        "t10k-labels-idx1-ubyte"}) {
    if (!fs::exists(dir / f) && !fs::exists(dir / (std::string(f) + ".gz"))) return false;
  }
  return true;
}

std::string find_data_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  for (const char* dir : {"data/mnist", "/usr/share/datasets/fashion-mnist"}) {
    if (has_idx_files(dir)) return dir;
  }
  throw minidl::IOError(
      "no dataset found: looked for the four IDX files (train-images-idx3-ubyte[.gz], ...) in data/mnist and "
      "/usr/share/datasets/fashion-mnist. Install Fashion-MNIST with `sudo apt-get install dataset-fashion-mnist`, "
      "put MNIST's files into data/mnist, or pass --data DIR");
}

/// --device auto: the GPU when usable, else the CPU with one line saying why.
Device pick_device(const std::string& name) {
  if (name == "cpu") return Device(minidl::kCPU);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!minidl::cuda::is_available()) {
      throw minidl::ValueError("--device " + name + ": no usable GPU (run `minidl info` for the reason and the fix)");
    }
    return Device(name);
  }
  if (minidl::cuda::is_available()) return Device(minidl::kCUDA, 0);
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string why = "no usable GPU";
  for (const auto& d : minidl::diagnose(minidl::cuda::versions(), minidl::cuda::devices(),
                                        cvd ? std::optional<std::string>(cvd) : std::nullopt)) {
    if (d.severity != "ok") {
      why = d.problem;
      break;
    }
  }
  spdlog::info("--device auto: training on the CPU ({})", why);
  return Device(minidl::kCPU);
}

minidl::data::Normalization normalization_for(const Options& o, const std::string& dir) {
  if (o.normalization == "auto") return minidl::data::MnistDataset::guess_normalization(dir);
  return minidl::data::Normalization::from_name(o.normalization);
}

/// --download: MNIST into --data (default data/mnist); returns the directory.
std::string download_mnist(const Options& o) {
  const std::string dir = o.data_dir.empty() ? mnist::kDownloadDir : o.data_dir;
  try {
    mnist::download_files(o.download_url, dir, mnist::mnist_files());
  } catch (const minidl::IOError& e) {
    throw minidl::IOError(std::string(e.what()) + "\n--download fetches MNIST from " + o.download_url +
                          ". Without network access, copy train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
                          "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz into " + dir +
                          " by hand, or train on Fashion-MNIST (sudo apt-get install dataset-fashion-mnist) "
                          "without --download");
  }
  return dir;
}

struct RunSummary {
  Device device;
  std::vector<mnist::EpochResult> epochs;
};

RunSummary run(const Options& o, Device device, const std::shared_ptr<minidl::data::MnistDataset>& train_set,
               const std::shared_ptr<minidl::data::MnistDataset>& test_set, mnist::MetricsWriter* metrics) {
  minidl::manual_seed(o.seed);
  mnist::TrainConfig c;
  c.device = device;
  c.epochs = o.epochs;
  c.batch_size = o.batch_size;
  c.lr = o.lr;
  c.momentum = o.momentum;
  c.optimizer = o.optimizer;
  c.seed = o.seed;
  c.progress = !o.no_progress;
  c.stop_requested = mnist::interrupt_requested;
  mnist::Trainer trainer(c, train_set, test_set);
  std::int64_t first_epoch = 1;
  if (!o.resume.empty()) {
    minidl::io::load(*trainer.model(), o.resume);
    const minidl::io::TrainingState st = minidl::io::load_training_state(mnist::state_path(o.resume));
    trainer.optimizer().load_state_dict(st.optimizer);
    minidl::set_rng_state(st.rng);
    first_epoch = st.epoch + 1;
    spdlog::info("resumed from {} after epoch {}", o.resume, st.epoch);
  }
  RunSummary summary{device, {}};
  for (std::int64_t epoch = first_epoch; epoch <= o.epochs; ++epoch) {
    mnist::EpochResult r;
    r.epoch = epoch;
    r.train = trainer.train_epoch(epoch);
    r.test = trainer.evaluate();
    spdlog::info("epoch {} on {}: train loss {:.4f} acc {:.4f} ({:.2f} s, {:.0f} img/s) | test loss {:.4f} acc {:.4f}",
                 epoch, device.str(), r.train.loss, r.train.accuracy, r.train.seconds, r.train.images_per_s,
                 r.test.loss, r.test.accuracy);
    if (metrics) {
      metrics->write(epoch, device.str(), "train", r.train);
      metrics->write(epoch, device.str(), "test", r.test);
    }
    if (!o.save.empty()) {
      minidl::io::save(*trainer.model(), o.save);
      minidl::io::TrainingState st;
      st.epoch = epoch;
      st.optimizer = trainer.optimizer().state_dict();
      st.rng = minidl::get_rng_state();
      minidl::io::save_training_state(mnist::state_path(o.save), st);
    }
    summary.epochs.push_back(r);
  }
  if (!o.export_logits.empty()) {
    mnist::export_logits(trainer.model(), *test_set, 16, o.export_logits);
    spdlog::info("wrote test images and logits to {}", o.export_logits);
  }
  return summary;
}

void print_summary(const std::vector<RunSummary>& runs) {
  std::printf("\n%-8s %10s %12s %10s %10s\n", "device", "epoch s", "images/s", "test acc", "speedup");
  double cpu_seconds = 0;
  for (const auto& r : runs) {
    if (r.epochs.empty()) continue;
    double secs = 0, ips = 0;
    for (const auto& e : r.epochs) {
      secs += e.train.seconds;
      ips += e.train.images_per_s;
    }
    secs /= static_cast<double>(r.epochs.size());
    ips /= static_cast<double>(r.epochs.size());
    if (r.device.is_cpu()) cpu_seconds = secs;
    const std::string speedup = cpu_seconds > 0 && r.device.is_cuda() ? std::to_string(cpu_seconds / secs) + "x" : "";
    std::printf("%-8s %10.3f %12.0f %10.4f %10s\n", r.device.str().c_str(), secs, ips,
                r.epochs.back().test.accuracy, speedup.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mnist_train: train the classic MNIST CNN with minidl"};
  Options o;
  mnist::add_options(app, o);
  try {
    app.parse(argc, argv);
    mnist::check_options(o);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    spdlog::set_level(spdlog::level::from_str(o.log_level));
    if (o.threads > 0) minidl::set_num_threads(o.threads);
    minidl::set_deterministic(o.deterministic);
    minidl::autograd::set_detect_anomaly(o.detect_anomaly);
    mnist::install_interrupt_handler();
    if (o.download) o.data_dir = download_mnist(o);
    const std::string dir = find_data_dir(o.data_dir);
    const auto norm = normalization_for(o, dir);
    auto train_set = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(dir, true, norm));
    auto test_set = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(dir, false, norm));
    if (o.train_limit > 0) train_set->limit(o.train_limit);
    if (o.test_limit > 0) test_set->limit(o.test_limit);
    spdlog::info("data: {} ({} train, {} test images; normalisation mean {} std {}), {} CPU threads", dir,
                 train_set->size(), test_set->size(), norm.mean, norm.std, minidl::get_num_threads());

    std::unique_ptr<mnist::MetricsWriter> metrics;
    if (!o.metrics.empty()) metrics = std::make_unique<mnist::MetricsWriter>(o.metrics, !o.resume.empty());

    std::vector<RunSummary> runs;
    if (o.compare) {
      if (!minidl::cuda::is_available()) {
        spdlog::warn("--compare: no usable GPU (see `minidl info`); training on the CPU only");
      }
      runs.push_back(run(o, Device(minidl::kCPU), train_set, test_set, metrics.get()));
      if (minidl::cuda::is_available()) runs.push_back(run(o, Device(minidl::kCUDA, 0), train_set, test_set, metrics.get()));
    } else {
      runs.push_back(run(o, pick_device(o.device), train_set, test_set, metrics.get()));
    }
    print_summary(runs);
  } catch (const mnist::Interrupted& e) {
    std::fprintf(stderr, "mnist_train: %s\n", e.what());
    return 130;  // 128 + SIGINT, as a shell reports a process killed by Ctrl-C
  } catch (const minidl::OutOfMemoryError& e) {
    std::fprintf(stderr, "mnist_train: error: %s\nTry a smaller --batch-size.\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnist_train: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
