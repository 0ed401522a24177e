// Epoch benchmark of the example CNN, measured the way ../shared/reference's PyTorch script and
// bench/torch_reference.py measure: a warm-up epoch first (cuDNN algorithm search, graph capture), then one
// timed epoch of n // batch steps (drop_last) with the data resident on the device, no evaluation inside
// the timing. --amp bf16/fp16 trains under autocast as mnist_train --amp does (examples/common/classifier_step.h).
// Prints one RESULT line per configuration; bench/compare.py turns them into a table.
#include <minidl/minidl.h>
#include <minidl/run_main.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>

#include "trainer.h"

namespace {

/// Peak GPU memory of one training step, measured as ../shared/reference/torch_mem.py measures PyTorch's:
/// model, optimizer and a random batch on the device (no dataset), three warm-up steps, then the peak of
/// `allocated` over one step — for the graph mode, over the capture, which holds every buffer a replay uses. The
/// step is the Trainer's (examples::train_step), under --amp's autocast.
double step_peak_mb(const minidl::Device& dev, std::int64_t batch, bool graph,
                    const std::optional<minidl::DType>& amp) {
  minidl::manual_seed(0);
  mnist::Net net;
  net->to(dev);
  minidl::optim::SGD opt(net->parameters(), minidl::optim::SGDOptions(0.05).momentum(0.9));
  std::unique_ptr<minidl::amp::GradScaler> scaler;
  if (examples::needs_grad_scaler(amp)) scaler = std::make_unique<minidl::amp::GradScaler>();
  const minidl::Tensor x = minidl::randn({batch, 1, 28, 28}, dev);
  const minidl::Tensor y = (minidl::rand({batch}, dev) * 10.0).to(minidl::kInt64);
  auto step = [&] { examples::train_step(*net, opt, scaler.get(), amp, dev, x, y); };
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    step();
  }
  opt.zero_grad();
  minidl::cuda::synchronize();
  minidl::cuda::reset_peak_memory_stats(dev.index());
  minidl::cuda::CUDAGraph g;
  if (graph) g.capture_begin();
  step();
  if (graph) g.capture_end();
  minidl::cuda::synchronize();
  return static_cast<double>(minidl::cuda::memory_stats(dev.index()).peak_allocated) / (1 << 20);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}
}  // namespace

/// main's body; main runs it under minidl::run_main.
int run_program(int argc, char** argv) {
  CLI::App app{"bench_mnist_epoch: epoch time of the example CNN"};
  std::string data = "/usr/share/datasets/fashion-mnist", device = "cuda", batches = "64,256", modes = "graph",
              tf32 = "on", amps = "off";
  int threads = 0;
  std::uint64_t seed = 0;
  std::int64_t train_limit = 0;
  bool profile = false, show_algorithms = false;
  app.add_option("--data", data, "directory with the four IDX files");
  app.add_option("--device", device, "cpu or cuda");
  app.add_option("--batches", batches, "comma-separated batch sizes");
  app.add_option("--modes", modes, "comma-separated: eager (no CUDA graph), graph");
  app.add_option("--tf32", tf32, "comma-separated: on, off (TF32 in cuDNN convolutions)");
  app.add_option("--amp", amps,
                 "comma-separated: off, bf16, fp16 (autocast of the forward pass and loss; fp16 with a "
                 "GradScaler)")
      ->check([](const std::string& list) {
        for (const std::string& a : split(list)) {
          if (a != "off" && a != "bf16" && a != "fp16") return "\"" + a + "\" is not off, bf16 or fp16";
        }
        return std::string();
      });
  app.add_option("--seed", seed, "random seed of the weights, dropout and shuffling");
  app.add_option("--threads", threads, "CPU threads");
  app.add_option("--train-limit", train_limit, "use only the first N training images (CPU runs)");
  app.add_flag("--profile", profile,
               "bracket each timed epoch with cuda::profiler_start/stop, for `ncu --profile-from-start off` or "
               "`nsys --capture-range=cudaProfilerApi`: the warm-up epoch (algorithm search, capture) is not profiled "
               "and its timings stay undisturbed");
  app.add_flag("--show-algorithms", show_algorithms,
               "print the convolution algorithm search's choices (lines starting with CONV) at the end");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) minidl::set_num_threads(threads);

  const auto norm = minidl::data::Normalization::fashion_mnist();
  auto train_set = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(data, true, norm));
  auto test_set = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(data, false, norm));
  if (train_limit > 0) train_set->limit(train_limit);
  const minidl::Device dev(device);
  std::printf("minidl %s device %s%s threads %d\n", MINIDL_VERSION_STRING, dev.str().c_str(),
              dev.is_cuda() ? (" " + minidl::cuda::device_name(dev.index())).c_str() : "", minidl::get_num_threads());
  for (const std::string& t : split(tf32)) {
    minidl::cuda::set_allow_tf32(t == "on", false);
    for (const std::string& amp : split(amps)) {
      for (const std::string& mode : split(modes)) {
        for (const std::string& b : split(batches)) {
          minidl::manual_seed(seed);
          mnist::TrainConfig c;
          c.device = dev;
          c.seed = seed;
          c.amp = examples::parse_amp(amp);
          c.batch_size = std::stoll(b);
          c.progress = false;
          c.step_metrics = false;  // the same work as PyTorch's reference step
          c.drop_last = true;
          c.cuda_graph = mode == "graph";
          const bool cuda = dev.is_cuda();
          mnist::EpochStats s, test;
          minidl::cuda::MemoryStats before, after;
          std::size_t graph_nodes = 0;
          {
            mnist::Trainer trainer(c, train_set, test_set);
            trainer.train_epoch(1);  // warm-up: algorithm search, capture
            if (cuda) {
              minidl::cuda::synchronize();
              minidl::cuda::reset_peak_memory_stats(dev.index());
              before = minidl::cuda::memory_stats(dev.index());
            }
            if (cuda && profile) minidl::cuda::profiler_start();
            s = trainer.train_epoch(2);
            if (cuda && profile) minidl::cuda::profiler_stop();
            if (cuda) after = minidl::cuda::memory_stats(dev.index());
            test = trainer.evaluate();
            graph_nodes = trainer.graph_nodes();
          }  // the trainer (and its resident dataset) is gone before the step-memory measurement
          const double step_mb = cuda ? step_peak_mb(dev, c.batch_size, c.cuda_graph, c.amp) : 0.0;
          const std::int64_t steps = train_set->size() / c.batch_size;
          char line[512];
          std::snprintf(
              line, sizeof line,
              "RESULT framework=minidl device=%s mode=%s batch=%s tf32=%s amp=%s epoch_s=%.3f imgs_per_s=%.0f "
              "step_us=%.1f graph_nodes=%zu peak_mb=%.1f step_peak_mb=%.1f cuda_mallocs_in_epoch=%zu test_acc=%.4f",
              dev.str().c_str(), mode.c_str(), b.c_str(), t.c_str(), amp.c_str(), s.seconds, s.images_per_s,
              1e6 * s.seconds / static_cast<double>(steps), graph_nodes,
              static_cast<double>(after.peak_allocated) / (1 << 20), step_mb,
              after.num_device_allocs - before.num_device_allocs, test.accuracy);
          std::printf("%s\n", line);
          std::fflush(stdout);
        }
      }
    }
  }
  if (show_algorithms) {
    for (const std::string& choice : minidl::cuda::conv2d_algorithm_choices()) std::printf("CONV %s\n", choice.c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  return minidl::run_main("bench_mnist_epoch", [&] { return run_program(argc, argv); });
}
