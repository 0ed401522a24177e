#include "options.h"

#include <filesystem>

#include "output_file.h"
#include "trainer.h"

namespace fs = std::filesystem;

namespace dcgan {

void add_options(CLI::App& app, Options& o) {
  const CLI::Validator out_file = examples::output_file();
  app.add_option("--data", o.data, "directory with Fashion-MNIST's IDX files (train-images-idx3-ubyte[.gz], ...)")
      ->capture_default_str();
  app.add_flag("--synthetic", o.synthetic, "train on random images instead (speed runs)");
  app.add_option("--train-limit", o.train_limit,
                 "use only the first N training images (N random ones with "
                 "--synthetic; default: 60000)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  app.add_option("--epochs", o.epochs, "training epochs")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "images per step")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "Adam's learning rate, both networks")
      ->check(CLI::Range(0.0, 1e3))
      ->capture_default_str();
  app.add_option("--beta1", o.beta1, "Adam's beta1")->check(CLI::Range(0.0, 0.999999))->capture_default_str();
  app.add_option("--beta2", o.beta2, "Adam's beta2")->check(CLI::Range(0.0, 0.999999))->capture_default_str();
  app.add_option("--latent", o.latent, "size of the generator's latent vector z")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (weights, data order, latent vectors)")->capture_default_str();
  app.add_option("--device", o.device, "cpu, cuda[:N] or auto (the GPU if usable)")
      ->check(CLI::IsMember(
          {"auto", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6", "cuda:7"}))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (default: all hardware threads)")->check(CLI::Range(1, 4096));
  app.add_flag("--compare", o.compare, "train on the CPU and then on the GPU with the same seed and compare speeds");
  app.add_option("--samples-dir", o.samples_dir,
                 "write a PNG grid of 64 samples from a fixed latent batch here after every epoch (epoch_001.png, "
                 "...; with --compare epoch_001.cpu.png and epoch_001.cuda.png); created if missing; \"\" for none")
      ->capture_default_str();
  app.add_option("--metrics", o.metrics,
                 "write CSV (epoch,iter,loss_d,loss_g,d_x,d_g_z1,d_g_z2,ms_per_step,elapsed_s) every --log-every "
                 "steps; with --compare, one file per device (FILE with .cpu / .cuda before its extension)")
      ->check(out_file);
  app.add_option("--log-every", o.log_every, "steps per metrics row")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--save", o.save,
                 "write a checkpoint after every epoch: FILE (safetensors, both networks) and FILE.state (the Adam "
                 "states, step count, RNG state)")
      ->check(out_file);
  app.add_option("--resume", o.resume, "continue from a checkpoint written by --save (same --latent and --seed)")
      ->check(CLI::ExistingFile);
  app.add_option("--dump-reference", o.dump_reference,
                 "write what examples/dcgan/reference/check_against_pytorch.py compares (the initial weights, one "
                 "step's batch, latent vectors, statistics, gradients and updated weights) and exit")
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
  if (!o.samples_dir.empty() && fs::exists(o.samples_dir) && !fs::is_directory(o.samples_dir)) {
    throw CLI::ValidationError("--samples-dir", o.samples_dir + " exists and is not a directory");
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

}  // namespace dcgan
