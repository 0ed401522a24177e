// cuda.h's device and version queries in a CUDA build. They never throw for a missing driver or GPU: they
// report it (device_count() 0, VersionInfo::error), because "why is my GPU not used?" is their main question.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "cuda/context.h"
#include "minidl/config.h"
#include "minidl/cuda.h"
#include "minidl/errors.h"

namespace minidl {
namespace cuda {
namespace {

// What a failed cudaGetDeviceCount means for the user; the CUDA name and text follow in brackets.
std::string explain_init_error(cudaError_t err, int driver_version) {
  std::string why;
  switch (err) {
    case cudaErrorNoDevice:
      why = "the driver reports no CUDA-capable device (CUDA_VISIBLE_DEVICES may hide them)";
      break;
    case cudaErrorInsufficientDriver:
      why = driver_version == 0 ? "no NVIDIA driver is installed (libcuda.so was not found)"
                                : "the NVIDIA driver is older than the CUDA runtime minidl uses";
      break;
    case cudaErrorNoKernelImageForDevice:
      why = "this build contains no kernel image for the GPU's architecture";
      break;
    case cudaErrorSystemDriverMismatch:
      why = "the NVIDIA kernel module and libcuda.so have different versions (reboot, or reinstall the driver)";
      break;
    case cudaErrorCompatNotSupportedOnDevice:
      why = "the CUDA forward-compatibility package in use does not support this GPU";
      break;
    case cudaErrorSystemNotReady:
      why = "the system is not ready for CUDA (on NVSwitch systems nvidia-fabricmanager must be running)";
      break;
    case cudaErrorStubLibrary:
      why = "the libcuda.so that was loaded is the CUDA toolkit's stub, not the driver's (check LD_LIBRARY_PATH)";
      break;
    case cudaErrorDevicesUnavailable:
      why = "every CUDA device is busy or unavailable (exclusive-process compute mode?)";
      break;
    case cudaErrorInitializationError:
      why = "the CUDA driver failed to initialise";
      break;
    default:
      why = "the CUDA runtime could not be initialised";
      break;
  }
  return detail::str(why, " [cudaGetDeviceCount: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err), "]");
}

// cudaGetDeviceCount with the error it leaves behind cleared, so that a later, unrelated
// cudaGetLastError (e.g. MINIDL_CUDA_KERNEL_CHECK) does not report it.
cudaError_t query_device_count(int& count) {
  count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  return err;
}

}  // namespace

int device_count() {
  int count = 0;
  query_device_count(count);
  return count;
}

bool is_available() { return device_count() > 0; }

std::string device_name(int index) {
  const int count = device_count();
  MINIDL_CHECK(index >= 0 && index < count, ValueError, "cuda::device_name: index ", index,
               " is out of range (", count, " visible CUDA device(s))");
  cudaDeviceProp prop{};
  MINIDL_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

VersionInfo versions() {
  VersionInfo v;
  v.built_with_cuda = true;
  v.build_runtime = CUDART_VERSION;
  v.build_cudnn = CUDNN_VERSION;
  // Encoded like cuDNN 9 (major*10000 + minor*100 + patch), spelled out because CUBLAS_VERSION's encoding
  // changed between CUDA 11 and 12.
  v.build_cublas = CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH;
  v.build_architectures = MINIDL_BUILD_CUDA_ARCHITECTURES;

  if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) v.runtime = 0;
  // Succeeds with 0 when no driver is installed.
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) v.driver = 0;
  int count = 0;
  const cudaError_t err = query_device_count(count);
  if (err != cudaSuccess) v.error = explain_init_error(err, v.driver);

  // Both are plain library calls: they need neither a driver nor a GPU.
  v.cudnn = static_cast<int>(cudnnGetVersion());
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    v.cublas = major * 10000 + minor * 100 + patch;
  return v;
}

std::vector<DeviceProperties> devices() {
  std::vector<DeviceProperties> out;
  int count = 0;
  // Without a usable driver there is nothing to list; versions().error says why.
  if (query_device_count(count) != cudaSuccess) return out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    MINIDL_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    DeviceProperties d;
    d.index = i;
    d.name = prop.name;
    d.major = prop.major;
    d.minor = prop.minor;
    d.multiprocessors = prop.multiProcessorCount;
    try {
      // Free memory needs the device's context (created here if minidl has not used the device yet).
      gpu::DeviceGuard guard(i);
      MINIDL_CUDA_CHECK(cudaMemGetInfo(&d.free_memory, &d.total_memory));
    } catch (const CudaError&) {
      // The device exists but this process cannot get a context on it (busy, exclusive-process mode, out of
      // memory): none of its memory is available to minidl. Listing it still matters; using it reports the error.
      cudaGetLastError();
      d.total_memory = prop.totalGlobalMem;
      d.free_memory = 0;
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace cuda
}  // namespace minidl
