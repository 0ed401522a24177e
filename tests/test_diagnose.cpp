// The environment diagnosis on fabricated driver/runtime/cuDNN/device states (runs without a GPU), the
// version formatting, and the real versions()/devices() of this build and machine.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "minidl/config.h"
#include "minidl/cuda.h"
#include "minidl/diagnose.h"
#include "minidl/errors.h"
#include "minidl/version.h"

namespace minidl {
namespace {

// A healthy CUDA 13 / cuDNN 9 / H200 machine; each test breaks one thing.
cuda::VersionInfo good_versions() {
  cuda::VersionInfo v;
  v.built_with_cuda = true;
  v.build_runtime = v.runtime = 13000;
  v.driver = 13000;
  v.build_cudnn = v.cudnn = 91900;
  v.build_cublas = v.cublas = 130100;
  v.build_architectures = "90";
  return v;
}

cuda::DeviceProperties gpu(int major, int minor, int index = 0) {
  cuda::DeviceProperties d;
  d.index = index;
  d.name = "Test GPU";
  d.major = major;
  d.minor = minor;
  d.total_memory = 141ull << 30;
  d.free_memory = 140ull << 30;
  d.multiprocessors = 132;
  return d;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

int count_severity(const std::vector<Diagnosis>& ds, const std::string& severity) {
  int n = 0;
  for (const Diagnosis& d : ds) n += d.severity == severity;
  return n;
}

std::string dump(const std::vector<Diagnosis>& ds) {
  std::string s;
  for (const Diagnosis& d : ds) s += "[" + d.severity + "] " + d.problem + " | fix: " + d.fix + "\n";
  return s;
}

// Exactly one line, of the given severity; returns it.
Diagnosis single(const std::vector<Diagnosis>& ds, const std::string& severity) {
  EXPECT_EQ(ds.size(), 1u) << dump(ds);
  EXPECT_EQ(count_severity(ds, severity), 1) << dump(ds);
  return ds.empty() ? Diagnosis{} : ds.front();
}

TEST(Diagnose, AllGoodIsOneOkLine) {
  const Diagnosis d = single(diagnose(good_versions(), {gpu(9, 0)}, std::nullopt), "ok");
  EXPECT_TRUE(contains(d.problem, "1 CUDA device")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "13.0")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "9.19.0")) << d.problem;
  EXPECT_TRUE(d.fix.empty());
}

TEST(Diagnose, CpuOnlyBuild) {
  cuda::VersionInfo v;  // built_with_cuda = false, everything else 0
  const Diagnosis d = single(diagnose(v, {}, std::nullopt), "warning");
  EXPECT_TRUE(contains(d.problem, "without CUDA")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "-DMINIDL_WITH_CUDA=ON")) << d.fix;
  EXPECT_TRUE(contains(d.fix, "cuDNN")) << d.fix;
}

TEST(Diagnose, NoDriver) {
  cuda::VersionInfo v = good_versions();
  v.driver = 0;
  v.error = "no NVIDIA driver is installed [cudaGetDeviceCount: cudaErrorInsufficientDriver: ...]";
  const Diagnosis d = single(diagnose(v, {}, std::nullopt), "error");  // no extra "no device" line
  EXPECT_TRUE(contains(d.problem, "no NVIDIA driver")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "install the NVIDIA driver")) << d.fix;
  EXPECT_TRUE(contains(d.fix, "13.0")) << d.fix;
}

TEST(Diagnose, DriverOlderMajorThanRuntime) {
  cuda::VersionInfo v = good_versions();
  v.driver = 12020;
  v.error = "the NVIDIA driver is older than the CUDA runtime minidl uses";
  const Diagnosis d = single(diagnose(v, {}, std::nullopt), "error");
  EXPECT_TRUE(contains(d.problem, "driver supports CUDA 12.2")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "runtime is 13.0")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "upgrade the NVIDIA driver")) << d.fix;
  EXPECT_TRUE(contains(d.fix, ">= 13.0")) << d.fix;
  EXPECT_TRUE(contains(d.fix, "580")) << d.fix;
  EXPECT_TRUE(contains(d.fix, "cuda-compat-13-0")) << d.fix;
}

TEST(Diagnose, DriverOlderMinorThanRuntimeIsAWarning) {
  cuda::VersionInfo v = good_versions();
  v.build_runtime = v.runtime = 12080;
  v.driver = 12020;
  const Diagnosis d = single(diagnose(v, {gpu(9, 0)}, std::nullopt), "warning");
  EXPECT_TRUE(contains(d.problem, "12.2")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "12.8")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "minor-version compatibility")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "525.60.13")) << d.fix;
}

TEST(Diagnose, NewerDriverThanRuntimeIsFine) {
  cuda::VersionInfo v = good_versions();
  v.driver = 13020;
  single(diagnose(v, {gpu(9, 0)}, std::nullopt), "ok");
}

TEST(Diagnose, NoVisibleDeviceWithoutCudaVisibleDevices) {
  cuda::VersionInfo v = good_versions();
  v.error = "the driver reports no CUDA-capable device [cudaGetDeviceCount: cudaErrorNoDevice: ...]";
  const Diagnosis d = single(diagnose(v, {}, std::nullopt), "error");
  EXPECT_TRUE(contains(d.problem, "no CUDA device is visible")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "cudaErrorNoDevice")) << d.problem;
  EXPECT_FALSE(contains(d.problem, "CUDA_VISIBLE_DEVICES=")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "nvidia-smi")) << d.fix;
  EXPECT_TRUE(contains(d.fix, "--gpus all")) << d.fix;
}

TEST(Diagnose, CudaVisibleDevicesHidingEveryGpu) {
  cuda::VersionInfo v = good_versions();
  v.error = "the driver reports no CUDA-capable device";
  for (const std::string value : {"", " ", "-1", "-1,0", "none"}) {
    const Diagnosis d = single(diagnose(v, {}, value), "error");
    EXPECT_TRUE(contains(d.problem, "CUDA_VISIBLE_DEVICES='" + value + "' hides every GPU")) << d.problem;
    EXPECT_TRUE(contains(d.fix, "unset CUDA_VISIBLE_DEVICES")) << d.fix;
  }
  // Well-formed ids that match no GPU: the variable is named, though it cannot be proven to be the cause.
  for (const std::string value : {"7", "3,4", "GPU-00000000-0000-0000-0000-000000000000"}) {
    const Diagnosis d = single(diagnose(v, {}, value), "error");
    EXPECT_TRUE(contains(d.problem, "CUDA_VISIBLE_DEVICES='" + value + "' may name GPUs that do not exist"))
        << d.problem;
    EXPECT_TRUE(contains(d.fix, "unset CUDA_VISIBLE_DEVICES")) << d.fix;
  }
}

TEST(Diagnose, CudaVisibleDevicesCutShort) {
  const Diagnosis d = single(diagnose(good_versions(), {gpu(9, 0)}, std::string("0,-1,2")), "warning");
  EXPECT_TRUE(contains(d.problem, "'-1'")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "only 1 GPU")) << d.problem;
  // Well-formed lists with visible GPUs are no problem.
  single(diagnose(good_versions(), {gpu(9, 0), gpu(9, 0, 1)}, std::string("0, 1")), "ok");
}

TEST(Diagnose, CudnnMajorMismatch) {
  cuda::VersionInfo v = good_versions();
  v.cudnn = 8907;  // cuDNN 8 encoding: 8.9.7
  const Diagnosis d = single(diagnose(v, {gpu(9, 0)}, std::nullopt), "error");
  EXPECT_TRUE(contains(d.problem, "8.9.7")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "9.19.0")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "libcudnn9-cuda-13")) << d.fix;

  v.cudnn = 100100;  // a newer major is just as incompatible
  const Diagnosis newer = single(diagnose(v, {gpu(9, 0)}, std::nullopt), "error");
  EXPECT_TRUE(contains(newer.problem, "10.1.0")) << newer.problem;
}

TEST(Diagnose, CudnnOlderMinorIsAWarning) {
  cuda::VersionInfo v = good_versions();
  v.cudnn = 90100;
  const Diagnosis d = single(diagnose(v, {gpu(9, 0)}, std::nullopt), "warning");
  EXPECT_TRUE(contains(d.problem, "9.1.0")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "9.19.0")) << d.problem;
  v.cudnn = 92000;  // newer minor at run time: fine
  single(diagnose(v, {gpu(9, 0)}, std::nullopt), "ok");
}

TEST(Diagnose, NoKernelImageForDevice) {
  // An A100 (8.0) with a build for 9.0 only: sm_90 SASS needs 9.x, compute_90 PTX needs >= 9.0.
  const Diagnosis d = single(diagnose(good_versions(), {gpu(8, 0)}, std::nullopt), "error");
  EXPECT_TRUE(contains(d.problem, "compute capability 8.0")) << d.problem;
  EXPECT_TRUE(contains(d.problem, "'90'")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "-DCMAKE_CUDA_ARCHITECTURES=\"90;80\"")) << d.fix;

  // Newer GPU, SASS only: nothing runs.
  cuda::VersionInfo v = good_versions();
  v.build_architectures = "90-real";
  const Diagnosis blackwell = single(diagnose(v, {gpu(10, 0)}, std::nullopt), "error");
  EXPECT_TRUE(contains(blackwell.fix, "-DCMAKE_CUDA_ARCHITECTURES=\"90-real;100\"")) << blackwell.fix;
}

TEST(Diagnose, OneLinePerUncoveredDevice) {
  const auto ds = diagnose(good_versions(), {gpu(9, 0, 0), gpu(8, 6, 1), gpu(7, 5, 2)}, std::nullopt);
  EXPECT_EQ(ds.size(), 2u) << dump(ds);
  EXPECT_EQ(count_severity(ds, "error"), 2) << dump(ds);
  EXPECT_TRUE(contains(dump(ds), "GPU 1")) << dump(ds);
  EXPECT_TRUE(contains(dump(ds), "GPU 2")) << dump(ds);
}

TEST(Diagnose, PtxOnlyDevice) {
  // A Blackwell GPU (10.0) with compute_90 PTX: it runs after JIT compilation.
  const Diagnosis d = single(diagnose(good_versions(), {gpu(10, 0)}, std::nullopt), "warning");
  EXPECT_TRUE(contains(d.problem, "PTX JIT")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "-DCMAKE_CUDA_ARCHITECTURES=\"90;100\"")) << d.fix;

  // The same, but the driver is older than the toolkit that wrote the PTX: the JIT refuses it.
  cuda::VersionInfo v = good_versions();
  v.build_runtime = v.runtime = 12080;
  v.driver = 12060;
  const auto ds = diagnose(v, {gpu(10, 0)}, std::nullopt);
  EXPECT_EQ(count_severity(ds, "error"), 1) << dump(ds);
  EXPECT_TRUE(contains(dump(ds), "cannot JIT-compile")) << dump(ds);
}

TEST(Diagnose, UnknownArchitecturesAreAWarning) {
  cuda::VersionInfo v = good_versions();
  v.build_architectures = "native";
  const Diagnosis d = single(diagnose(v, {gpu(9, 0)}, std::nullopt), "warning");
  EXPECT_TRUE(contains(d.problem, "'native'")) << d.problem;
  EXPECT_TRUE(contains(d.fix, "-DCMAKE_CUDA_ARCHITECTURES=90")) << d.fix;
}

TEST(ArchCoverage, CmakeArchitectureLists) {
  struct Case {
    const char* archs;
    int major, minor;
    ArchCoverage expected;
  };
  const Case cases[] = {
      {"90", 9, 0, ArchCoverage::kNative},
      {"90", 8, 0, ArchCoverage::kNone},
      {"90", 10, 0, ArchCoverage::kPtxJit},
      {"90-real", 10, 0, ArchCoverage::kNone},
      {"90-virtual", 9, 0, ArchCoverage::kPtxJit},
      {"80", 8, 6, ArchCoverage::kNative},  // SASS runs on a newer minor of the same major
      {"86", 8, 0, ArchCoverage::kNone},    // ... but not on an older one
      {"80", 9, 0, ArchCoverage::kPtxJit},
      {"80-real", 9, 0, ArchCoverage::kNone},
      {"80;90-real", 9, 0, ArchCoverage::kNative},
      {"75-real;80-real", 8, 9, ArchCoverage::kNative},
      {"90a-real", 9, 0, ArchCoverage::kNative},
      {"90a", 10, 0, ArchCoverage::kNone},  // arch-specific PTX runs only on 9.0
      {"100f", 10, 3, ArchCoverage::kNative},
      {"100f", 12, 0, ArchCoverage::kNone},  // family PTX stays within major 10
      {"120f-virtual", 12, 1, ArchCoverage::kPtxJit},
      {"100", 12, 0, ArchCoverage::kPtxJit},
      {"all-major", 9, 0, ArchCoverage::kNative},
      {"all", 8, 6, ArchCoverage::kNative},
      {"native", 9, 0, ArchCoverage::kUnknown},
      {"", 9, 0, ArchCoverage::kUnknown},
      {"sm_90", 9, 0, ArchCoverage::kUnknown},
      {"sm_90;90", 9, 0, ArchCoverage::kNative},
      {"sm_90;80-real", 9, 0, ArchCoverage::kUnknown},
      {"90;", 8, 0, ArchCoverage::kNone},
  };
  for (const Case& c : cases)
    EXPECT_EQ(arch_coverage(c.archs, c.major, c.minor), c.expected)
        << "archs '" << c.archs << "' on compute capability " << c.major << "." << c.minor;
}

TEST(VersionFormat, CudaAndCudnnCodes) {
  EXPECT_EQ(cuda::format_cuda_version(13000), "13.0");
  EXPECT_EQ(cuda::format_cuda_version(12020), "12.2");
  EXPECT_EQ(cuda::format_cuda_version(12080), "12.8");
  EXPECT_EQ(cuda::format_cuda_version(0), "n/a");
  EXPECT_THROW(cuda::format_cuda_version(-1), ValueError);
  EXPECT_EQ(cuda::format_cudnn_version(91900), "9.19.0");
  EXPECT_EQ(cuda::format_cudnn_version(90102), "9.1.2");
  EXPECT_EQ(cuda::format_cudnn_version(8907), "8.9.7");
  EXPECT_EQ(cuda::format_cudnn_version(0), "n/a");
  EXPECT_THROW(cuda::format_cudnn_version(-5), ValueError);
}

TEST(Version, MatchesBuild) { EXPECT_EQ(version(), MINIDL_VERSION_STRING); }

// The real queries of this build on this machine must agree with each other.
TEST(RealEnvironment, VersionsAndDevicesAreConsistent) {
  const cuda::VersionInfo v = cuda::versions();
  const std::vector<cuda::DeviceProperties> devs = cuda::devices();
  EXPECT_EQ(v.built_with_cuda, static_cast<bool>(MINIDL_CUDA_ENABLED));
  EXPECT_EQ(cuda::device_count(), static_cast<int>(devs.size()));
  EXPECT_EQ(cuda::is_available(), !devs.empty());
  EXPECT_THROW(cuda::device_name(static_cast<int>(devs.size())), ValueError);
  EXPECT_THROW(cuda::device_name(-1), ValueError);
#if MINIDL_CUDA_ENABLED
  EXPECT_GT(v.build_runtime, 0);
  EXPECT_GT(v.runtime, 0);
  EXPECT_EQ(v.runtime / 1000, v.build_runtime / 1000);  // libcudart's soname pins the major version
  EXPECT_GT(v.build_cudnn, 0);
  EXPECT_GT(v.cudnn, 0);
  EXPECT_GT(v.build_cublas, 0);
  EXPECT_GT(v.cublas, 0);
  EXPECT_EQ(v.build_architectures, MINIDL_BUILD_CUDA_ARCHITECTURES);
  EXPECT_EQ(v.error.empty(), !devs.empty()) << v.error;
  for (std::size_t i = 0; i < devs.size(); ++i) {
    const cuda::DeviceProperties& d = devs[i];
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_EQ(d.name, cuda::device_name(d.index));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.major, 3);
    EXPECT_GE(d.minor, 0);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.total_memory, 0u);
    EXPECT_LE(d.free_memory, d.total_memory);
  }
#else
  EXPECT_TRUE(devs.empty());
  EXPECT_EQ(v.runtime, 0);
  EXPECT_EQ(v.driver, 0);
  EXPECT_EQ(v.cudnn, 0);
#endif
  // The real state always yields at least one line, and the build kind decides the first one.
  const std::vector<Diagnosis> ds = diagnose(v, devs, std::nullopt);
  ASSERT_FALSE(ds.empty());
  if (!v.built_with_cuda) {
    EXPECT_TRUE(contains(ds.front().problem, "without CUDA")) << dump(ds);
  }
}

}  // namespace
}  // namespace minidl
