// mnist_train as a subprocess on a small random IDX dataset: Ctrl-C (SIGINT) stops it after the current step
// with exit status 130, leaving the previous checkpoint loadable and no temporary files; a non-finite loss
// stops it with a clear message and exit status 1 without overwriting the last checkpoint; --detect-anomaly
// names the op where the NaN first appears.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "idx_corpus.h"
#include "minidl/io/checkpoint.h"
#include "minidl/io/safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
namespace corpus = minidl::idx_corpus;

namespace {

using Clock = std::chrono::steady_clock;

// The example sits next to the tests in the build tree: <build>/tests/test_x -> <build>/examples/mnist/mnist_train.
fs::path mnist_train_binary() {
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "examples" / "mnist" / "mnist_train";
}

std::vector<std::uint8_t> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << p;
}

// A running mnist_train whose stdout and stderr go to a log file.
class Child {
 public:
  Child(const fs::path& binary, const std::vector<std::string>& args, const fs::path& log) : log_(log) {
    std::vector<std::string> argv_strings{binary.string()};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !done_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  void interrupt() const { kill(pid_, SIGINT); }
  /// The exit status, or -1 when the process did not end within `limit` (it is then killed), or
  /// 128 + signal when a signal ended it.
  int wait(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        done_ = true;
        return -1;
      }
      std::this_thread::sleep_for(20ms);
    }
    done_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string log() const {
    const auto bytes = slurp(log_);
    return std::string(bytes.begin(), bytes.end());
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  bool done_ = false;
};

class MnistSignals : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = mnist_train_binary();
    if (!fs::exists(binary_)) GTEST_SKIP() << binary_ << " not built (configure with MINIDL_BUILD_EXAMPLES=ON)";
    dir_ = fs::temp_directory_path() / ("minidl_test_signals_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_ / "data");
    const auto seed = std::random_device{}();
    write_split("train", 128, seed);
    write_split("t10k", 64, seed + 1);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  void write_split(const std::string& split, std::uint32_t n, std::uint32_t seed) {
    spit(dir_ / "data" / (split + "-images-idx3-ubyte"),
         corpus::images_file(n, 28, 28, corpus::random_bytes(std::size_t{n} * 28 * 28, seed)));
    spit(dir_ / "data" / (split + "-labels-idx1-ubyte"), corpus::labels_file(corpus::random_bytes(n, seed, 10)));
  }
  std::vector<std::string> args(const std::vector<std::string>& extra) const {
    std::vector<std::string> a{"--data", (dir_ / "data").string(), "--device", "cpu", "--threads", "2",
                               "--batch-size", "32", "--no-progress", "--seed", "7"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  /// Runs mnist_train to completion (at most 10 minutes) and returns its exit status.
  int run(const std::vector<std::string>& extra, const std::string& log_name, std::string* log = nullptr) {
    Child child(binary_, args(extra), dir_ / log_name);
    EXPECT_TRUE(child.started());
    const int status = child.wait(600s);
    if (log) *log = child.log();
    return status;
  }
  std::vector<std::string> temporary_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
    }
    return out;
  }
  /// A copy of checkpoint `from` (model and state) at `to`, with the first value of every F32 tensor whose name
  /// contains `poisoned` replaced by NaN.
  void poisoned_copy(const fs::path& from, const fs::path& to, const std::string& poisoned) {
    auto contents = minidl::io::read_safetensors(from.string());
    int changed = 0;
    for (auto& t : contents.tensors) {
      if (t.name.find(poisoned) == std::string::npos || t.dtype != "F32") continue;
      const float nan = std::nanf("");
      std::memcpy(t.data.data(), &nan, sizeof nan);
      ++changed;
    }
    ASSERT_EQ(changed, 1) << "expected one tensor named like " << poisoned;
    minidl::io::write_safetensors(to.string(), contents.tensors, contents.metadata);
    fs::copy_file(from.string() + ".state", to.string() + ".state");
  }

  fs::path binary_, dir_;
};

TEST_F(MnistSignals, CtrlCStopsAfterTheCurrentStepWithStatus130) {
  const fs::path ck = dir_ / "ck.safetensors";
  Child child(binary_, args({"--epochs", "100000", "--save", ck.string()}), dir_ / "train.log");
  ASSERT_TRUE(child.started());
  // Interrupt once the first checkpoint exists (the state file is written after the model).
  const auto deadline = Clock::now() + 600s;
  while (!fs::exists(ck.string() + ".state") && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(fs::exists(ck.string() + ".state")) << "no checkpoint after 10 minutes; log:\n" << child.log();
  const auto t0 = Clock::now();
  child.interrupt();
  const int status = child.wait(60s);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string log = child.log();
  ASSERT_EQ(status, 130) << "log:\n" << log;
  std::cout << "mnist_train exited " << seconds << " s after SIGINT\n";
  EXPECT_NE(log.find("mnist_train: interrupted after epoch "), std::string::npos) << log;
  EXPECT_EQ(log.find("mnist_train: error"), std::string::npos) << log;

  // The last checkpoint written is complete and loadable, and nothing half-written is left behind.
  const auto model = minidl::io::read_safetensors(ck.string());
  EXPECT_FALSE(model.tensors.empty());
  const minidl::io::TrainingState state = minidl::io::load_training_state(ck.string() + ".state");
  EXPECT_GE(state.epoch, 1);
  EXPECT_TRUE(temporary_files().empty()) << temporary_files().front();
}

TEST_F(MnistSignals, NonFiniteLossStopsWithoutOverwritingTheCheckpoint) {
  const fs::path good = dir_ / "good.safetensors", bad = dir_ / "bad.safetensors";
  std::string log;
  ASSERT_EQ(run({"--epochs", "1", "--save", good.string()}, "first.log", &log), 0) << log;
  poisoned_copy(good, bad, "fc2.bias");
  const auto model_before = slurp(bad), state_before = slurp(bad.string() + ".state");

  const int status = run({"--epochs", "3", "--resume", bad.string(), "--save", bad.string()}, "resumed.log", &log);
  EXPECT_EQ(status, 1) << log;
  EXPECT_NE(log.find("epoch 2 step"), std::string::npos) << log;
  EXPECT_NE(log.find("training loss is NaN"), std::string::npos) << log;
  EXPECT_NE(log.find("the last checkpoint, if any, is unchanged"), std::string::npos) << log;
  EXPECT_TRUE(slurp(bad) == model_before) << "the checkpoint was overwritten after a non-finite loss";
  EXPECT_TRUE(slurp(bad.string() + ".state") == state_before) << "the training state was overwritten";
  EXPECT_TRUE(temporary_files().empty()) << temporary_files().front();
}

TEST_F(MnistSignals, DetectAnomalyNamesTheFirstOpWithNaN) {
  const fs::path good = dir_ / "good.safetensors", bad = dir_ / "bad.safetensors";
  std::string log;
  ASSERT_EQ(run({"--epochs", "1", "--save", good.string()}, "first.log", &log), 0) << log;
  poisoned_copy(good, bad, "fc2.bias");
  const int status = run({"--epochs", "2", "--resume", bad.string(), "--detect-anomaly"}, "anomaly.log", &log);
  EXPECT_EQ(status, 1) << log;
  // fc2 is the first op to see the NaN bias (its third input).
  EXPECT_NE(log.find("detect_anomaly: forward pass: op Linear (autograd node LinearBackward)"), std::string::npos)
      << log;
  EXPECT_NE(log.find("input(s) 2 already held NaN/Inf"), std::string::npos) << log;
}

}  // namespace
