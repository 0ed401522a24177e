// mnist_train's command line, run as a subprocess on a small random IDX dataset the test writes: every bad
// flag gives a clear message on stderr and exit status 2 (command line) or 1 (runtime), never a crash; the
// --metrics CSV; --resume continuing bitwise exactly; --export-logits writing what tests/interop/torch_logits.py
// reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "idx_corpus.h"
#include "minidl/diagnose.h"
#include "minidl/distributed/process_group.h"
#include "minidl/io/checkpoint.h"
#include "minidl/io/safetensors.h"
#include "net.h"
#include "subprocess.h"
#include "test_util.h"
#include "trainer.h"

#ifndef MNIST_TRAIN_BINARY
#error "tests/CMakeLists.txt passes the path of the built mnist_train as MNIST_TRAIN_BINARY"
#endif

namespace fs = std::filesystem;
namespace corpus = minidl::idx_corpus;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const corpus::Bytes& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << p;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string field; std::getline(in, field, sep);) out.push_back(field);
  return out;
}

/// The number in `s`, which must be all of `s`.
double parse_number(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') ADD_FAILURE() << "\"" << s << "\" is not a number";
  return v;
}

struct AmpRun;

class MnistCli : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kTrain = 512, kTest = 256;

  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "minidl_cli_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    data_ = dir_ / "data";
    fs::create_directories(data_);
    train_pixels_ = corpus::random_bytes(std::size_t{kTrain} * 28 * 28, 21);
    test_pixels_ = corpus::random_bytes(std::size_t{kTest} * 28 * 28, 22);
    // One split gzip-compressed, one raw: the program reads both.
    spit(data_ / "train-images-idx3-ubyte.gz", corpus::gzip(corpus::images_file(kTrain, 28, 28, train_pixels_)));
    spit(data_ / "train-labels-idx1-ubyte.gz", corpus::gzip(corpus::labels_file(corpus::random_bytes(kTrain, 23, 10))));
    spit(data_ / "t10k-images-idx3-ubyte", corpus::images_file(kTest, 28, 28, test_pixels_));
    spit(data_ / "t10k-labels-idx1-ubyte", corpus::labels_file(corpus::random_bytes(kTest, 24, 10)));
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  fs::path path(const std::string& name) const { return dir_ / name; }
  void expect_resume_bitwise_exact(const std::vector<std::string>& extra_flags) const;
  AmpRun run_amp(const fs::path& csv, const std::string& mode) const;

  /// mnist_train with `args` (quiet and on the CPU unless `args` names --log-level or --device, on the test's data
  /// unless `args` names --data).
  mnist::ProcessResult run(std::vector<std::string> args, bool with_data = true) const {
    std::vector<std::string> argv = {MNIST_TRAIN_BINARY, "--no-progress"};
    for (const auto& [flag, value] : {std::pair{"--log-level", "warn"}, std::pair{"--device", "cpu"}}) {
      if (std::find(args.begin(), args.end(), flag) == args.end()) argv.insert(argv.end(), {flag, value});
    }
    if (with_data) argv.insert(argv.end(), {"--data", data_.string()});
    argv.insert(argv.end(), args.begin(), args.end());
    const std::optional<mnist::ProcessResult> r = mnist::run_process(argv, 1 << 26);
    if (!r) throw std::runtime_error(std::string(MNIST_TRAIN_BINARY) + " does not exist");
    EXPECT_EQ(r->signal, 0) << "mnist_train was killed by signal " << r->signal << "\nstderr:\n" << r->err;
    EXPECT_EQ(r->err.find("terminate called"), std::string::npos) << r->err;
    return *r;
  }

  /// Expects exit status `status` and every one of `parts` in stderr.
  void expect_error(const std::vector<std::string>& args, int status, const std::vector<std::string>& parts,
                    bool with_data = true) const {
    std::string cmd;
    for (const std::string& a : args) cmd += " " + a;
    const mnist::ProcessResult r = run(args, with_data);
    EXPECT_EQ(r.exit_code, status) << "mnist_train" << cmd << "\nstderr:\n" << r.err;
    for (const std::string& p : parts) {
      EXPECT_NE(r.err.find(p), std::string::npos) << "mnist_train" << cmd << ": stderr lacks \"" << p << "\":\n" << r.err;
    }
  }

  fs::path dir_, data_;
  corpus::Bytes train_pixels_, test_pixels_;
};

// ---- the command line --------------------------------------------------------------------------------------

TEST_F(MnistCli, HelpExitsZero) {
  const mnist::ProcessResult r = run({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--download", "--download-url", "--export-logits", "--resume", "--metrics", "--amp"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << "--help does not mention " << flag;
  }
}

TEST_F(MnistCli, BadFlagsAreCommandLineErrors) {
  expect_error({"--bogus"}, 2, {"--bogus"});
  expect_error({"--epochs"}, 2, {"--epochs"});
  expect_error({"--epochs", "0"}, 2, {"--epochs", "0"});
  expect_error({"--epochs", "two"}, 2, {"--epochs"});
  expect_error({"--batch-size", "-1"}, 2, {"--batch-size", "-1"});
  expect_error({"--batch-size", "0"}, 2, {"--batch-size"});
  expect_error({"--lr", "fast"}, 2, {"--lr"});
  expect_error({"--momentum", "1.5"}, 2, {"--momentum"});
  expect_error({"--optimizer", "rmsprop"}, 2, {"--optimizer", "rmsprop"});
  expect_error({"--device", "tpu"}, 2, {"--device", "tpu"});
  expect_error({"--train-limit", "0"}, 2, {"--train-limit"});
  expect_error({"--threads", "0"}, 2, {"--threads"});
  expect_error({"--log-level", "loud"}, 2, {"--log-level"});
  expect_error({"--amp", "fp8"}, 2, {"--amp", "fp8"});
  expect_error({"--amp", "BF16"}, 2, {"--amp", "BF16"});
  expect_error({"--amp"}, 2, {"--amp"});
}

TEST_F(MnistCli, BadPathsAreCommandLineErrors) {
  const std::string missing = path("missing").string();
  expect_error({"--data", missing}, 2, {"--data", missing, "does not exist"}, false);
  spit(path("plain-file"), {1, 2, 3});
  expect_error({"--data", path("plain-file").string()}, 2, {"--data", "not a directory"}, false);
  const std::string nowhere = path("no/such/dir/model.safetensors").string();
  expect_error({"--save", nowhere}, 2, {"--save", "does not exist"});
  expect_error({"--metrics", path("no/such/dir/m.csv").string()}, 2, {"--metrics", "does not exist"});
  expect_error({"--metrics", dir_.string()}, 2, {"--metrics", "is a directory"});
  expect_error({"--export-logits", path("no/dir/l.safetensors").string()}, 2, {"--export-logits", "does not exist"});
  expect_error({"--resume", missing}, 2, {"--resume", missing});
  spit(path("lonely.safetensors"), {1, 2, 3});
  expect_error({"--resume", path("lonely.safetensors").string()}, 2, {"--resume", "lonely.safetensors.state"});
}

TEST_F(MnistCli, BadFlagCombinationsAreCommandLineErrors) {
  expect_error({"--download-url", "http://127.0.0.1:9/"}, 2, {"--download-url", "--download"});
  expect_error({"--download", "--download-url", "ftp://127.0.0.1/"}, 2, {"--download-url", "ftp"});
  spit(path("m.safetensors"), {1});
  spit(path("m.safetensors.state"), {1});
  expect_error({"--compare", "--resume", path("m.safetensors").string()}, 2, {"--compare"});
}

TEST_F(MnistCli, GpusNeedsNcclAndNoCpuFlags) {
  expect_error({"--gpus", "0"}, 2, {"--gpus"});
  if (!minidl::distributed::nccl_available()) {
    expect_error({"--gpus", "2"}, 2, {"--gpus N>1 needs minidl built with NCCL"});
  } else {
    expect_error({"--gpus", "2", "--compare"}, 2, {"--gpus", "--compare"});
    expect_error({"--gpus", "2"}, 2, {"--gpus", "--device cpu"});  // run() passes --device cpu
  }
}

TEST_F(MnistCli, BadDataIsARuntimeError) {
  fs::create_directories(path("empty"));
  expect_error({"--data", path("empty").string()}, 1, {"mnist_train: error:", "train-images-idx3-ubyte"}, false);
  // Labels out of range: the reader names the file and the value.
  spit(data_ / "t10k-labels-idx1-ubyte", corpus::labels_file(corpus::Bytes(kTest, 10)));
  expect_error({}, 1, {"mnist_train: error: minidl::FormatError:", "t10k-labels-idx1-ubyte"});
}

TEST_F(MnistCli, ImagesOfAnotherSizeAreRejectedAtLoadNamingTheFileAndBothSizes) {
  // A valid IDX file, but of 28x27 images: without the check the network fails deep inside (fc1's input).
  spit(data_ / "t10k-images-idx3-ubyte", corpus::images_file(kTest, 28, 27, corpus::random_bytes(kTest * 28 * 27, 27)));
  expect_error({}, 1, {"mnist_train: error: minidl::FormatError:", (data_ / "t10k-images-idx3-ubyte").string(),
                       "images of 28x28", "found images of 28x27"});
}

TEST_F(MnistCli, AutoNormalizationDecidesFromTheDataAndSaysWhy) {
  // The fixture's random pixels are neither MNIST nor Fashion-MNIST (the folder's name plays no part).
  const mnist::ProcessResult r = run({"--log-level", "info", "--epochs", "1", "--train-limit", "64", "--test-limit",
                                      "32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part : {"--normalization auto: unrecognised data statistics", "train-images-idx3-ubyte.gz",
                           "has pixel mean 0.", "own statistics"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << "stdout lacks \"" << part << "\":\n" << r.out;
  }
  // Fashion-MNIST's statistics in a folder named "mnist": a two-level image set with its mean and std.
  const fs::path named_mnist = path("mnist");
  fs::create_directories(named_mnist);
  for (const char* f : {"train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    fs::copy_file(data_ / f, named_mnist / f);
  }
  // 39.6% of the pixels at 184 (0.7216), the rest 0: mean 0.2857 and std 0.3529, Fashion-MNIST's 0.2860 and 0.3530.
  corpus::Bytes pixels(std::size_t{kTrain} * 28 * 28, 0);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = i % 1000 < 396 ? 184 : 0;
  spit(named_mnist / "train-images-idx3-ubyte", corpus::images_file(kTrain, 28, 28, pixels));
  const mnist::ProcessResult f = run({"--data", named_mnist.string(), "--log-level", "info", "--epochs", "1",
                                      "--train-limit", "64", "--test-limit", "32"}, false);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.out.find("--normalization auto: Fashion-MNIST statistics"), std::string::npos) << f.out;
}

TEST_F(MnistCli, CompareReportsTheSteadyEpochTimeAndTheOneTimeCostApart) {
  const fs::path csv = path("metrics.csv");
  const mnist::ProcessResult r = run({"--compare", "--epochs", "1", "--metrics", csv.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The CSV keeps the epoch's whole time; the table gives the steady state, the one-time cost on its own line.
  const std::vector<std::string> rows = split(slurp(csv), '\n');
  ASSERT_GE(rows.size(), 2u);
  const double total = parse_number(split(rows[1], ',')[5]);
  const std::size_t row = r.out.find("\ncpu ");
  ASSERT_NE(row, std::string::npos) << r.out;
  std::istringstream table(r.out.substr(row + 1));
  std::string device;
  double steady = 0;
  table >> device >> steady;
  const std::size_t line = r.out.find("cpu: one-time cost ");
  ASSERT_NE(line, std::string::npos) << r.out;
  const double one_time = parse_number(split(r.out.substr(line + 19), ' ')[0]);
  EXPECT_GT(steady, 0) << r.out;
  EXPECT_GE(one_time, 0) << r.out;
  EXPECT_LE(steady, total) << r.out;  // equal when the first steps were no slower (a CPU run on a noisy host)
  EXPECT_NEAR(steady + one_time, total, 2e-3) << "the table's parts do not add up to the CSV's " << total << "\n"
                                              << r.out;
  EXPECT_NE(r.out.find("not in the epoch time above"), std::string::npos) << r.out;
}

TEST_F(MnistCli, DeviceCudaWithoutAGpuPrintsTheDiagnosisAndTheHint) {
  if (minidl::cuda::is_available()) GTEST_SKIP() << "a GPU is usable here: --device cuda trains on it";
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string problem;
  for (const auto& d : minidl::diagnose(minidl::cuda::versions(), minidl::cuda::devices(),
                                        cvd ? std::optional<std::string>(cvd) : std::nullopt)) {
    if (d.severity != "ok") {
      problem = d.problem;
      break;
    }
  }
  ASSERT_FALSE(problem.empty()) << "the diagnosis finds no problem although no GPU is usable";
  expect_error({"--device", "cuda", "--epochs", "1", "--train-limit", "64"}, 1,
               {"--device cuda: no usable GPU: " + problem, "minidl info"});
}

TEST_F(MnistCli, CorruptCheckpointIsARuntimeError) {
  spit(path("bad.safetensors"), corpus::random_bytes(100, 25));
  spit(path("bad.safetensors.state"), corpus::random_bytes(100, 26));
  expect_error({"--resume", path("bad.safetensors").string()}, 1, {"mnist_train: error:", "bad.safetensors"});
}

TEST_F(MnistCli, DownloadWhileUnreachableFailsClearly) {
  // Loopback only: port 9 (discard) has no listener here, so the connection is refused at once.
  const fs::path target = path("downloaded");
  expect_error({"--download", "--download-url", "http://127.0.0.1:9/", "--data", target.string()}, 1,
               {"mnist_train: error:", "http://127.0.0.1:9/train-images-idx3-ubyte.gz", "cannot connect",
                "Without network access"},
               false);
  EXPECT_TRUE(fs::is_empty(target)) << "files left in " << target;
}

// ---- what a run writes -----------------------------------------------------------------------------------------

TEST_F(MnistCli, MetricsCsvHasAHeaderAndOneRowPerEpochAndSplit) {
  const fs::path csv = path("metrics.csv");
  const mnist::ProcessResult r = run({"--epochs", "2", "--train-limit", "128", "--test-limit", "64", "--metrics",
                                      csv.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = split(slurp(csv), '\n');
  ASSERT_EQ(lines.size(), 5u) << slurp(csv);
  EXPECT_EQ(lines[0], "epoch,device,split,loss,accuracy,seconds,images_per_s");
  const char* splits[] = {"train", "test"};
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = split(lines[i], ',');
    ASSERT_EQ(f.size(), 7u) << lines[i];
    EXPECT_EQ(f[0], std::to_string((i + 1) / 2)) << lines[i];
    EXPECT_EQ(f[1], "cpu") << lines[i];
    EXPECT_EQ(f[2], splits[(i - 1) % 2]) << lines[i];
    const double loss = parse_number(f[3]), accuracy = parse_number(f[4]), seconds = parse_number(f[5]),
                 images_per_s = parse_number(f[6]);
    EXPECT_TRUE(std::isfinite(loss) && loss > 0) << lines[i];
    EXPECT_TRUE(accuracy >= 0 && accuracy <= 1) << lines[i];
    EXPECT_GT(seconds, 0) << lines[i];
    EXPECT_GT(images_per_s, 0) << lines[i];
    // images/s is consistent with the split's size and the seconds (up to the printed precision).
    const double images = (i % 2 == 1) ? 128 : 64;
    EXPECT_NEAR(images_per_s * seconds, images, images * 1e-3) << lines[i];
  }
}

/// Two epochs in one run and in two (--save, then --resume) give the same files, byte for byte; `extra` flags are
/// passed to every run.
void MnistCli::expect_resume_bitwise_exact(const std::vector<std::string>& extra_flags) const {
  std::vector<std::string> common = {"--seed", "7", "--batch-size", "64"};
  common.insert(common.end(), extra_flags.begin(), extra_flags.end());
  const auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  const fs::path straight = path("straight.safetensors"), first = path("first.safetensors"),
                 resumed = path("resumed.safetensors");
  mnist::ProcessResult r = run(with({"--epochs", "2", "--save", straight.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run(with({"--epochs", "1", "--save", first.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run(with({"--epochs", "2", "--resume", first.string(), "--save", resumed.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // Tensor by tensor first, for a readable failure; then the files byte by byte.
  const auto a = minidl::io::read_safetensors(straight.string()), b = minidl::io::read_safetensors(resumed.string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_TRUE(a.tensors[i].data == b.tensors[i].data) << "tensor " << a.tensors[i].name << " differs after resume";
  }
  EXPECT_TRUE(slurp(straight) == slurp(resumed)) << "the model files differ";
  EXPECT_TRUE(slurp(straight.string() + ".state") == slurp(resumed.string() + ".state"))
      << "the training states (optimizer, epoch, RNG) differ";
  // And resuming is not trivially equal: the first epoch's weights differ from the second's.
  EXPECT_FALSE(slurp(first) == slurp(straight));
}

TEST_F(MnistCli, ResumeContinuesBitwiseExactly) { expect_resume_bitwise_exact({}); }

// The GradScaler's state (scale, growth tracker) travels in the training state, so a float16 run resumes exactly.
TEST_F(MnistCli, ResumeContinuesBitwiseExactlyWithFloat16Autocast) {
  expect_resume_bitwise_exact({"--amp", "fp16", "--train-limit", "192"});
  const minidl::io::TrainingState st = minidl::io::load_training_state(path("first.safetensors.state").string());
  for (const char* key : {"grad_scaler.scale", "grad_scaler._growth_tracker", "grad_scaler.growth_interval"}) {
    EXPECT_EQ(st.extra.count(key), 1u) << "the training state lacks " << key;
  }
}

TEST_F(MnistCli, ExportLogitsWritesInputsAndTheModelsLogits) {
  const fs::path model = path("model.safetensors"), logits = path("logits.safetensors");
  const mnist::ProcessResult r = run({"--epochs", "1", "--train-limit", "128", "--normalization", "mnist", "--save",
                                      model.string(), "--export-logits", logits.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::map<std::string, minidl::Tensor> saved = [&] {
    std::map<std::string, minidl::Tensor> m;
    for (const auto& t : minidl::io::read_safetensors(logits.string()).tensors) {
      EXPECT_EQ(t.dtype, "F32") << t.name;
      std::vector<float> values(t.data.size() / sizeof(float));
      std::memcpy(values.data(), t.data.data(), t.data.size());
      m[t.name] = minidl::from_vector(values, t.shape);
    }
    return m;
  }();
  ASSERT_EQ(saved.size(), 2u);
  const minidl::Tensor input = saved.at("input"), out = saved.at("logits");
  ASSERT_EQ(input.sizes(), (minidl::Shape{16, 1, 28, 28}));
  ASSERT_EQ(out.sizes(), (minidl::Shape{16, 10}));

  // The input is the first 16 test images, normalised with MNIST's statistics (--normalization mnist).
  const std::vector<float> x = input.to_vector<float>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double expected = (test_pixels_[i] / 255.0 - 0.1307) / 0.3081;
    ASSERT_NEAR(x[i], expected, 1e-5) << "input element " << i;
  }
  // The logits are what the saved model computes in eval mode (dropout off), here in this process.
  mnist::Net net;
  minidl::io::load(*net, model.string());
  net->eval();
  minidl::NoGradGuard no_grad;
  const std::vector<float> expected = net(input).to_vector<float>(), found = out.to_vector<float>();
  for (std::size_t i = 0; i < found.size(); ++i) {
    EXPECT_NEAR(found[i], expected[i], 1e-4 * (1 + std::fabs(expected[i]))) << "logit " << i;
  }
}

// ---- mixed precision (--amp) ----------------------------------------------------------------------------------

/// Debian's dataset-fashion-mnist: the learning tests need real images (the fixture's are noise).
const fs::path kFashionMnist = "/usr/share/datasets/fashion-mnist";

struct AmpRun {
  std::vector<double> train_loss, test_accuracy;  // per epoch, from the --metrics CSV
  std::string out;                                // stdout (the log at level info)
};

/// mnist_train --amp `mode` for 2 epochs on 768 Fashion-MNIST training and 500 test images on the CPU.
AmpRun MnistCli::run_amp(const fs::path& csv, const std::string& mode) const {
  const mnist::ProcessResult r =
      run({"--data", kFashionMnist.string(), "--amp", mode, "--epochs", "2", "--train-limit", "768", "--test-limit",
           "500", "--seed", "3", "--log-level", "info", "--metrics", csv.string()},
          false);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  AmpRun a;
  a.out = r.out;
  const std::vector<std::string> lines = split(slurp(csv), '\n');
  EXPECT_EQ(lines.size(), 5u) << slurp(csv);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = split(lines[i], ',');
    if (f.size() != 7u) {
      ADD_FAILURE() << lines[i];
      continue;
    }
    (f[2] == "train" ? a.train_loss : a.test_accuracy).push_back(parse_number(f[f[2] == "train" ? 3 : 4]));
  }
  return a;
}

/// The loss falls from the first epoch to the second, and the test accuracy is far above chance (0.1).
void expect_learns(const AmpRun& a, const std::string& mode) {
  ASSERT_EQ(a.train_loss.size(), 2u) << mode;
  ASSERT_EQ(a.test_accuracy.size(), 2u) << mode;
  EXPECT_TRUE(std::isfinite(a.train_loss[0]) && std::isfinite(a.train_loss[1])) << mode;
  EXPECT_LT(a.train_loss[1], a.train_loss[0]) << "--amp " << mode << ": the training loss does not fall\n" << a.out;
  EXPECT_GT(a.test_accuracy[1], 0.5) << "--amp " << mode << ": test accuracy near chance\n" << a.out;
}

TEST_F(MnistCli, AmpBfloat16Learns) {
  if (!fs::exists(kFashionMnist / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST at " << kFashionMnist;
  const AmpRun a = run_amp(path("bf16.csv"), "bf16");
  expect_learns(a, "bf16");
  EXPECT_NE(a.out.find("--amp bf16 (forward pass and loss under CPU autocast to bfloat16, float32 parameters)"),
            std::string::npos)
      << "the run's header does not name the mode:\n"
      << a.out;
  EXPECT_EQ(a.out.find("grad scale"), std::string::npos) << "bfloat16 runs without a GradScaler:\n" << a.out;
}

TEST_F(MnistCli, AmpFloat16WithGradScalerLearnsAndReportsTheScale) {
  if (!fs::exists(kFashionMnist / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST at " << kFashionMnist;
  const AmpRun a = run_amp(path("fp16.csv"), "fp16");
  expect_learns(a, "fp16");
  EXPECT_NE(a.out.find("--amp fp16 (forward pass and loss under CPU autocast to float16, float32 parameters, "
                       "GradScaler from scale 65536)"),
            std::string::npos)
      << a.out;
  // Each epoch's line reports the scale: a power of two, at most the initial 2^16 (no growth in 24 steps).
  std::size_t at = 0;
  int reported = 0;
  while ((at = a.out.find("| grad scale ", at)) != std::string::npos) {
    at += 13;
    const double scale = parse_number(split(split(a.out.substr(at), '\n')[0], ' ')[0]);
    int exponent = 0;
    EXPECT_EQ(std::frexp(scale, &exponent), 0.5) << "scale " << scale << " is not a power of two";
    EXPECT_LE(scale, 65536.0);
    EXPECT_GE(scale, 1.0);
    ++reported;
  }
  EXPECT_EQ(reported, 2) << a.out;
}

TEST_F(MnistCli, AmpOffIsTheDefaultAndSaysSo) {
  const mnist::ProcessResult r =
      run({"--epochs", "1", "--train-limit", "64", "--test-limit", "32", "--log-level", "info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("training on cpu: --amp off (float32)"), std::string::npos) << r.out;
}

TEST_F(MnistCli, CompareTrainsEveryRunUnderTheSameAmp) {
  const mnist::ProcessResult r = run({"--compare", "--amp", "bf16", "--epochs", "1", "--train-limit", "64",
                                      "--test-limit", "32", "--log-level", "info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::size_t runs = 0;
  for (std::size_t at = 0; (at = r.out.find("--amp bf16 (forward pass and loss under", at)) != std::string::npos;
       ++at) {
    ++runs;
  }
  EXPECT_EQ(runs, minidl::cuda::is_available() ? 2u : 1u) << r.out;
  EXPECT_NE(r.out.find("training on cpu: --amp bf16"), std::string::npos) << r.out;
}

/// The fixture's data as datasets for an in-process Trainer.
std::pair<std::shared_ptr<minidl::data::MnistDataset>, std::shared_ptr<minidl::data::MnistDataset>> fixture_sets(
    const fs::path& dir) {
  const auto norm = minidl::data::Normalization::mnist();
  return {std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(dir.string(), true, norm)),
          std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(dir.string(), false, norm))};
}

std::vector<std::vector<float>> weights_of(mnist::Trainer& trainer) {
  std::vector<std::vector<float>> w;
  for (const minidl::Tensor& p : trainer.model()->parameters()) w.push_back(p.to_vector<float>());
  return w;
}

// A scale of 2^40 makes every float16 gradient overflow: each of the epoch's 8 steps must be skipped (the weights
// and the momentum untouched) and halve the scale; once the scale is sane again, steps go through. On the GPU all
// but the first two steps replay the captured step, whose skip and scale update are decided on the device.
void expect_overflowing_steps_skipped(const fs::path& data, minidl::Device device) {
  const auto [train, test] = fixture_sets(data);
  mnist::TrainConfig c;
  c.device = device;
  c.batch_size = 64;  // 512 images: 8 steps
  c.progress = false;
  c.seed = 3;
  c.amp = minidl::kFloat16;
  c.grad_scaler.init_scale(std::ldexp(1.0, 40));
  minidl::manual_seed(3);
  mnist::Trainer trainer(c, train, test);
  ASSERT_NE(trainer.grad_scaler(), nullptr);
  const std::vector<std::vector<float>> initial = weights_of(trainer);
  const mnist::EpochStats skipped = trainer.train_epoch(1);
  if (device.is_cuda()) EXPECT_GT(trainer.graph_nodes(), 0u) << "the step was not captured";
  EXPECT_TRUE(std::isfinite(skipped.loss)) << "the reported loss is the unscaled float32 loss";
  EXPECT_EQ(trainer.grad_scaler()->get_scale(), std::ldexp(1.0, 32)) << "8 overflowing steps halve 2^40 8 times";
  const std::vector<std::vector<float>> after_skips = weights_of(trainer);
  ASSERT_EQ(after_skips.size(), initial.size());
  for (std::size_t i = 0; i < initial.size(); ++i) EXPECT_EQ(after_skips[i], initial[i]) << "parameter " << i;

  trainer.grad_scaler()->update(1024.0);
  const mnist::EpochStats trained = trainer.train_epoch(2);
  EXPECT_TRUE(std::isfinite(trained.loss));
  const double scale = trainer.grad_scaler()->get_scale();
  EXPECT_TRUE(scale > 0 && scale <= 1024.0) << scale;
  const std::vector<std::vector<float>> after_steps = weights_of(trainer);
  for (std::size_t i = 0; i < initial.size(); ++i) {
    EXPECT_NE(after_steps[i], initial[i]) << "parameter " << i << " never updated at scale 1024";
    for (float v : after_steps[i]) ASSERT_TRUE(std::isfinite(v)) << "parameter " << i;
  }
}

TEST_F(MnistCli, Float16StepsThatOverflowAreSkippedAndHalveTheScale) {
  expect_overflowing_steps_skipped(data_, minidl::Device(minidl::kCPU));
}

TEST_F(MnistCli, Float16StepsThatOverflowAreSkippedInsideTheCapturedStepGPU) {
  MINIDL_REQUIRE_GPU();
  expect_overflowing_steps_skipped(data_, minidl::Device(minidl::kCUDA, 0));
}

// bfloat16 needs no scaler; parameters and their gradients stay float32 (autocast casts copies). On the GPU the
// step under autocast is captured whole.
void expect_bfloat16_trainer_keeps_float32(const fs::path& data, minidl::Device device) {
  const auto [train, test] = fixture_sets(data);
  mnist::TrainConfig c;
  c.device = device;
  c.batch_size = 64;
  c.progress = false;
  c.amp = minidl::kBFloat16;
  minidl::manual_seed(4);
  mnist::Trainer trainer(c, train, test);
  EXPECT_EQ(trainer.grad_scaler(), nullptr);
  const std::vector<std::vector<float>> initial = weights_of(trainer);
  EXPECT_TRUE(std::isfinite(trainer.train_epoch(1).loss));
  if (device.is_cuda()) EXPECT_GT(trainer.graph_nodes(), 0u) << "the step was not captured";
  const mnist::EpochStats eval = trainer.evaluate();
  EXPECT_TRUE(std::isfinite(eval.loss) && eval.accuracy >= 0 && eval.accuracy <= 1);
  std::size_t i = 0;
  for (const minidl::Tensor& p : trainer.model()->parameters()) {
    EXPECT_EQ(p.dtype(), minidl::kFloat32) << "parameter " << i;
    ASSERT_TRUE(p.grad().defined()) << "parameter " << i;
    EXPECT_EQ(p.grad().dtype(), minidl::kFloat32) << "gradient of parameter " << i;
    const std::vector<float> now = p.to_vector<float>();
    EXPECT_NE(now, initial[i]) << "parameter " << i << " not updated";
    for (float v : now) ASSERT_TRUE(std::isfinite(v)) << "parameter " << i;
    ++i;
  }
}

TEST_F(MnistCli, Bfloat16TrainerKeepsFloat32ParametersAndGradients) {
  expect_bfloat16_trainer_keeps_float32(data_, minidl::Device(minidl::kCPU));
}

TEST_F(MnistCli, Bfloat16TrainerCapturesItsStepGPU) {
  MINIDL_REQUIRE_GPU();
  expect_bfloat16_trainer_keeps_float32(data_, minidl::Device(minidl::kCUDA, 0));
}

// ---- the Trainer's per-step metrics --------------------------------------------------------------------------

// The benchmarks train without the per-step running sums (the work of PyTorch's reference step): the weights
// must come out the same, and the epoch's training loss and accuracy are NaN rather than made up.
TEST_F(MnistCli, TrainerWithoutStepMetricsTrainsTheSameWeights) {
  const auto norm = minidl::data::Normalization::mnist();
  auto train = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(data_.string(), true, norm));
  auto test = std::make_shared<minidl::data::MnistDataset>(minidl::data::MnistDataset::load(data_.string(), false, norm));
  std::vector<std::vector<float>> weights[2];
  mnist::EpochStats stats[2];
  for (int with_metrics = 0; with_metrics < 2; ++with_metrics) {
    mnist::TrainConfig c;
    c.batch_size = 64;
    c.progress = false;
    c.step_metrics = with_metrics == 1;
    c.seed = 5;
    minidl::manual_seed(5);
    mnist::Trainer trainer(c, train, test);
    stats[with_metrics] = trainer.train_epoch(1);
    for (const minidl::Tensor& p : trainer.model()->parameters()) weights[with_metrics].push_back(p.to_vector<float>());
  }
  ASSERT_EQ(weights[0].size(), weights[1].size());
  for (std::size_t i = 0; i < weights[0].size(); ++i) EXPECT_EQ(weights[0][i], weights[1][i]) << "parameter " << i;
  EXPECT_TRUE(std::isnan(stats[0].loss) && std::isnan(stats[0].accuracy));
  EXPECT_TRUE(std::isfinite(stats[1].loss) && stats[1].accuracy >= 0 && stats[1].accuracy <= 1);
  EXPECT_GT(stats[0].seconds, 0);
  EXPECT_GT(stats[0].images_per_s, 0);

  mnist::TrainConfig c;  // the progress bar shows the running loss: it needs the metrics
  c.step_metrics = false;
  EXPECT_THROW(mnist::Trainer(c, train, test), std::invalid_argument);
}

}  // namespace
