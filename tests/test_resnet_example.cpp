// examples/resnet (resnet): the model's torchvision parameter names, shapes and count, the --blocks parsing and the
// checkpoint metadata, the device augmentation against its formula, a tiny ResNet learning a Fashion-MNIST subset,
// bitwise resume on the CPU and the refusal of another run's checkpoint, --dump-reference, the command line (exit
// statuses, the metrics file, the speed table), and the GPU's step and augmentation against the CPU's (skips
// without a GPU). Every training run is a tiny configuration (width 8, one block per stage), fast enough for the
// sanitizer build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "augment.h"
#include "classifier_metrics.h"
#include "data.h"
#include "minidl/io/safetensors.h"
#include "model.h"
#include "reference_dump.h"
#include "test_util.h"
#include "trainer.h"

#ifndef RESNET_BINARY
#error "tests/CMakeLists.txt passes the path of the built resnet as RESNET_BINARY"
#endif

namespace fs = std::filesystem;
using minidl::Tensor;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("minidl_resnet_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

resnet::TrainConfig tiny_config(minidl::Device device = minidl::Device(minidl::kCPU)) {
  resnet::TrainConfig c;
  c.device = device;
  c.model.width = 8;
  c.model.blocks = {1, 1, 1, 1};
  c.epochs = 2;
  c.batch_size = 32;
  c.test_batch_size = 64;
  c.seed = 5;
  c.progress = false;
  return c;
}

std::shared_ptr<const examples::ImageSet> synthetic(std::int64_t n, std::uint64_t seed) {
  return std::make_shared<const examples::ImageSet>(examples::ImageSet::synthetic(n, seed));
}

/// Every element equal (bitwise for floats: no NaN in these tensors).
void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(minidl::equal(a.cpu(), b.cpu())) << what << " differs";
}

const char* const kFashionMnist = "/usr/share/datasets/fashion-mnist";

}  // namespace

TEST(resnet, ResNet18HasTorchvisionsNamesAndParameterCount) {
  resnet::ResNet model{resnet::ModelConfig()};
  resnet::resnet_init(*model);
  std::int64_t count = 0;
  for (const Tensor& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, 11173962) << "ResNet-18, CIFAR form, 10 classes";
  const auto params = model->named_parameters();
  const std::vector<std::pair<std::string, minidl::Shape>> expected = {
      {"conv1.weight", {64, 3, 3, 3}},
      {"bn1.weight", {64}},
      {"layer1.0.conv1.weight", {64, 64, 3, 3}},
      {"layer1.1.bn2.bias", {64}},
      {"layer2.0.conv1.weight", {128, 64, 3, 3}},
      {"layer2.0.downsample.0.weight", {128, 64, 1, 1}},
      {"layer2.0.downsample.1.weight", {128}},
      {"layer4.1.conv2.weight", {512, 512, 3, 3}},
      {"fc.weight", {10, 512}},
      {"fc.bias", {10}}};
  for (const auto& [name, shape] : expected) {
    ASSERT_NE(params.find(name), nullptr) << name;
    EXPECT_EQ(params[name].sizes(), shape) << name;
  }
  EXPECT_EQ(params.find("layer1.0.downsample.0.weight"), nullptr) << "no shortcut projection where nothing changes";
  EXPECT_EQ(params.find("conv1.bias"), nullptr) << "no convolution has a bias";
  const auto buffers = model->named_buffers();
  EXPECT_NE(buffers.find("layer3.0.downsample.1.running_var"), nullptr);
  EXPECT_NE(buffers.find("bn1.num_batches_tracked"), nullptr);
  // torchvision's initialisation: BatchNorm 1 / 0, convolutions N(0, 2 / fan_out).
  EXPECT_TRUE(minidl::equal(params["bn1.weight"], minidl::ones({64})));
  const double fan_out = 512 * 9;  // out_channels x kernel area
  EXPECT_NEAR(params["layer4.1.conv2.weight"].to(minidl::kFloat64).std().item<double>(), std::sqrt(2.0 / fan_out),
              0.01 * std::sqrt(2.0 / fan_out));

  resnet::ModelConfig tiny;
  tiny.width = 4;
  tiny.blocks = {1, 2, 1, 1};
  resnet::ResNet small(tiny);
  EXPECT_NE(small->named_parameters().find("layer2.1.conv2.weight"), nullptr);
  EXPECT_EQ(small(minidl::randn({3, 3, 32, 32})).sizes(), (minidl::Shape{3, 10}));
  EXPECT_ERROR(minidl::ValueError, small(minidl::randn({3, 1, 32, 32})), "(N, 3, 32, 32)", "[3, 1, 32, 32]");
}

TEST(resnet, BlocksAndCheckpointMetadata) {
  EXPECT_EQ(resnet::ModelConfig::parse_blocks("3,4,6,3"), (std::array<std::int64_t, 4>{3, 4, 6, 3}));
  for (const char* bad : {"2,2,2", "2,2,2,2,2", "2,0,2,2", "2,,2,2", "a,b,c,d", "2,2,2,2,", ""}) {
    EXPECT_ERROR(minidl::ValueError, resnet::ModelConfig::parse_blocks(bad), "blocks", "four block counts");
  }
  resnet::ModelConfig c;
  c.width = 8;
  c.blocks = {1, 2, 3, 4};
  EXPECT_EQ(resnet::ModelConfig::from_metadata(c.to_metadata(), "f"), c);
  std::map<std::string, std::string> m = c.to_metadata();
  m.erase("resnet.blocks");
  EXPECT_ERROR(minidl::FormatError, resnet::ModelConfig::from_metadata(m, "ck.safetensors"), "ck.safetensors",
               "resnet.blocks", "resnet --save");
  m = c.to_metadata();
  m["resnet.width"] = "-3";
  EXPECT_ERROR(minidl::FormatError, resnet::ModelConfig::from_metadata(m, "ck"), "resnet.width", "\"-3\"");
}

TEST(resnet, CropFlipIsThePaddedCropOfItsFormula) {
  const std::int64_t n = 6;
  const Tensor gray = minidl::randn({n, 1, 32, 32});
  const double background = -0.81;
  resnet::CropFlipDraws d;
  d.dy = minidl::from_vector(std::vector<std::int64_t>{0, 8, 4, 3, 8, 0}, {n});
  d.dx = minidl::from_vector(std::vector<std::int64_t>{0, 8, 4, 7, 0, 5}, {n});
  d.flip = minidl::from_vector(std::vector<std::int64_t>{0, 1, 0, 1, 1, 0}, {n});
  const Tensor out = resnet::crop_flip(gray, d, background);
  ASSERT_EQ(out.sizes(), (minidl::Shape{n, 3, 32, 32}));
  const std::vector<float> g = gray.to_vector<float>(), o = out.to_vector<float>();
  const auto dy = d.dy.to_vector<std::int64_t>(), dx = d.dx.to_vector<std::int64_t>(),
             flip = d.flip.to_vector<std::int64_t>();
  std::int64_t wrong = 0;
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t c = 0; c < 3; ++c) {
      for (std::int64_t i = 0; i < 32; ++i) {
        for (std::int64_t j = 0; j < 32; ++j) {
          // The padded image's pixel (dy + i, dx + j'), j' mirrored where flipped; outside the image: background.
          const std::int64_t r = dy[b] + i - 4, col = dx[b] + (flip[b] ? 31 - j : j) - 4;
          const float want =
              r < 0 || r >= 32 || col < 0 || col >= 32 ? static_cast<float>(background) : g[(b * 32 + r) * 32 + col];
          wrong += o[((b * 3 + c) * 32 + i) * 32 + j] != want;
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "pixels differing from the formula";
  // Offsets (4, 4) without a flip give the image back, repeated to three channels.
  d.dy = d.dx = minidl::full({n}, 4, minidl::TensorOptions(minidl::kInt64));
  d.flip = minidl::zeros({n}, minidl::TensorOptions(minidl::kInt64));
  expect_identical(resnet::crop_flip(gray, d, background), resnet::to_three_channels(gray), "the centred crop");

  minidl::manual_seed(3);
  const resnet::CropFlipDraws drawn = resnet::draw_crop_flip(1000, minidl::Device(minidl::kCPU));
  for (const Tensor& t : {drawn.dy, drawn.dx}) {
    EXPECT_EQ(t.min().item<std::int64_t>(), 0);
    EXPECT_EQ(t.max().item<std::int64_t>(), 8);
  }
  EXPECT_EQ(drawn.flip.max().item<std::int64_t>(), 1);
  EXPECT_NEAR(drawn.flip.to(minidl::kFloat64).mean().item<double>(), 0.5, 0.06);
}

TEST(resnet, TinyResNetLearnsAFashionMnistSubset) {
  if (!fs::exists(kFashionMnist))
    GTEST_SKIP() << kFashionMnist << " is not installed (apt-get install dataset-fashion-mnist)";
  auto train = std::make_shared<const examples::ImageSet>(resnet::fashion_mnist(kFashionMnist, true, 640));
  auto test = std::make_shared<const examples::ImageSet>(resnet::fashion_mnist(kFashionMnist, false, 256));
  ASSERT_EQ(train->images().sizes(), (minidl::Shape{640, 1, 32, 32}));
  resnet::TrainConfig c = tiny_config();
  c.epochs = 3;
  c.lr = 0.05;
  resnet::Trainer trainer(c, train, test);
  EXPECT_EQ(trainer.steps_per_epoch(), 20);
  std::vector<resnet::EpochStats> epochs;
  for (int e = 0; e < 3; ++e) epochs.push_back(trainer.train_epoch());
  EXPECT_EQ(trainer.iter(), 60);
  EXPECT_LT(epochs[2].train.loss, epochs[0].train.loss) << "the training loss falls";  // 2026-12-05: 2.29 -> 1.35
  EXPECT_EQ(epochs[2].test.images, 256);
  EXPECT_GT(epochs[2].test.accuracy, 0.4) << "10 classes: chance is 0.1";  // 2026-12-05: 0.55
  EXPECT_NEAR(epochs[2].lr, 0.05 / 25 / 1e4, 1e-12)
      << "OneCycleLR's last step: max_lr / (div_factor * final_div_factor)";
}

TEST(resnet, ResumeContinuesBitwiseOnTheCpu) {
  const fs::path dir = temp_dir("resume");
  const std::string ckpt = (dir / "ck.safetensors").string();
  const auto train = synthetic(80, 4), test = synthetic(40, 5);  // 3 steps per epoch, the last of 16

  resnet::Trainer straight(tiny_config(), train, test);
  straight.train_epoch();
  straight.train_epoch();
  {
    resnet::Trainer first(tiny_config(), train, test);
    first.train_epoch();
    first.save(ckpt);
  }
  minidl::manual_seed(12345);  // the resumed run must not depend on the generators' state before resume()
  resnet::Trainer resumed(tiny_config(), train, test);
  resumed.resume(ckpt);
  EXPECT_EQ(resumed.epoch(), 1);
  EXPECT_EQ(resumed.iter(), 3);
  const resnet::EpochStats last = resumed.train_epoch();
  EXPECT_EQ(resumed.iter(), 6);
  EXPECT_EQ(resumed.scheduler().get_last_lr(), straight.scheduler().get_last_lr());

  const auto a = straight.model()->named_parameters(), b = resumed.model()->named_parameters();
  for (const auto& item : a) expect_identical(item.value(), b[item.key()], item.key());
  const auto ba = straight.model()->named_buffers(), bb = resumed.model()->named_buffers();
  for (const auto& item : ba) expect_identical(item.value(), bb[item.key()], item.key());
  const auto sa = straight.optimizer().state_dict(), sb = resumed.optimizer().state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [k, v] : sa) expect_identical(v, sb.at(k), "optimizer " + k);

  const minidl::io::SafetensorsContents file = minidl::io::read_safetensors(ckpt);
  EXPECT_EQ(file.metadata.at("resnet.blocks"), "1,1,1,1");
  EXPECT_EQ(file.metadata.at("resnet.epoch"), "1");
  resnet::TrainConfig other = tiny_config();
  other.model.width = 16;
  EXPECT_ERROR(minidl::ValueError, resnet::Trainer(other, train, test).resume(ckpt), "--resume", "width 8", "width 16");
  other = tiny_config();
  other.seed = 6;
  EXPECT_ERROR(minidl::ValueError, resnet::Trainer(other, train, test).resume(ckpt), "--seed 5", "give 6");
  other = tiny_config();
  other.epochs = 3;
  EXPECT_ERROR(minidl::ValueError, resnet::Trainer(other, train, test).resume(ckpt), "steps in all", "6", "9");
  fs::remove_all(dir);
}

TEST(resnet, DumpReferenceHoldsTheStep) {
  const fs::path dir = temp_dir("dump");
  const std::string dump = (dir / "ref.safetensors").string();
  resnet::dump_reference(tiny_config(), synthetic(40, 6), dump);
  const minidl::io::SafetensorsContents ref = minidl::io::read_safetensors(resnet::reference_path(dump));
  std::set<std::string> names;
  for (const auto& t : ref.tensors) names.insert(t.name);
  resnet::ResNet model(tiny_config().model);
  for (const auto& item : model->named_parameters()) {
    EXPECT_EQ(names.count("ref.grad." + item.key()), 1u) << item.key();
    EXPECT_EQ(names.count("ref.after." + item.key()), 1u) << item.key();
  }
  for (const char* name : {"ref.x", "ref.y", "ref.logits", "ref.loss", "ref.after.bn1.running_mean"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
  EXPECT_EQ(ref.metadata.at("ref.momentum"), "0.90000000000000002");
  fs::remove_all(dir);
}

namespace {

struct CliResult {
  int status;
  std::string output;
};

CliResult run_cli(const std::string& args) {
  const fs::path log = fs::temp_directory_path() / ("minidl_resnet_cli_" + std::to_string(::getpid()) + ".log");
  const int raw = std::system((std::string(RESNET_BINARY) + " " + args + " > " + log.string() + " 2>&1").c_str());
  std::ifstream in(log);
  std::string out{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  fs::remove(log);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, out};
}

void expect_usage_error(const std::string& args, const std::string& names) {
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(names), std::string::npos) << args << ": the message names " << names << "\n" << r.output;
}

}  // namespace

TEST(resnet, CommandLineErrorsMetricsAndResume) {
  expect_usage_error("--blocks 2,2,2", "four block counts");
  expect_usage_error("--blocks 2,0,2,2", "--blocks");
  expect_usage_error("--width 0", "--width");
  expect_usage_error("--amp fp8", "--amp");
  expect_usage_error("--synthetic --data /tmp", "--synthetic");
  expect_usage_error("--data /nonexistent-dir", "/nonexistent-dir");
  expect_usage_error("--resume /nonexistent/ck.safetensors", "--resume");
  expect_usage_error("--batch-size 1", "--batch-size");
  expect_usage_error("--epochs 0", "--epochs");
  expect_usage_error("--device tpu", "--device");

  const fs::path dir = temp_dir("cli");
  const std::string csv = (dir / "m.csv").string(), ck = (dir / "ck.safetensors").string();
  const std::string flags =
      " --synthetic --train-limit 48 --test-limit 16 --batch-size 16 --width 4 --blocks 1,1,1,1 --device cpu"
      " --threads 2 --no-progress --metrics " +
      csv;
  CliResult r = run_cli(flags + " --epochs 2 --save " + ck);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("device"), std::string::npos);
  EXPECT_NE(r.output.find("ms/iter"), std::string::npos) << "the speed table bench/compare_programs.py reads";
  EXPECT_TRUE(fs::exists(ck) && fs::exists(resnet::state_path(ck)));
  // Another --epochs changes OneCycleLR's schedule: refused. The same one continues.
  r = run_cli(flags + " --epochs 3 --resume " + ck);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("steps in all"), std::string::npos) << r.output;
  r = run_cli(flags + " --epochs 2 --resume " + ck);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  std::ifstream in(csv);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u) << "the header, then a train and a test row per epoch (the resumed run had none left)";
  EXPECT_EQ(lines[0], examples::ClassifierMetricsWriter::header());
  EXPECT_EQ(lines[1].rfind("1,cpu,train,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[4].rfind("2,cpu,test,", 0), 0u) << lines[4];
  fs::remove_all(dir);
}

// CPU vs GPU: the same draws crop alike, and one step from the same weights and batch agrees, in float32 with TF32
// off.
TEST(resnet, GpuStepAndAugmentationMatchTheCpu) {
  MINIDL_REQUIRE_GPU();
  const bool conv = minidl::cuda::allow_tf32_conv(), matmul = minidl::cuda::allow_tf32_matmul();
  minidl::cuda::set_allow_tf32(false, false);
  const auto data = synthetic(32, 7);
  resnet::Trainer cpu(tiny_config(), data, nullptr);
  resnet::Trainer gpu(tiny_config(minidl::Device(minidl::kCUDA, 0)), data, nullptr);
  const Tensor gray = data->images();
  minidl::manual_seed(9);
  const Tensor x_cpu = cpu.input(gray);
  minidl::manual_seed(9);
  const Tensor x_gpu = gpu.input(gray.cuda());
  expect_identical(x_gpu, x_cpu, "the augmented batch");
  const Tensor y = data->labels();
  const examples::StepOutputs sc = cpu.step(x_cpu, y), sg = gpu.step(x_gpu, y.cuda());
  minidl::testing::expect_close(sg.loss, sc.loss, 1e-5, 1e-6, "loss");
  const auto pc = cpu.model()->named_parameters(), pg = gpu.model()->named_parameters();
  for (const auto& item : pc) {
    const Tensor g = item.value().grad();
    const double scale = g.abs().max().item<float>();
    minidl::testing::expect_close(pg[item.key()].grad(), g, 0.0, 1e-4 * scale + 1e-7, "grad " + item.key());
  }
  minidl::cuda::set_allow_tf32(conv, matmul);
}
