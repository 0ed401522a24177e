// Data-parallel epoch benchmark of the example CNN, measured as ../shared/reference/torch_ddp_bench.py measures
// PyTorch DDP: batch B per GPU, the training set resident on each GPU and split over the ranks, a warm-up
// epoch (cuDNN algorithm search, graph capture), then one timed epoch of (60000 / world) / B steps per rank.
// Rank 0 prints one RESULT line with the images/s of all ranks together.
//   bench_ddp --gpus 1 --batch 256      (world size 1, still through NCCL, like torchrun --nproc_per_node 1)
//   bench_ddp --gpus 2 --batch 256      (starts two ranks itself, like `minidl run --nproc 2 bench_ddp …`)
#include <CLI/CLI.hpp>
#include <minidl/distributed/launcher.h>
#include <minidl/distributed/process_group.h>
#include <minidl/minidl.h>
#include <minidl/run_main.h>

#include <cstdio>

#include "trainer.h"

/// main's body; main runs it under minidl::run_main.
int run_program(int argc, char** argv) {
  CLI::App app{"bench_ddp: data-parallel epoch time of the example CNN"};
  std::string data = "/usr/share/datasets/fashion-mnist", mode = "graph";
  int gpus = 1;
  std::int64_t batch = 256;
  app.add_option("--data", data, "directory with the four IDX files");
  app.add_option("--gpus", gpus, "ranks (one per GPU)")->check(CLI::Range(1, 1024));
  app.add_option("--batch", batch, "batch size per GPU")->check(CLI::Range(1, 1 << 20));
  app.add_option("--mode", mode, "graph (CUDA-graph step) or eager")->check(CLI::IsMember({"graph", "eager"}));
  CLI11_PARSE(app, argc, argv);
  namespace dist = minidl::distributed;
  if (!dist::launched_as_rank() && gpus > 1) {
    dist::LaunchOptions lo;
    lo.nproc = gpus;
    lo.argv = {dist::self_executable()};
    lo.argv.insert(lo.argv.end(), argv + 1, argv + argc);
    return dist::launch(lo);
  }
  auto group = dist::launched_as_rank()
                   ? dist::ProcessGroupNCCL::from_env()
                   : std::make_shared<dist::ProcessGroupNCCL>(
                         dist::DistributedEnv{0, 1, 0, "127.0.0.1", dist::find_free_port()});
  const auto norm = minidl::data::Normalization::fashion_mnist();
  auto train_set = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(data, true, norm));
  auto test_set = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(data, false, norm));
  minidl::manual_seed(0);
  mnist::TrainConfig c;
  c.device = group->device();
  c.batch_size = batch;
  c.progress = false;
  c.drop_last = true;
  c.cuda_graph = mode == "graph";
  c.group = group;
  mnist::EpochStats s;
  {
    mnist::Trainer trainer(c, train_set, test_set);
    trainer.train_epoch(1);  // warm-up
    minidl::cuda::synchronize();
    group->barrier();
    s = trainer.train_epoch(2);  // images/s of all ranks (the trainer sums the sample counts)
  }
  if (group->rank() == 0) {
    std::printf("RESULT framework=minidl ddp world=%d batch_per_gpu=%lld mode=%s epoch_s=%.3f imgs_per_s=%.0f "
                "train_acc=%.4f\n",
                group->size(), static_cast<long long>(batch), mode.c_str(), s.seconds, s.images_per_s, s.accuracy);
    std::fflush(stdout);
  }
  return 0;
}

int main(int argc, char** argv) {
  return minidl::run_main("bench_ddp", [&] { return run_program(argc, argv); });
}
