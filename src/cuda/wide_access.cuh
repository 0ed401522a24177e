#pragma once
// Wide global-memory accesses for memory-bound kernels (launch.cuh, pool2d.cu): N consecutive elements move
// as 16-byte loads and stores (8- or 4-byte ones where N * sizeof(T) is not a multiple of 16) instead of N scalar
// ones. Scalar 4-byte accesses left a large part of the device's bandwidth unused in the elementwise kernels, and
// 8-byte pairs held 2x2 max pooling well below the copy bandwidth. The host checks the alignment
// (is_aligned) and otherwise runs scalar code.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace minidl {
namespace gpu {

/// Whether `p` is a multiple of `bytes`, as a wide access of that width needs (null passes).
inline bool is_aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

/// The width in bytes of the accesses that move N contiguous T: the largest power of two up to 16 that divides
/// N * sizeof(T). The address must be aligned to it (the host checks).
template <class T, int N> __host__ __device__ constexpr int access_bytes() {
  int bytes = 16;
  while ((N * static_cast<int>(sizeof(T))) % bytes != 0) bytes /= 2;
  return bytes;
}

template <int Bytes> struct AccessWord;
template <> struct AccessWord<1> { using type = unsigned char; };
template <> struct AccessWord<2> { using type = unsigned short; };
template <> struct AccessWord<4> { using type = unsigned int; };
template <> struct AccessWord<8> { using type = uint2; };
template <> struct AccessWord<16> { using type = uint4; };

/// N consecutive T in registers, as load_wide returns them and store_wide takes them. Aligned to the access width,
/// so that the words and the elements share one layout: with T's own alignment the compiler passed some loaded
/// floats through integer registers first.
template <class T, int N> struct alignas(access_bytes<T, N>()) Wide {
  static constexpr int size = N;
  T v[N];
};

/// p[0] .. p[N - 1], read as access_bytes<T, N>()-wide words. memcpy moves the bits between the words and T (no
/// type punning); copying a struct of T from global memory directly compiled to scalar loads. The pointers are not
/// __restrict__: callers' outputs may alias their inputs (elementwise ops in place), and with it the compiler made
/// other loads of the kernel non-coherent (ld.global.nc).
template <int N, class T> __device__ Wide<T, N> load_wide(const T* p) {
  using Word = typename AccessWord<access_bytes<T, N>()>::type;
  constexpr int kWords = N * static_cast<int>(sizeof(T)) / static_cast<int>(sizeof(Word));
  Word words[kWords];
#pragma unroll
  for (int k = 0; k < kWords; ++k) words[k] = reinterpret_cast<const Word*>(p)[k];
  Wide<T, N> r;
  memcpy(r.v, words, sizeof(r.v));
  return r;
}

/// Writes w to p[0] .. p[N - 1] as access_bytes<T, N>()-wide words.
template <int N, class T> __device__ void store_wide(T* p, const Wide<T, N>& w) {
  using Word = typename AccessWord<access_bytes<T, N>()>::type;
  constexpr int kWords = N * static_cast<int>(sizeof(T)) / static_cast<int>(sizeof(Word));
  Word words[kWords];
  memcpy(words, w.v, sizeof(w.v));
#pragma unroll
  for (int k = 0; k < kWords; ++k) reinterpret_cast<Word*>(p)[k] = words[k];
}

}  // namespace gpu
}  // namespace minidl
