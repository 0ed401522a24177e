#include "info.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

#include "minidl/cuda.h"
#include "minidl/diagnose.h"
#include "minidl/ops.h"
#include "minidl/tensor.h"
#include "minidl/threads.h"
#include "minidl/version.h"

namespace minidl_cli {
namespace {

using minidl::Device;
using minidl::Tensor;
namespace cuda = minidl::cuda;

constexpr std::int64_t kSelfTestSize = 1024;

struct SelfTest {
  std::string device;  // "cpu", "cuda:0", ...
  std::string name;
  bool pass = false;
  std::string detail;  // what it got
};

// A self-test computes kSelfTestSize values on a device; each must be within `tolerance` of `expected`.
struct SelfTestCase {
  std::string name;
  std::function<Tensor(const Device&)> compute;
  double expected;
  double tolerance;
};

std::vector<SelfTestCase> self_test_cases() {
  return {
      {"vector add 1 + 2",
       [](const Device& d) { return minidl::full({kSelfTestSize}, 1.0, d) + minidl::full({kSelfTestSize}, 2.0, d); },
       3.0, 0.0},
      // Fifty dependent ops with intermediates freed and reallocated on the way: exercises the allocator and
      // stream ordering, and the geometric series sums to 2 - 2^-49.
      {"x = x + y; y = y / 2 (50 times)",
       [](const Device& d) {
         Tensor x = minidl::full({kSelfTestSize}, 0.0, d);
         Tensor y = minidl::full({kSelfTestSize}, 1.0, d);
         for (int i = 0; i < 50; ++i) {
           x = x + y;
           y = y / 2.0;
         }
         return x;
       },
       2.0, 1e-6},
  };
}

SelfTest run_self_test(const Device& device, const SelfTestCase& c) {
  SelfTest r{device.str(), c.name, false, ""};
  try {
    const std::vector<float> got = c.compute(device).to_vector<float>();
    if (got.size() != static_cast<std::size_t>(kSelfTestSize)) {
      r.detail = fmt::format("got {} elements, expected {}", got.size(), kSelfTestSize);
      return r;
    }
    std::size_t wrong = 0, first_wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      // Written so that NaN counts as wrong.
      if (!(std::fabs(got[i] - c.expected) <= c.tolerance)) {
        if (wrong == 0) first_wrong = i;
        ++wrong;
      }
    }
    r.pass = wrong == 0;
    const std::string within = c.tolerance > 0 ? fmt::format(" (within {})", c.tolerance) : "";
    r.detail = r.pass ? fmt::format("all {} elements are {}{}", got.size(), c.expected, within)
                      : fmt::format("{} of {} elements differ from {} by more than {}; element {} is {:.9g}", wrong,
                                    got.size(), c.expected, c.tolerance, first_wrong, got[first_wrong]);
  } catch (const std::exception& e) {
    r.detail = e.what();
  }
  return r;
}

struct Report {
  cuda::VersionInfo versions;
  std::vector<cuda::DeviceProperties> devices;
  std::optional<std::string> cuda_visible_devices;
  int cpu_threads = 0;
  std::vector<minidl::Diagnosis> diagnosis;
  std::vector<SelfTest> self_tests;
  std::vector<std::string> failures;  // why the exit status is 1; empty when it is 0
};

Report collect() {
  Report r;
  r.versions = cuda::versions();
  r.devices = cuda::devices();
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES")) r.cuda_visible_devices = std::string(env);
  r.cpu_threads = minidl::get_num_threads();
  r.diagnosis = minidl::diagnose(r.versions, r.devices, r.cuda_visible_devices);

  std::vector<Device> targets{Device(minidl::kCPU)};
  for (const cuda::DeviceProperties& d : r.devices) targets.emplace_back(minidl::kCUDA, d.index);
  bool cpu_pass = true, any_gpu_pass = false;
  for (const Device& device : targets) {
    bool device_pass = true;
    for (const SelfTestCase& c : self_test_cases()) {
      r.self_tests.push_back(run_self_test(device, c));
      device_pass = device_pass && r.self_tests.back().pass;
    }
    if (device.is_cpu()) cpu_pass = device_pass;
    else any_gpu_pass = any_gpu_pass || device_pass;
  }

  if (!cpu_pass) r.failures.push_back("the CPU self-test failed");
  if (r.versions.built_with_cuda && !any_gpu_pass)
    r.failures.push_back(r.devices.empty() ? "this CUDA build sees no GPU" : "no GPU passed the self-test");
  for (const minidl::Diagnosis& d : r.diagnosis) {
    if (d.severity == "error") {
      r.failures.push_back("the diagnosis found errors");
      break;
    }
  }
  return r;
}

std::string gib(std::size_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

// cuBLAS encodes its version like cuDNN 9 (major*10000 + minor*100 + patch).
std::string cublas_version(int v) { return cuda::format_cudnn_version(v); }

void print_text(const Report& r) {
  const cuda::VersionInfo& v = r.versions;
  fmt::print("minidl {}\n", minidl::version());
  if (v.built_with_cuda) {
    fmt::print("build:       CUDA backend on (CUDA runtime {}, cuDNN {}, cuBLAS {}; architectures {})\n",
               cuda::format_cuda_version(v.build_runtime), cuda::format_cudnn_version(v.build_cudnn),
               cublas_version(v.build_cublas), v.build_architectures.empty() ? "default" : v.build_architectures);
    fmt::print("run time:    {}; CUDA runtime {}, cuDNN {}, cuBLAS {}\n",
               v.driver == 0 ? "no NVIDIA driver" : "NVIDIA driver supports CUDA " + cuda::format_cuda_version(v.driver),
               cuda::format_cuda_version(v.runtime),
               cuda::format_cudnn_version(v.cudnn), cublas_version(v.cublas));
    if (!v.error.empty()) fmt::print("             CUDA error: {}\n", v.error);
  } else {
    fmt::print("build:       CPU only (no CUDA backend)\n");
  }
  fmt::print("CUDA_VISIBLE_DEVICES: {}\n",
             r.cuda_visible_devices ? "'" + *r.cuda_visible_devices + "'" : std::string("(not set)"));
  fmt::print("GPUs:        {}\n", r.devices.size());
  for (const cuda::DeviceProperties& d : r.devices)
    fmt::print("  cuda:{}  {}, compute capability {}.{}, {} SMs, memory {} total, {} free\n", d.index, d.name,
               d.major, d.minor, d.multiprocessors, gib(d.total_memory), gib(d.free_memory));
  fmt::print("CPU threads: {}\n", r.cpu_threads);
  fmt::print("diagnosis:\n");
  for (const minidl::Diagnosis& d : r.diagnosis) {
    fmt::print("  [{}] {}\n", d.severity, d.problem);
    if (!d.fix.empty()) fmt::print("      fix: {}\n", d.fix);
  }
  fmt::print("self-test:\n");
  for (const SelfTest& t : r.self_tests)
    fmt::print("  {}  {:<7} {}: {}\n", t.pass ? "PASS" : "FAIL", t.device, t.name, t.detail);
  if (r.failures.empty()) {
    fmt::print("result: OK\n");
  } else {
    std::string why;
    for (const std::string& f : r.failures) why += (why.empty() ? "" : "; ") + f;
    fmt::print("result: FAILED ({})\n", why);
  }
}

nlohmann::ordered_json version_json(int code, std::string (*format)(int)) {
  return code == 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(format(code));
}

void print_json(const Report& r) {
  using json = nlohmann::ordered_json;
  const cuda::VersionInfo& v = r.versions;
  json j;
  j["version"] = minidl::version();
  j["build"] = {{"cuda", v.built_with_cuda},
                {"cuda_runtime", version_json(v.build_runtime, cuda::format_cuda_version)},
                {"cudnn", version_json(v.build_cudnn, cuda::format_cudnn_version)},
                {"cublas", version_json(v.build_cublas, cublas_version)},
                {"cuda_architectures", v.build_architectures}};
  j["runtime"] = {{"driver_cuda", version_json(v.driver, cuda::format_cuda_version)},
                  {"cuda_runtime", version_json(v.runtime, cuda::format_cuda_version)},
                  {"cudnn", version_json(v.cudnn, cuda::format_cudnn_version)},
                  {"cublas", version_json(v.cublas, cublas_version)},
                  {"error", v.error.empty() ? json(nullptr) : json(v.error)}};
  j["cuda_visible_devices"] = r.cuda_visible_devices ? json(*r.cuda_visible_devices) : json(nullptr);
  j["devices"] = json::array();
  for (const cuda::DeviceProperties& d : r.devices)
    j["devices"].push_back({{"index", d.index},
                            {"name", d.name},
                            {"compute_capability", fmt::format("{}.{}", d.major, d.minor)},
                            {"multiprocessors", d.multiprocessors},
                            {"total_memory_bytes", d.total_memory},
                            {"free_memory_bytes", d.free_memory}});
  j["cpu_threads"] = r.cpu_threads;
  j["diagnosis"] = json::array();
  for (const minidl::Diagnosis& d : r.diagnosis)
    j["diagnosis"].push_back({{"severity", d.severity}, {"problem", d.problem}, {"fix", d.fix}});
  j["self_test"] = json::array();
  for (const SelfTest& t : r.self_tests)
    j["self_test"].push_back({{"device", t.device}, {"test", t.name}, {"pass", t.pass}, {"detail", t.detail}});
  j["ok"] = r.failures.empty();
  j["failures"] = r.failures;
  fmt::print("{}\n", j.dump(2));
}

}  // namespace

CLI::App* add_info_command(CLI::App& app, InfoOptions& options) {
  CLI::App* info = app.add_subcommand(
      "info",
      "Shows minidl's build configuration, the CUDA driver/runtime/cuDNN/cuBLAS versions, the GPUs, a diagnosis "
      "of what keeps the GPU from being used (with fixes), and a self-test on the CPU and every GPU.\n"
      "Exit status: 0 when the CPU self-test passes, no diagnosis is an error and, in a CUDA build, at least "
      "one GPU passes the self-test; 1 otherwise; 2 for a command-line error.");
  info->add_flag("--json", options.json, "Print one JSON object instead of text");
  return info;
}

int run_info(const InfoOptions& options) {
  const Report report = collect();
  if (options.json) print_json(report);
  else print_text(report);
  return report.failures.empty() ? 0 : 1;
}

}  // namespace minidl_cli
