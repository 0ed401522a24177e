// mnist_train: trains the classic MNIST CNN on MNIST or Fashion-MNIST on the CPU or a GPU, or on both
// (--compare) to measure the speedup, or data-parallel on several GPUs (--gpus N, or started by `minidl run`
// / torchrun as one rank). Exit status: 0 success, 1 runtime error, 2 command-line error,
// 130 interrupted by Ctrl-C (after the current step; the last checkpoint stays intact).
#include <CLI/CLI.hpp>
#include <minidl/distributed/launcher.h>
#include <minidl/distributed/process_group.h>
#include <minidl/io/checkpoint.h>
#include <minidl/minidl.h>
#include <minidl/random.h>
#include <minidl/run_main.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "classifier_metrics.h"
#include "device_choice.h"
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

/// --normalization: by name, or (auto) from the training images' statistics, logging what was chosen and why.
minidl::data::Normalization normalization_for(const Options& o, const std::string& dir) {
  if (o.normalization != "auto") return minidl::data::Normalization::from_name(o.normalization);
  const minidl::data::NormalizationChoice c = minidl::data::MnistDataset::choose_normalization(dir);
  spdlog::info("--normalization auto: {} statistics (mean {}, std {}): {}", c.dataset, c.normalization.mean,
               c.normalization.std, c.reason);
  return c.normalization;
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

/// --gpus N outside a launcher: runs N copies of this program as the ranks of a job and returns the
/// launcher's exit status.
int relaunch_as_ranks(const Options& o, int argc, char** argv) {
  const int visible = minidl::cuda::device_count();
  if (visible < o.gpus) {
    std::fprintf(stderr, "mnist_train: error: --gpus %d but only %d GPU(s) visible (see `minidl info`)\n", o.gpus,
                 visible);
    return 1;
  }
  minidl::distributed::LaunchOptions lo;
  lo.nproc = o.gpus;
  lo.argv = {minidl::distributed::self_executable()};
  lo.argv.insert(lo.argv.end(), argv + 1, argv + argc);
  return minidl::distributed::launch(lo);
}

RunSummary run(const Options& o, Device device, const std::shared_ptr<minidl::data::MnistDataset>& train_set,
               const std::shared_ptr<minidl::data::MnistDataset>& test_set, examples::ClassifierMetricsWriter* metrics,
               const std::shared_ptr<minidl::distributed::ProcessGroup>& group = nullptr) {
  const bool leader = !group || group->rank() == 0;  // the one rank that writes files
  minidl::manual_seed(o.seed);
  mnist::TrainConfig c;
  c.device = device;
  c.group = group;
  c.epochs = o.epochs;
  c.batch_size = o.batch_size;
  c.lr = o.lr;
  c.momentum = o.momentum;
  c.optimizer = o.optimizer;
  c.seed = o.seed;
  c.progress = !o.no_progress;
  c.stop_requested = examples::interrupt_requested;
  c.amp = examples::parse_amp(o.amp);
  mnist::Trainer trainer(c, train_set, test_set);
  spdlog::info("training on {}: --amp {} ({})", device.str(), o.amp,
               !c.amp ? "float32"
                      : fmt::format("forward pass and loss under {} autocast to {}, float32 parameters{}",
                                    device.type() == minidl::kCUDA ? "CUDA" : "CPU", minidl::dtype_name(*c.amp),
                                    trainer.grad_scaler()
                                        ? fmt::format(", GradScaler from scale {}", trainer.grad_scaler()->get_scale())
                                        : std::string()));
  std::int64_t first_epoch = 1;
  if (!o.resume.empty()) {
    minidl::io::load(*trainer.model(), o.resume);
    const minidl::io::TrainingState st = minidl::io::load_training_state(mnist::state_path(o.resume));
    trainer.optimizer().load_state_dict(st.optimizer);
    minidl::set_rng_state(st.rng);
    if (trainer.grad_scaler()) examples::load_grad_scaler(*trainer.grad_scaler(), st.extra);
    first_epoch = st.epoch + 1;
    spdlog::info("resumed from {} after epoch {}", o.resume, st.epoch);
  }
  RunSummary summary{device, {}};
  for (std::int64_t epoch = first_epoch; epoch <= o.epochs; ++epoch) {
    mnist::EpochResult r;
    r.epoch = epoch;
    r.train = trainer.train_epoch(epoch);
    r.test = trainer.evaluate();
    spdlog::info(
        "epoch {} on {}: train loss {:.4f} acc {:.4f} ({:.2f} s, {:.0f} img/s{}) | test loss {:.4f} "
        "acc {:.4f}{}",
        epoch, device.str(), r.train.loss, r.train.accuracy, r.train.seconds, r.train.images_per_s,
        r.train.timing.one_time_steps > 0 ? fmt::format("; {:.2f} s of it one-time work in {} step(s)",
                                                        r.train.timing.one_time_seconds, r.train.timing.one_time_steps)
                                          : std::string(),
        r.test.loss, r.test.accuracy,
        trainer.grad_scaler() ? fmt::format(" | grad scale {}", trainer.grad_scaler()->get_scale()) : std::string());
    if (metrics && leader) {
      const auto write = [&](const char* split, const mnist::EpochStats& s) {
        metrics->write(epoch, device.str(), split, s.loss, s.accuracy, s.seconds, s.images_per_s);
      };
      write("train", r.train);
      write("test", r.test);
    }
    if (!o.save.empty() && leader) {
      minidl::io::save(*trainer.model(), o.save);
      minidl::io::TrainingState st;
      st.epoch = epoch;
      st.optimizer = trainer.optimizer().state_dict();
      st.rng = minidl::get_rng_state();
      if (trainer.grad_scaler()) examples::save_grad_scaler(*trainer.grad_scaler(), st.extra);
      minidl::io::save_training_state(mnist::state_path(o.save), st);
    }
    summary.epochs.push_back(r);
  }
  if (!o.export_logits.empty() && leader) {
    mnist::export_logits(trainer.model(), *test_set, 16, o.export_logits);
    spdlog::info("wrote test images and logits to {}", o.export_logits);
  }
  return summary;
}

/// The table of the runs: the steady-state epoch time (the first epoch's one-time work, such as the algorithm
/// search, warm-up and graph capture, taken out: see examples/common/epoch_clock.h), and that one-time cost on a
/// line of its own below.
void print_summary(const std::vector<RunSummary>& runs) {
  std::printf("\n%-8s %10s %12s %10s %10s\n", "device", "epoch s", "images/s", "test acc", "speedup");
  double cpu_seconds = 0;
  std::vector<std::string> one_time_lines;
  for (const auto& r : runs) {
    if (r.epochs.empty()) continue;
    double secs = 0, one_time = 0, images = 0;
    std::int64_t one_time_steps = 0;
    bool measured = true;
    for (const auto& e : r.epochs) {
      secs += e.train.timing.steady_seconds;
      one_time += e.train.timing.one_time_seconds;
      one_time_steps += e.train.timing.one_time_steps;
      images += e.train.images_per_s * e.train.seconds;
      measured = measured && e.train.timing.steady_measured;
    }
    const double ips = images / secs;
    secs /= static_cast<double>(r.epochs.size());
    if (r.device.is_cpu()) cpu_seconds = secs;
    const std::string speedup = cpu_seconds > 0 && r.device.is_cuda() ? std::to_string(cpu_seconds / secs) + "x" : "";
    std::printf("%-8s %10.3f %12.0f %10.4f %10s\n", r.device.str().c_str(), secs, ips,
                r.epochs.back().test.accuracy, speedup.c_str());
    one_time_lines.push_back(
        measured ? fmt::format("{}: one-time cost {:.3f} s in {} step(s) ({}), not in the epoch time above",
                               r.device.str(), one_time, one_time_steps,
                               r.device.is_cuda() ? "algorithm search, warm-up steps, CUDA-graph capture, first step "
                                                    "of each batch size"
                                                  : "first step of each batch size")
                 : fmt::format("{}: every step did one-time work, so the epoch time above includes it (more data "
                               "or epochs give a steady-state time)",
                               r.device.str()));
  }
  for (const std::string& line : one_time_lines) std::printf("%s\n", line.c_str());
}

/// main's body.
int run_program(int argc, char** argv) {
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
  if (o.gpus > 1 && !minidl::distributed::launched_as_rank()) return relaunch_as_ranks(o, argc, argv);

  try {
    spdlog::set_level(spdlog::level::from_str(o.log_level));
    if (o.threads > 0) minidl::set_num_threads(o.threads);
    minidl::set_deterministic(o.deterministic);
    minidl::autograd::set_detect_anomaly(o.detect_anomaly);
    examples::install_interrupt_handler();
    // One rank of a data-parallel job: GPU LOCAL_RANK; rank 0 alone logs, shows progress and writes files.
    std::shared_ptr<minidl::distributed::ProcessGroup> group;
    if (minidl::distributed::launched_as_rank()) {
      if (o.compare) throw minidl::ValueError("--compare cannot run as a rank of a distributed job");
      group = minidl::distributed::ProcessGroupNCCL::from_env();
      if (o.gpus != 1 && o.gpus != group->size()) {
        throw minidl::ValueError("--gpus " + std::to_string(o.gpus) + " but the launcher started " +
                                 std::to_string(group->size()) + " ranks (WORLD_SIZE)");
      }
      if (group->rank() != 0) {
        spdlog::set_level(spdlog::level::warn);
        o.no_progress = true;
      }
    }
    if (o.download) o.data_dir = download_mnist(o);
    const std::string dir = find_data_dir(o.data_dir);
    const auto norm = normalization_for(o, dir);
    auto train_set = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(dir, true, norm));
    auto test_set = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(dir, false, norm));
    mnist::require_input_size(*train_set);
    mnist::require_input_size(*test_set);
    if (o.train_limit > 0) train_set->limit(o.train_limit);
    if (o.test_limit > 0) test_set->limit(o.test_limit);
    spdlog::info("data: {} ({} train, {} test images; normalisation mean {} std {}), {} CPU threads", dir,
                 train_set->size(), test_set->size(), norm.mean, norm.std, minidl::get_num_threads());

    std::unique_ptr<examples::ClassifierMetricsWriter> metrics;
    const bool leader = !group || group->rank() == 0;
    if (!o.metrics.empty() && leader) metrics = std::make_unique<examples::ClassifierMetricsWriter>(o.metrics, !o.resume.empty());

    std::vector<RunSummary> runs;
    if (group) {
      runs.push_back(run(o, group->device(), train_set, test_set, metrics.get(), group));
    } else {
      for (const Device& device : examples::training_devices(o.device, o.compare)) {
        runs.push_back(run(o, device, train_set, test_set, metrics.get()));
      }
    }
    if (leader) print_summary(runs);
  } catch (const mnist::Interrupted& e) {
    std::fprintf(stderr, "mnist_train: %s\n", e.what());
    return 130;  // 128 + SIGINT, as a shell reports a process killed by Ctrl-C
  } catch (const minidl::OutOfMemoryError& e) {
    minidl::print_error("mnist_train", e);
    std::fprintf(stderr, "Try a smaller --batch-size.\n");
    return 1;
  }
  return 0;
}

}  // namespace

// Every other error: its type and message on stderr, exit status 1 (minidl::run_main).
int main(int argc, char** argv) {
  return minidl::run_main("mnist_train", [&] { return run_program(argc, argv); });
}
