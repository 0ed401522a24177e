#include "options.h"

#include <filesystem>

#include "model.h"
#include "output_file.h"
#include "trainer.h"

namespace fs = std::filesystem;

namespace resnet {

void add_options(CLI::App& app, Options& o) {
  const CLI::Validator out_file = examples::output_file();
  app.add_option("--data", o.data, "directory with Fashion-MNIST's IDX files (train-images-idx3-ubyte[.gz], ...)")
      ->capture_default_str();
  app.add_flag("--synthetic", o.synthetic, "train and test on random images and labels instead (speed runs)");
  app.add_option("--train-limit", o.train_limit,
                 "use only the first N training images (N random ones with --synthetic; default: 60000)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  app.add_option("--test-limit", o.test_limit,
                 "evaluate only the first N test images (N random ones with --synthetic; default: all 10000)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  app.add_option("--epochs", o.epochs, "training epochs (OneCycleLR's cycle spans them all)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "images per step")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "OneCycleLR's peak learning rate (SGD, Nesterov momentum 0.9, weight decay 5e-4)")
      ->check(CLI::Range(1e-8, 1e3))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (weights, data order, augmentation)")->capture_default_str();
  app.add_option("--width", o.width, "channels of the stem; the stages have 1, 2, 4, 8 times as many")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}))
      ->capture_default_str();
  app.add_option("--blocks", o.blocks, "BasicBlocks in each of the four stages (ResNet-18: 2,2,2,2)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              ModelConfig::parse_blocks(text);
            } catch (const minidl::ValueError& e) {
              return e.what();
            }
            return "";
          },
          "A,B,C,D"))
      ->capture_default_str();
  app.add_flag("--no-augment", o.no_augment, "train without the random crop and flip");
  app.add_option("--device", o.device, "cpu, cuda[:N] or auto (the GPU if usable)")
      ->check(CLI::IsMember(
          {"auto", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6", "cuda:7"}))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (default: all hardware threads)")->check(CLI::Range(1, 4096));
  app.add_option("--amp", o.amp,
                 "mixed precision: the forward pass and the loss under autocast to bfloat16 or float16 (with a "
                 "GradScaler), parameters float32")
      ->check(CLI::IsMember({"bf16", "fp16", "off"}))
      ->capture_default_str();
  app.add_flag("--compare", o.compare, "train on the CPU and then on the GPU with the same seed and compare speeds");
  app.add_flag("--no-cuda-graph", o.no_cuda_graph, "GPU: run every step eagerly instead of replaying a CUDA graph");
  app.add_option("--metrics", o.metrics,
                 "write CSV (epoch,device,split,loss,accuracy,seconds,images_per_s), a train and a test row per "
                 "epoch and device, as mnist_train (scripts/plot_metrics.py draws it)")
      ->check(out_file);
  app.add_option("--save", o.save,
                 "write a checkpoint after every epoch: FILE (safetensors, torchvision's parameter names) and "
                 "FILE.state (SGD's momentum, the scheduler, step count, RNG state)")
      ->check(out_file);
  app.add_option("--resume", o.resume,
                 "continue from a checkpoint written by --save (same model, --seed, --lr, --epochs, --batch-size "
                 "and data)")
      ->check(CLI::ExistingFile);
  app.add_option("--dump-reference", o.dump_reference,
                 "write what examples/resnet/reference/check_against_pytorch.py compares (the initial weights, one "
                 "step's batch, loss, gradients and updated weights) and exit")
      ->check(out_file);
  app.add_flag("--no-progress", o.no_progress, "no progress bar or progress lines");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.footer("Exit status: 0 success, 1 runtime error, 2 command-line error, 130 interrupted (Ctrl-C).");
}

void check_options(const Options& o, const CLI::App& app) {
  if (o.synthetic && app.count("--data") > 0)
    throw CLI::ValidationError("--synthetic", "cannot be combined with --data");
  if (!o.synthetic && !fs::is_directory(o.data)) {
    throw CLI::ValidationError("--data", o.data +
                                             " is not a directory (install Fashion-MNIST with `sudo apt-get install "
                                             "dataset-fashion-mnist`, pass --data DIR, or train on --synthetic data)");
  }
  if (!o.resume.empty()) {
    if (o.compare) throw CLI::ValidationError("--resume", "cannot be combined with --compare");
    if (!fs::is_regular_file(state_path(o.resume))) {
      throw CLI::ValidationError("--resume", state_path(o.resume) + " (the training state written with " + o.resume +
                                                 " by --save) does not exist");
    }
  }
  if (!o.dump_reference.empty() && o.compare) {
    throw CLI::ValidationError("--dump-reference", "cannot be combined with --compare");
  }
}

}  // namespace resnet
