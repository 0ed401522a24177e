#pragma once
// What the CUDA side of minidl sees: availability, versions, devices, memory, the library's stream.
// Every function works in a CPU-only build (reporting that CUDA is not built in).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace minidl {
namespace cuda {

/// True when this build has the CUDA backend and at least one usable device is visible.
bool is_available();
/// Number of visible devices (0 in a CPU-only build or without a driver).
int device_count();
std::string device_name(int index = 0);
/// Waits for all work minidl queued on the device.
void synchronize(int index = -1);

/// Versions are encoded as CUDA does (major*1000 + minor*10) for the runtime and driver, and as cuDNN does
/// (major*10000 + minor*100 + patch for cuDNN 9) for cuDNN; 0 means "not available".
struct VersionInfo {
  bool built_with_cuda = false;
  int build_runtime = 0;       // CUDART_VERSION the library was compiled against
  int runtime = 0;             // cudaRuntimeGetVersion
  int driver = 0;              // cudaDriverGetVersion (highest CUDA version the driver supports)
  int build_cudnn = 0;         // CUDNN_VERSION at build time
  int cudnn = 0;               // cudnnGetVersion at run time
  int build_cublas = 0;
  int cublas = 0;
  std::string build_architectures;  // e.g. "90"
  std::string error;           // why the runtime could not be queried, if it could not
};
VersionInfo versions();

struct DeviceProperties {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;    // compute capability
  std::size_t total_memory = 0;
  std::size_t free_memory = 0;
  int multiprocessors = 0;
};
std::vector<DeviceProperties> devices();
/// Formats a version code: 13000 -> "13.0", cuDNN 91400 -> "9.14.0".
std::string format_cuda_version(int v);
std::string format_cudnn_version(int v);

/// Caching-allocator statistics for one device, in bytes.
struct MemoryStats {
  std::size_t allocated = 0;       // held by live tensors
  std::size_t peak_allocated = 0;  // maximum of `allocated` since the last reset
  std::size_t reserved = 0;        // obtained from the driver (allocated + cached)
  std::size_t num_device_allocs = 0;  // cudaMalloc calls so far
  std::size_t num_device_frees = 0;   // cudaFree calls so far
};
MemoryStats memory_stats(int index = 0);
void reset_peak_memory_stats(int index = 0);
/// Returns all cached, unused blocks to the driver.
void empty_cache();
/// Caps the memory minidl reserves on device `index` at `fraction` (in [0, 1]) of its total memory, as
/// torch.cuda.set_per_process_memory_fraction: an allocation that would pass the cap (after returning the
/// cache to the driver) throws OutOfMemoryError naming the request and the limit. 1 removes the cap.
void set_per_process_memory_fraction(double fraction, int index = 0);
/// When true every allocation goes straight to cudaMalloc/cudaFree (for compute-sanitizer runs);
/// also set by the environment variable MINIDL_CUDA_NO_CACHE=1.
void set_allocator_caching(bool enabled);
/// Whether the caching allocator is on (false under MINIDL_CUDA_NO_CACHE=1 or after set_allocator_caching(false)).
bool allocator_caching();

/// TF32 for cuDNN convolutions and cuBLAS matmuls (PyTorch's default: on for convolutions, off for matmul).
void set_allow_tf32(bool conv, bool matmul);
bool allow_tf32_conv();
bool allow_tf32_matmul();

/// Whether the convolution algorithm search times its candidates (torch.backends.cudnn.benchmark; on by default
/// here, because the timed search is what makes minidl's step fast). When on, the first use of a shape runs
/// every cuDNN algorithm (cudnnFind) and minidl's own kernels on the real buffers and keeps the fastest. When off,
/// cuDNN's heuristic ranks its algorithms without running them and minidl's own kernels, where they apply, are
/// taken untimed, as during graph capture: no trial runs, so also no trial runs of algorithms that need large
/// workspaces or that a tool cannot follow (compute-sanitizer racecheck stops inside cudnnFind's backward
/// searches). Each setting keeps its own choices. Also off under MINIDL_CUDNN_BENCHMARK=0. The same
/// switch governs float32 matmul's search among cuBLASLt's algorithms (src/cuda/matmul.cu).
void set_cudnn_benchmark(bool enabled);
bool cudnn_benchmark();

/// Records the library's work on the current device into a CUDA graph and replays it, as torch.cuda.CUDAGraph.
/// Between capture_begin() and capture_end() nothing runs: kernels are recorded, and memory comes from a
/// private pool that stays reserved for the graph (tensors allocated during capture keep their addresses for
/// every replay). The captured code must not synchronise with the host; random ops (dropout) draw fresh
/// numbers at every replay.
class CUDAGraph {
 public:
  CUDAGraph();
  ~CUDAGraph();
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;
  void capture_begin();
  void capture_end();
  void replay();
  /// Destroys the graph and returns its memory pool to the general cache.
  void reset();
  bool captured() const;
  /// Kernel (and memcpy/memset) nodes in the captured graph.
  std::size_t num_nodes() const;
  /// Writes the captured graph as a Graphviz file (cudaGraphDebugDotPrint, verbose: every node with its kernel,
  /// launch parameters and copy addresses, and the dependencies), as torch.cuda.CUDAGraph.debug_dump does.
  void debug_dump(const std::string& path) const;

 private:
  struct Impl;
  Impl* impl_;
};

/// True while the calling thread captures a graph on the current device.
bool is_capturing();

/// Bracket the region a profiler started with profiling off records (Nsight Compute's
/// `--profile-from-start off`, Nsight Systems' `--capture-range=cudaProfilerApi`), as
/// torch.cuda.profiler.start/stop. No-ops in a CPU-only build.
void profiler_start();
void profiler_stop();

/// What the per-shape convolution algorithm search has decided so far in this process, one line per shape,
/// settings and pass: who runs it (a cuDNN algorithm or one of minidl's own kernels), its measured time, and
/// cuDNN's best time beside it. Empty in a CPU-only build.
std::vector<std::string> conv2d_algorithm_choices();

}  // namespace cuda

/// Only deterministic algorithms (cuDNN, atomics-free reductions), chosen without timing them (cudnn_benchmark()
/// is then ignored: a timed choice can differ between runs): same seed, bitwise-identical results.
void set_deterministic(bool enabled);
bool deterministic();

}  // namespace minidl
