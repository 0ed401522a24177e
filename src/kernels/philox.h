#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the counter-based
// generator cuRAND uses on the GPU: block n's four 32-bit numbers depend only on the key and the counter n,
// so any range of a stream can be computed by any thread, in any order, with the same result. Compiled for host
// and device: the CPU's uniform stream (cpu/uniform_stream.h) and the random kernels of both backends
// (kernels/random.h) share it.
#include <cstdint>

#ifdef __CUDACC__
#define MINIDL_PHILOX_HD __host__ __device__ __forceinline__
#else
#define MINIDL_PHILOX_HD inline
#endif
// Straight-line rounds, so that a loop over blocks can vectorise on the CPU. GCC's spelling stays out of every
// nvcc pass (its front end warns about it even in the host pass).
#if defined(__CUDA_ARCH__)
#define MINIDL_PHILOX_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)
#define MINIDL_PHILOX_UNROLL
#else
#define MINIDL_PHILOX_UNROLL _Pragma("GCC unroll 10")
#endif

namespace minidl {
namespace kernels {

struct Philox4x32 {
  std::uint32_t key0, key1;

  /// The four numbers of counter (c0, c1, c2, c3), in out[0..3].
  MINIDL_PHILOX_HD void operator()(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3,
                                   std::uint32_t* out) const {
    std::uint32_t k0 = key0, k1 = key1;
    MINIDL_PHILOX_UNROLL
    for (int round = 0; round < 10; ++round) {
      const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0, p1 = std::uint64_t{0xCD9E8D57u} * c2;
      const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
      const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<std::uint32_t>(p1);
      c3 = static_cast<std::uint32_t>(p0);
      c0 = n0;
      c2 = n2;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }
};

}  // namespace kernels
}  // namespace minidl
