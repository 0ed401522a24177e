#include "minidl/diagnose.h"

#include <cctype>
#include <cstddef>
#include <sstream>

#include "minidl/errors.h"

namespace minidl {
namespace {

using detail::str;

// ---- CMAKE_CUDA_ARCHITECTURES entries ----------------------------------------------------------------------

// One list entry such as "90", "90-real", "90a-virtual" or "100f".
struct ArchEntry {
  int major = 0, minor = 0;
  char variant = 0;  // 0, 'a' (this exact GPU only) or 'f' (this major's family only)
  bool sass = true;  // "-virtual" drops the machine code
  bool ptx = true;   // "-real" drops the PTX
};

std::optional<ArchEntry> parse_arch_entry(std::string token) {
  ArchEntry e;
  const auto strip_suffix = [&token](const std::string& suffix) {
    if (token.size() <= suffix.size() || token.compare(token.size() - suffix.size(), suffix.size(), suffix) != 0)
      return false;
    token.resize(token.size() - suffix.size());
    return true;
  };
  if (strip_suffix("-real")) e.ptx = false;
  else if (strip_suffix("-virtual")) e.sass = false;
  if (!token.empty() && (token.back() == 'a' || token.back() == 'f')) {
    e.variant = token.back();
    token.pop_back();
  }
  // Architecture numbers are major*10 + minor: "90" is 9.0, "120" is 12.0.
  if (token.size() < 2 || token.size() > 3) return std::nullopt;
  for (char c : token)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  const int number = std::stoi(token);
  e.major = number / 10;
  e.minor = number % 10;
  return e;
}

ArchCoverage entry_coverage(const ArchEntry& e, int major, int minor) {
  const bool exact = major == e.major && minor == e.minor;
  const bool same_family = major == e.major && minor >= e.minor;
  const bool sass_runs = e.variant == 'a' ? exact : same_family;
  const bool newer_or_equal = major > e.major || same_family;
  const bool ptx_runs = e.variant == 'a' ? exact : e.variant == 'f' ? same_family : newer_or_equal;
  if (e.sass && sass_runs) return ArchCoverage::kNative;
  if (e.ptx && ptx_runs) return ArchCoverage::kPtxJit;
  return ArchCoverage::kNone;
}

// ---- CUDA_VISIBLE_DEVICES ---------------------------------------------------------------------------------

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool valid_visible_id(const std::string& id) {
  if (id.rfind("GPU-", 0) == 0 || id.rfind("MIG-", 0) == 0) return id.size() > 4;
  if (id.empty()) return false;
  for (char c : id)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The CUDA runtime reads the comma-separated list up to its first malformed entry (an empty value or "-1"
// therefore hides every GPU). Returns that entry and its position, or nullopt when every entry is well formed.
struct BadVisibleId {
  std::string id;
  std::size_t position;
};
std::optional<BadVisibleId> first_malformed_visible_id(const std::string& value) {
  std::stringstream ss(value);
  std::string item;
  std::size_t position = 0;
  if (trim(value).empty()) return BadVisibleId{"", 0};
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (!valid_visible_id(item)) return BadVisibleId{item, position};
    ++position;
  }
  return std::nullopt;
}

// ---- the checks -------------------------------------------------------------------------------------------

// "CUDA >= 13.0", with the oldest Linux driver that runs every runtime of that major version (minor-version
// compatibility) where this table knows it.
std::string driver_requirement(int runtime) {
  const std::string version = "CUDA >= " + cuda::format_cuda_version(runtime);
  switch (runtime / 1000) {
    case 12: return version + " (Linux driver >= 525.60.13 for CUDA 12.x)";
    case 13: return version + " (Linux driver >= 580 for CUDA 13.x)";
    default: return version;
  }
}

int cudnn_major(int v) { return v >= 10000 ? v / 10000 : v / 1000; }

std::string device_label(const cuda::DeviceProperties& d) {
  return str("GPU ", d.index, " (", d.name, ", compute capability ", d.major, ".", d.minor, ")");
}

// Returns false when the driver cannot serve the runtime at all (the device checks are then meaningless).
bool check_driver(const cuda::VersionInfo& v, std::vector<Diagnosis>& out) {
  const std::string runtime = cuda::format_cuda_version(v.runtime);
  if (v.driver == 0) {
    out.push_back({"error", "no NVIDIA driver was found (the CUDA runtime could not load libcuda.so)",
                   str("install the NVIDIA driver for ", driver_requirement(v.runtime),
                       " and check that `nvidia-smi` lists the GPU; in a container, start it with --gpus all "
                       "(NVIDIA Container Toolkit)")});
    return false;
  }
  if (v.runtime == 0 || v.driver >= v.runtime) return true;
  const std::string driver = cuda::format_cuda_version(v.driver);
  const std::string upgrade = str("upgrade the NVIDIA driver to one for ", driver_requirement(v.runtime),
                                  "; `nvidia-smi` shows the CUDA version the installed driver supports");
  if (v.driver / 1000 < v.runtime / 1000) {
    out.push_back({"error",
                   str("the NVIDIA driver supports CUDA ", driver, " but minidl's CUDA runtime is ", runtime,
                       ": no CUDA call can work"),
                   str(upgrade, "; on data-center GPUs the cuda-compat-", v.runtime / 1000, "-",
                       (v.runtime % 1000) / 10, " forward-compatibility package is an alternative")});
    return false;
  }
  out.push_back({"warning",
                 str("the NVIDIA driver supports CUDA ", driver, " but minidl's CUDA runtime is ", runtime,
                     ": this works through minor-version compatibility, but PTX from the newer toolkit cannot be "
                     "JIT-compiled and newer runtime features fail"),
                 upgrade});
  return true;
}

void check_visible_devices(const cuda::VersionInfo& v, const std::vector<cuda::DeviceProperties>& devices,
                           const std::optional<std::string>& cuda_visible_devices, std::vector<Diagnosis>& out) {
  const std::optional<BadVisibleId> bad =
      cuda_visible_devices ? first_malformed_visible_id(*cuda_visible_devices) : std::nullopt;
  const std::string variable = cuda_visible_devices ? str("CUDA_VISIBLE_DEVICES='", *cuda_visible_devices, "'") : "";
  const std::string runtime_says = v.error.empty() ? "" : str("; CUDA runtime: ", v.error);
  if (!devices.empty()) {
    if (bad && bad->position > 0)
      out.push_back({"warning",
                     str(variable, " is cut at its malformed entry '", bad->id, "': only ", devices.size(),
                         " GPU(s) before it are visible"),
                     str("remove '", bad->id, "' from CUDA_VISIBLE_DEVICES (entries are GPU indices in nvidia-smi's "
                         "order or GPU-/MIG- UUIDs, separated by commas)")});
    return;
  }
  const std::string restore = "unset CUDA_VISIBLE_DEVICES, or set it to GPU indices that `nvidia-smi` lists "
                              "(e.g. CUDA_VISIBLE_DEVICES=0)";
  if (bad && bad->position == 0) {
    out.push_back({"error",
                   str("no CUDA device is visible: ", variable, " hides every GPU",
                       bad->id.empty() ? " (an empty list selects none)"
                                       : " (CUDA ignores the list from its first malformed entry, '" + bad->id + "')",
                       runtime_says),
                   restore});
  } else if (cuda_visible_devices) {
    out.push_back({"error",
                   str("no CUDA device is visible: ", variable,
                       " may name GPUs that do not exist (indices run from 0 to the GPU count - 1)", runtime_says),
                   restore});
  } else {
    out.push_back({"error", str("no CUDA device is visible", runtime_says),
                   "check that `nvidia-smi` lists the GPU; in a container, start it with --gpus all (NVIDIA "
                   "Container Toolkit); on NVSwitch systems (HGX H100/H200) nvidia-fabricmanager must be running"});
  }
}

void check_cudnn(const cuda::VersionInfo& v, std::vector<Diagnosis>& out) {
  if (v.cudnn == 0 || v.build_cudnn == 0) return;
  const std::string run = cuda::format_cudnn_version(v.cudnn);
  const std::string built = cuda::format_cudnn_version(v.build_cudnn);
  const std::string package = str("libcudnn", cudnn_major(v.build_cudnn), "-cuda-", v.runtime / 1000);
  if (cudnn_major(v.cudnn) != cudnn_major(v.build_cudnn)) {
    out.push_back({"error",
                   str("the cuDNN loaded at run time is ", run, " but minidl was built against cuDNN ", built,
                       ": different major versions are incompatible"),
                   str("install cuDNN ", cudnn_major(v.build_cudnn), " (e.g. the ", package,
                       " package) and make sure the loader finds it first (LD_LIBRARY_PATH, ldconfig -p | grep "
                       "cudnn), or rebuild minidl against the installed cuDNN")});
  } else if (v.cudnn < v.build_cudnn) {
    out.push_back({"warning",
                   str("the cuDNN loaded at run time (", run, ") is older than the cuDNN ", built,
                       " minidl was built against: features of the newer version may fail"),
                   str("upgrade cuDNN to >= ", built, " (e.g. the ", package,
                       " package) or check which libcudnn the loader picks (LD_LIBRARY_PATH)")});
  }
}

void check_architecture(const cuda::VersionInfo& v, const cuda::DeviceProperties& d, std::vector<Diagnosis>& out) {
  const std::string archs = v.build_architectures;
  const std::string own = str(d.major, d.minor);
  const std::string add_own = str("rebuild with -DCMAKE_CUDA_ARCHITECTURES=\"", archs.empty() ? "" : archs + ";",
                                  own, "\"");
  switch (arch_coverage(archs, d.major, d.minor)) {
    case ArchCoverage::kNative:
      return;
    case ArchCoverage::kNone:
      out.push_back({"error",
                     str(device_label(d), " cannot run minidl's kernels: the build's CUDA architectures '", archs,
                         "' contain no machine code for it and no PTX it can compile "
                         "(cudaErrorNoKernelImageForDevice)"),
                     add_own});
      return;
    case ArchCoverage::kPtxJit:
      if (v.driver != 0 && v.driver < v.build_runtime) {
        out.push_back({"error",
                       str(device_label(d), " has only PTX in this build (architectures '", archs,
                           "'), and the driver (CUDA ", cuda::format_cuda_version(v.driver),
                           ") is older than the toolkit that produced it (CUDA ",
                           cuda::format_cuda_version(v.build_runtime), "), so it cannot JIT-compile it"),
                       str(add_own, ", or upgrade the NVIDIA driver")});
      } else {
        out.push_back({"warning",
                       str(device_label(d), " runs minidl's kernels through PTX JIT compilation (the build's "
                           "architectures are '", archs, "'): the first start is slow and the code is not tuned "
                           "for this GPU"),
                       add_own});
      }
      return;
    case ArchCoverage::kUnknown:
      out.push_back({"warning",
                     str("cannot tell whether the build's CUDA architectures '", archs, "' include ", device_label(d),
                         " (the self-test shows whether kernels run)"),
                     str("rebuild with an explicit list, e.g. -DCMAKE_CUDA_ARCHITECTURES=", own)});
      return;
  }
}

}  // namespace

ArchCoverage arch_coverage(const std::string& architectures, int major, int minor) {
  std::stringstream ss(architectures);
  std::string token;
  bool any_ptx = false, any_unknown = trim(architectures).empty();
  while (std::getline(ss, token, ';')) {
    token = trim(token);
    if (token.empty()) continue;
    // "all" and "all-major" are every architecture the toolkit knows plus PTX of the newest one.
    if (token == "all" || token == "all-major") return ArchCoverage::kNative;
    const std::optional<ArchEntry> entry = parse_arch_entry(token);
    if (!entry) {
      any_unknown = true;  // "native" (the build machine's GPUs) or something this parser does not know
      continue;
    }
    const ArchCoverage c = entry_coverage(*entry, major, minor);
    if (c == ArchCoverage::kNative) return c;
    any_ptx = any_ptx || c == ArchCoverage::kPtxJit;
  }
  if (any_ptx) return ArchCoverage::kPtxJit;
  return any_unknown ? ArchCoverage::kUnknown : ArchCoverage::kNone;
}

std::vector<Diagnosis> diagnose(const cuda::VersionInfo& versions,
                                const std::vector<cuda::DeviceProperties>& devices,
                                const std::optional<std::string>& cuda_visible_devices) {
  std::vector<Diagnosis> out;
  if (!versions.built_with_cuda) {
    out.push_back({"warning", "this minidl was built without CUDA: every tensor runs on the CPU",
                   "rebuild with -DMINIDL_WITH_CUDA=ON (needs the CUDA toolkit >= 12 with nvcc, and cuDNN 9; set "
                   "CUDNN_ROOT if CMake does not find cuDNN); the CMake output names what was missing"});
    return out;
  }
  if (check_driver(versions, out)) check_visible_devices(versions, devices, cuda_visible_devices, out);
  check_cudnn(versions, out);
  for (const cuda::DeviceProperties& d : devices) check_architecture(versions, d, out);
  if (out.empty()) {
    out.push_back({"ok",
                   str("minidl can use ", devices.size(), " CUDA device(s): driver supports CUDA ",
                       cuda::format_cuda_version(versions.driver), ", runtime ",
                       cuda::format_cuda_version(versions.runtime), ", cuDNN ",
                       cuda::format_cudnn_version(versions.cudnn)),
                   ""});
  }
  return out;
}

}  // namespace minidl
