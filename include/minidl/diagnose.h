#pragma once
// Explains, from version numbers and device properties alone, why minidl cannot use the GPU (or that it can),
// with a fix for each problem. Pure functions: `minidl info` feeds them the real state, tests fabricate it.
#include <optional>
#include <string>
#include <vector>

#include "minidl/cuda.h"

namespace minidl {

struct Diagnosis {
  std::string severity;  // "ok", "warning" or "error"
  std::string problem;
  std::string fix;       // empty for "ok"
};

/// How a build's CMAKE_CUDA_ARCHITECTURES list serves a GPU of compute capability major.minor.
enum class ArchCoverage {
  kNative,   // machine code (SASS) for this GPU is in the binary
  kPtxJit,   // only PTX the driver must JIT-compile at first use
  kNone,     // nothing runs: cudaErrorNoKernelImageForDevice
  kUnknown,  // the list cannot be interpreted ("native", empty, unrecognised entries)
};
/// `architectures` is the CMake list, e.g. "90", "80;90-real", "90a-real", "100f", "all-major".
/// SASS sm_XY runs on compute capability X.y for y >= Y ("a" variants only on X.Y exactly);
/// PTX compute_XY is JIT-compiled on any X'.y' >= X.Y ("a" only X.Y, "f" only major X).
ArchCoverage arch_coverage(const std::string& architectures, int major, int minor);

/// All problems found, most fundamental first; a single "ok" line when there are none.
/// `cuda_visible_devices` is the value of the CUDA_VISIBLE_DEVICES environment variable, nullopt when unset.
std::vector<Diagnosis> diagnose(const cuda::VersionInfo& versions,
                                const std::vector<cuda::DeviceProperties>& devices,
                                const std::optional<std::string>& cuda_visible_devices);

}  // namespace minidl
