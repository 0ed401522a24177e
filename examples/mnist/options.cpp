#include "options.h"

#include <filesystem>

#include "http_client.h"
#include "output_file.h"
#include "minidl/distributed/process_group.h"

namespace fs = std::filesystem;

namespace mnist {

namespace {
const CLI::Validator kOutputFile = examples::output_file();
}  // namespace

void add_options(CLI::App& app, Options& o) {
  app.add_option("--data", o.data_dir, "directory with the four IDX files (.gz or raw); default: data/mnist if "
                                       "present, else /usr/share/datasets/fashion-mnist");
  app.add_option("--device", o.device, "cpu, cuda[:N] or auto (the GPU if usable)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5",
                             "cuda:6", "cuda:7"}));
  app.add_option("--gpus", o.gpus,
                 "train data-parallel on N GPUs: one process per GPU (started like `minidl run --nproc N`), "
                 "--batch-size per GPU, gradients averaged with NCCL; only rank 0 prints and writes files")
      ->check(CLI::Range(1, 1024));
  app.add_option("--epochs", o.epochs, "training epochs")->check(CLI::Range(1, 100000));
  app.add_option("--batch-size", o.batch_size, "training batch size")->check(CLI::Range(1, 1 << 20));
  app.add_option("--lr", o.lr, "learning rate")->check(CLI::Range(0.0, 1e6));
  app.add_option("--optimizer", o.optimizer, "sgd, adam, adamw or adadelta")
      ->check(CLI::IsMember({"sgd", "adam", "adamw", "adadelta"}));
  app.add_option("--amp", o.amp,
                 "mixed precision: bf16 or fp16 autocast for the forward pass and loss (float32 parameters; fp16 "
                 "with a GradScaler), or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "bf16", "fp16"}));
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", o.seed, "random seed (weights, shuffling, dropout)");
  app.add_option("--threads", o.threads, "CPU threads (default: all hardware threads)")->check(CLI::Range(1, 4096));
  app.add_option("--train-limit", o.train_limit, "use only the first N training images")->check(CLI::Range(1, 1 << 30));
  app.add_option("--test-limit", o.test_limit, "use only the first N test images")->check(CLI::Range(1, 1 << 30));
  app.add_option("--normalization", o.normalization,
                 "auto (from the training images' statistics, logged), mnist or fashion-mnist")
      ->check(CLI::IsMember({"auto", "mnist", "fashion-mnist"}));
  app.add_option("--save", o.save, "write a checkpoint (safetensors) after every epoch, and FILE.state beside it")
      ->check(kOutputFile);
  app.add_option("--resume", o.resume, "continue from a checkpoint written by --save")->check(CLI::ExistingFile);
  app.add_option("--metrics", o.metrics, "write per-epoch metrics as CSV")->check(kOutputFile);
  app.add_option("--export-logits", o.export_logits,
                 "after training, write the first 16 test images and the model's logits for them (safetensors, "
                 "for tests/interop/torch_logits.py)")
      ->check(kOutputFile);
  auto* download = app.add_flag("--download", o.download,
                                "fetch MNIST into --data DIR (default data/mnist) first, checking MD5s; files "
                                "already there with the right MD5 are kept");
  app.add_option("--download-url", o.download_url, "mirror for --download (http:// or https://)")
      ->capture_default_str()
      ->needs(download);
  app.add_flag("--compare", o.compare, "train on the CPU and on the GPU with the same seed and compare");
  app.add_flag("--deterministic", o.deterministic, "only deterministic algorithms (bitwise-reproducible GPU runs)");
  app.add_flag("--detect-anomaly", o.detect_anomaly,
               "check every op's outputs and gradients for NaN/Inf and name the first op that produces one (slow)");
  app.add_flag("--no-progress", o.no_progress, "no progress bar or progress lines");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.footer("Exit status: 0 success, 1 runtime error, 2 command-line error, 130 interrupted (Ctrl-C).");
}

void check_options(const Options& o) {
  std::error_code ec;
  if (!o.data_dir.empty()) {
    if (o.download && fs::exists(o.data_dir, ec) && !fs::is_directory(o.data_dir, ec)) {
      throw CLI::ValidationError("--data", o.data_dir + " exists and is not a directory");
    }
    if (!o.download && !fs::is_directory(o.data_dir, ec)) {
      throw CLI::ValidationError("--data", o.data_dir + (fs::exists(o.data_dir, ec) ? " is not a directory"
                                                                                     : " does not exist"));
    }
  }
  if (o.download) {
    try {
      parse_url(o.download_url);
    } catch (const std::exception& e) {
      throw CLI::ValidationError("--download-url", e.what());
    }
  }
  if (o.gpus > 1) {
    if (!minidl::distributed::nccl_available()) {
      throw CLI::ValidationError("--gpus", "--gpus N>1 needs minidl built with NCCL (this build has no NCCL)");
    }
    if (o.compare) throw CLI::ValidationError("--gpus", "cannot be combined with --compare");
    if (o.device == "cpu") throw CLI::ValidationError("--gpus", "cannot be combined with --device cpu");
  }
  if (!o.resume.empty()) {
    if (o.compare) throw CLI::ValidationError("--resume", "cannot be combined with --compare");
    if (!fs::is_regular_file(state_path(o.resume), ec)) {
      throw CLI::ValidationError("--resume", state_path(o.resume) + " (the training state written with " + o.resume +
                                                 " by --save) does not exist");
    }
  }
}

}  // namespace mnist
