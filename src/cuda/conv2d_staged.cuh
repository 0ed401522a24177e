#pragma once
// Pieces shared by the two staged convolution kernels (see conv2d_staged.h): the band GEMM of the forward pass
// and the input gradient (conv2d_staged.cu) and the weight gradient (conv2d_staged_wgrad.cu).
#include <cstdint>
#include <vector>

#include "cuda/context.h"
#include "cuda/per_device.h"
#include "kernels/params.h"

// mma.sync with TF32 operands exists from compute capability 8.0 on; code generated for older architectures
// leaves the kernel empty, and staged_band_choices() offers nothing there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define MINIDL_STAGED_BODY 0
#else
#define MINIDL_STAGED_BODY 1
#endif

namespace minidl {
namespace gpu {

/// Division of an int in [0, 2^31) by a divisor fixed for the launch, as a multiply and a shift (Granlund and
/// Montgomery): with 2^l >= d and magic = ceil(2^(31 + l) / d), n / d = n * magic / 2^(31 + l), rounded down. The
/// staging loops split every element's index by the patch's and the reduction's sizes, where a hardware division
/// would cost about 20 instructions.
struct Divisor {
  unsigned magic = 0;
  int shift = 0;

  static Divisor of(int d) {
    int l = 0;
    while ((std::int64_t{1} << l) < d) ++l;
    Divisor r;
    r.magic = static_cast<unsigned>(((std::uint64_t{1} << (31 + l)) + static_cast<std::uint64_t>(d) - 1) /
                                    static_cast<std::uint64_t>(d));
    r.shift = 31 + l;
    return r;
  }
  __device__ int operator()(int n) const {
    return static_cast<int>((static_cast<std::uint64_t>(static_cast<unsigned>(n)) * magic) >> shift);
  }
};

__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4], float b0, float b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
}

/// The device's multiprocessors, looked up once per device: how many, and the shared memory and registers of
/// each, from which the launch plans of both kernels (DeviceSetup, WgradSetup) size their occupancy.
struct Multiprocessors {
  int count = 0;
  int smem = 0;       // bytes of shared memory per multiprocessor
  int registers = 0;  // 32-bit registers per multiprocessor
};

inline const Multiprocessors& multiprocessors() {
  static PerDevice<Multiprocessors> values;
  return values.get([](int device) {
    Multiprocessors m;
    MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&m.count, cudaDevAttrMultiProcessorCount, device));
    MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&m.smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    MINIDL_CUDA_CHECK(cudaDeviceGetAttribute(&m.registers, cudaDevAttrMaxRegistersPerMultiprocessor, device));
    return m;
  });
}

inline bool fits_int(std::int64_t v) { return v >= 0 && v < (std::int64_t{1} << 31); }

/// The weight gradient's part of staged_band_choices (conv2d_staged_wgrad.cu), for the shapes the checks common
/// to all passes let through.
std::vector<int> staged_wgrad_band_choices(const kernels::Conv2dParams& p);

}  // namespace gpu
}  // namespace minidl
