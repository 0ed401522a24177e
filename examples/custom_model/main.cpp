// custom_model: trains the small residual network of resnet.h on Fashion-MNIST with AdamW and a cosine
// learning-rate schedule, on the CPU or a GPU, and prints the test accuracy after every epoch.
// Exit status: 0 success, 1 runtime error, 2 command-line error.
#include <CLI/CLI.hpp>
#include <minidl/amp/grad_scaler.h>
#include <minidl/autocast.h>
#include <minidl/minidl.h>
#include <minidl/run_main.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "resnet.h"

namespace {

using minidl::Device;
using minidl::Tensor;
namespace data = minidl::data;
namespace F = minidl::nn::functional;

struct Options {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string device = "auto";
  std::string amp = "off";  ///< mixed precision: bf16, fp16 or off
  std::int64_t epochs = 10, batch_size = 128, train_limit = 0, width = 16, blocks = 1;
  double lr = 3e-3, weight_decay = 5e-2;
  std::uint64_t seed = 1;
  int threads = 0;
};

Device pick_device(const std::string& name) {
  if (name == "auto") return minidl::cuda::is_available() ? Device(minidl::kCUDA, 0) : Device(minidl::kCPU);
  const Device device(name);
  if (device.is_cuda() && !minidl::cuda::is_available()) {
    throw minidl::ValueError("--device " + name + ": no usable GPU (run `minidl info` for the reason and the fix)");
  }
  return device;
}

/// --amp's autocast dtype; none for float32 training.
std::optional<minidl::DType> amp_dtype(const std::string& amp) {
  if (amp == "bf16") return minidl::kBFloat16;
  if (amp == "fp16") return minidl::kFloat16;
  return std::nullopt;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

data::DataLoaderOptions loader_options(const Options& o, Device device, std::int64_t batch_size, bool train) {
  // On a GPU the whole set lives on the device and batches are gathered there (no per-batch upload).
  return data::DataLoaderOptions()
      .set_batch_size(batch_size)
      .set_shuffle(train)
      .set_seed(o.seed)
      .set_device(device)
      .set_device_resident(device.is_cuda());
}

/// Fraction of the test set classified correctly, with BatchNorm's running statistics and no graph, under the
/// training's autocast (`amp`, none: float32).
double evaluate(custom_model::ResNet& model, data::DataLoader& loader, Device device,
                std::optional<minidl::DType> amp) {
  model->eval();
  minidl::NoGradGuard no_grad;
  Tensor correct;
  std::int64_t seen = 0;
  for (data::Batch& batch : loader.epoch(0)) {
    Tensor logits;
    {
      minidl::autocast::AutocastGuard autocast(device.type(), amp, amp.has_value());
      logits = model(batch.data);
    }
    const Tensor predicted = minidl::argmax(logits, 1);
    const Tensor hits = minidl::eq(predicted.to(minidl::kFloat32), batch.target.to(minidl::kFloat32)).sum();
    correct = correct.defined() ? correct + hits : hits;
    seen += batch.target.size(0);
  }
  return correct.to(minidl::kFloat64).item<double>() / static_cast<double>(seen);
}

int run(const Options& o) {
  if (o.threads > 0) minidl::set_num_threads(o.threads);
  const Device device = pick_device(o.device);
  minidl::manual_seed(o.seed);

  const auto norm = data::Normalization::fashion_mnist();
  auto train_set = std::make_shared<data::MnistDataset>(data::MnistDataset::load(o.data_dir, true, norm));
  auto test_set = std::make_shared<data::MnistDataset>(data::MnistDataset::load(o.data_dir, false, norm));
  if (o.train_limit > 0) train_set->limit(o.train_limit);
  data::DataLoader train_loader(train_set, loader_options(o, device, o.batch_size, true));
  data::DataLoader test_loader(test_set, loader_options(o, device, 256, false));

  custom_model::ResNet model(o.width, o.blocks);
  model->to(device);
  std::int64_t num_parameters = 0;
  for (const Tensor& p : model->parameters()) num_parameters += p.numel();
  std::cout << *model << "\n";
  const std::optional<minidl::DType> amp = amp_dtype(o.amp);
  std::printf("%lld parameters; %lld training and %lld test images on %s (%d CPU threads); --amp %s%s\n",
              static_cast<long long>(num_parameters), static_cast<long long>(train_set->size()),
              static_cast<long long>(test_set->size()), device.str().c_str(), minidl::get_num_threads(), o.amp.c_str(),
              !amp                      ? " (float32)"
              : amp == minidl::kFloat16 ? " (forward pass and loss under autocast to float16, GradScaler)"
                                        : " (forward pass and loss under autocast to bfloat16)");

  minidl::optim::AdamW optimizer(model->parameters(),
                                 minidl::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  minidl::optim::CosineAnnealingLR scheduler(optimizer, o.epochs);
  // float16's range needs the loss scaled (torch.amp.GradScaler); disabled, every call passes straight through.
  minidl::amp::GradScaler scaler(minidl::amp::GradScalerOptions().enabled(amp == minidl::kFloat16));

  const auto start = std::chrono::steady_clock::now();
  double accuracy = 0;
  for (std::int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    model->train();
    Tensor loss_sum = minidl::zeros({}, minidl::TensorOptions().device(device));
    std::int64_t seen = 0;
    for (data::Batch& batch : train_loader.epoch(epoch)) {
      optimizer.zero_grad();
      Tensor loss;
      {
        // The forward pass and the loss in mixed precision (convolutions and linear in 16 bits, the loss in
        // float32, parameters float32); backward outside, as PyTorch recommends.
        minidl::autocast::AutocastGuard autocast(device.type(), amp, amp.has_value());
        loss = F::cross_entropy(model(batch.data), batch.target);
      }
      scaler.scale(loss).backward();
      scaler.step(optimizer);  // a step with inf/NaN gradients is skipped
      scaler.update();
      // Summed on the device: reading the loss every step would wait for the GPU each time.
      minidl::NoGradGuard no_grad;
      loss_sum.add_(loss.detach(), static_cast<double>(batch.target.size(0)));
      seen += batch.target.size(0);
    }
    const double train_loss = loss_sum.item<float>() / static_cast<double>(seen);
    const double train_seconds = seconds_since(t0);
    const double lr = optimizer.lr();
    scheduler.step();
    accuracy = evaluate(model, test_loader, device, amp);
    std::printf("epoch %2lld  lr %.2e  train loss %.4f  %6.1f s (%6.0f img/s)  test accuracy %.4f",
                static_cast<long long>(epoch), lr, train_loss, train_seconds, static_cast<double>(seen) / train_seconds,
                accuracy);
    if (scaler.is_enabled()) std::printf("  grad scale %g", scaler.get_scale());
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("final test accuracy %.4f after %lld epochs, %.1f s in all\n", accuracy,
              static_cast<long long>(o.epochs), seconds_since(start));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"custom_model: train a small residual network on Fashion-MNIST with minidl"};
  Options o;
  app.add_option("--data", o.data_dir, "directory with Fashion-MNIST's four IDX files (.gz or raw)");
  app.add_option("--device", o.device, "cpu, cuda[:N] or auto (the GPU if usable)");
  app.add_option("--amp", o.amp,
                 "mixed precision: bf16 or fp16 autocast for the forward pass and loss (float32 parameters; fp16 "
                 "with a GradScaler), or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "bf16", "fp16"}));
  app.add_option("--epochs", o.epochs, "training epochs (the cosine schedule spans them)")->check(CLI::Range(1, 100000));
  app.add_option("--batch-size", o.batch_size, "training batch size")->check(CLI::Range(1, 1 << 20));
  app.add_option("--lr", o.lr, "AdamW's peak learning rate")->check(CLI::Range(0.0, 10.0));
  app.add_option("--weight-decay", o.weight_decay, "AdamW's decoupled weight decay")->check(CLI::Range(0.0, 1.0));
  app.add_option("--train-limit", o.train_limit, "use only the first N training images")->check(CLI::Range(1, 1 << 30));
  app.add_option("--width", o.width, "channels of the first stage (doubled per stage)")->check(CLI::Range(1, 1024));
  app.add_option("--blocks", o.blocks, "residual blocks per stage")->check(CLI::Range(1, 64));
  app.add_option("--seed", o.seed, "random seed (weights, shuffling)");
  app.add_option("--threads", o.threads, "CPU threads (default: all hardware threads)")->check(CLI::Range(1, 4096));
  app.footer("Exit status: 0 success, 1 runtime error, 2 command-line error.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return minidl::run_main("custom_model", [&] { return run(o); });
}
