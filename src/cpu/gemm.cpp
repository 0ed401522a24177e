// Multi-ISA build of the GEMM in gemm_kernel.inc, and the run-time choice between the builds.
//
// Each instruction set gets its own namespace and `#pragma GCC target` region, so its code may use that
// set's instructions and its symbols cannot collide with another build's. The library's other code is built
// for the portable baseline (unless MINIDL_NATIVE), apart from a few loops the compiler vectorises itself,
// compiled per instruction set through MINIDL_CPU_CLONES (cpu/cpu_clones.h). Eigen is not
// used here: its vector width is fixed by the compiler flags of the whole translation unit, and its template
// instances compiled for two instruction sets would be merged by the linker.
#include "cpu/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "cpu/parallel.h"
#include "cpu/scratch.h"
#include "minidl/errors.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MINIDL_GEMM_X86_BUILDS 1
#include <immintrin.h>
#else
#define MINIDL_GEMM_X86_BUILDS 0
#endif

namespace minidl {
namespace cpu {
namespace {

/// The part of `v` from element (i0, j0) on, as a view of its own.
template <class T>
MatrixView<T> corner(MatrixView<T> v, std::int64_t i0, std::int64_t j0) {
  if (v.row_offsets) v.row_offsets += i0; else v.data += i0 * v.rs;
  if (v.col_offsets) v.col_offsets += j0; else v.data += j0 * v.cs;
  return v;
}

namespace baseline {  // SSE2 on x86-64; whatever the compiler targets elsewhere
constexpr int kVecBytes = 16;
constexpr int kMR = 4;
constexpr int kNV = 2;
template <class V>
V fmadd(V a, V b, V c) {
  return a * b + c;
}
#include "cpu/gemm_kernel.inc"
}  // namespace baseline

#if MINIDL_GEMM_X86_BUILDS
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {  // 16 ymm registers: 12 accumulators, 2 B vectors, 1 broadcast
constexpr int kVecBytes = 32;
constexpr int kMR = 6;
constexpr int kNV = 2;
inline __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
inline __m256d fmadd(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
#include "cpu/gemm_kernel.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
namespace avx512 {  // 32 zmm registers: 16 accumulators, 2 B vectors, broadcasts
constexpr int kVecBytes = 64;
constexpr int kMR = 8;
constexpr int kNV = 2;
inline __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
inline __m512d fmadd(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
#include "cpu/gemm_kernel.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

std::vector<CpuIsa> detect_isas() {
  std::vector<CpuIsa> isas{CpuIsa::Baseline};
#if MINIDL_GEMM_X86_BUILDS
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XGETBV).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isas.push_back(CpuIsa::Avx2);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    isas.push_back(CpuIsa::Avx512);
#endif
  return isas;
}

CpuIsa choose_isa() {
  const std::vector<CpuIsa>& isas = available_isas();
  const char* env = std::getenv("MINIDL_CPU_ISA");
  if (!env || !*env) return isas.back();
  for (CpuIsa isa : isas) {
    if (std::strcmp(env, isa_name(isa)) == 0) return isa;
  }
  std::string names;
  for (CpuIsa isa : isas) names += std::string(names.empty() ? "" : ", ") + isa_name(isa);
  throw ValueError(detail::str("MINIDL_CPU_ISA=", env, ": this CPU and build support ", names));
}

}  // namespace

const std::vector<CpuIsa>& available_isas() {
  static const std::vector<CpuIsa> isas = detect_isas();
  return isas;
}

CpuIsa active_isa() {
  static const CpuIsa isa = choose_isa();
  return isa;
}

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Baseline: return "baseline";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "?";
}

template <class T>
void gemm(const GemmArgs<T>& g, CpuIsa isa) {
  MINIDL_CHECK(std::find(available_isas().begin(), available_isas().end(), isa) != available_isas().end(), ValueError,
               "gemm: instruction set ", isa_name(isa), " is not available on this CPU or in this build");
  MINIDL_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0, ValueError, "gemm: sizes must be >= 0, found m=", g.m, " n=", g.n,
               " k=", g.k);
  MINIDL_CHECK(!g.c.row_offsets && !g.c.col_offsets, ValueError, "gemm: the output view cannot have offset tables");
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) {  // the packed loops would not run: C = 0 (or stays C)
    if (g.accumulate) return;
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j) g.c.data[i * g.c.rs + j * g.c.cs] = T(0);
    return;
  }
  switch (isa) {
#if MINIDL_GEMM_X86_BUILDS
    case CpuIsa::Avx512: avx512::Kernel<T>::run(g); return;
    case CpuIsa::Avx2: avx2::Kernel<T>::run(g); return;
#endif
    default: baseline::Kernel<T>::run(g); return;
  }
}

template <class T>
void gemm(const GemmArgs<T>& g) {
  gemm(g, active_isa());
}

namespace {

/// C's blocks start on tile boundaries: multiples of every build's MR (rows) and NR (columns).
constexpr std::int64_t kRowAlign = 24, kColAlign = 32;

/// How many equal ranges of k a product is summed in (1: none). Only for a small C over a long k (say 64 x 128
/// over k = 9216): cutting C alone gave 12 blocks for 16 threads, each packing a 24 x 9216 panel of A and a
/// 9216 x 32 panel of B (2 MB) for 14 MFLOP, too little work per packed byte to scale with the threads (see
/// docs/BENCHMARKS.md, session 6). The count depends on the shape alone, never on the thread
/// count, so the result stays the same for every thread count.
std::int64_t k_splits(std::int64_t m, std::int64_t n, std::int64_t k) {
  constexpr std::int64_t kMinRange = 512, kMaxSplits = 16, kMaxC = 64 * 1024;
  if (m * n > kMaxC || k < 8 * std::max(m, n) || k < 2 * kMinRange) return 1;
  return std::min(kMaxSplits, k / kMinRange);
}

/// C = A * B (or C += A * B) as the sum of `splits` products over equal ranges of k, each into its own partial
/// (on the pool), then added in range order. Each range's product is cut further into column blocks (on tile
/// boundaries) up to about kBlocksPerThread parts per thread, so that a core slowed by other work hands parts to
/// the others: with one part per thread (16 ranges on 16 threads) such a product scaled well below what a GEMM
/// running on each core alone does. Column blocks re-pack A's range (64 x 576 for 64 x 128 over k = 9216 in
/// 16 ranges) rather than B's (576 x 128).
template <class T>
void gemm_split_k(const GemmArgs<T>& g, std::int64_t splits) {
  const std::int64_t mn = g.m * g.n, range = (g.k + splits - 1) / splits;
  splits = (g.k + range - 1) / range;
  T* partials = scratch<T, Scratch::GemmPartials>(splits * mn);
  const std::int64_t threads = device().numThreads();
  const std::int64_t col_parts =
      std::clamp<std::int64_t>((kBlocksPerThread * threads + splits - 1) / splits, 1,
                               (g.n + kColAlign - 1) / kColAlign);
  const std::int64_t col_step = (g.n / col_parts + kColAlign - 1) / kColAlign * kColAlign;
  const double part_flops = 2.0 * static_cast<double>(g.m * col_step * range);
  parallel_for(splits * col_parts, part_flops / 8.0, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t part = begin; part < end; ++part) {
      const std::int64_t s = part / col_parts, k0 = s * range, j0 = part % col_parts * col_step;
      const std::int64_t j1 = std::min(g.n, j0 + col_step);
      if (j0 >= j1) continue;
      GemmArgs<T> sub{g.m, j1 - j0, std::min(range, g.k - k0), corner(g.a, 0, k0), corner(g.b, k0, j0),
                      {partials + s * mn + j0, g.n, 1}, false};
      gemm(sub);
    }
  });
  parallel_for(mn, kRemotePartialCost * static_cast<double>(splits), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t e = begin; e < end; ++e) {
      T& c = g.c.data[e / g.n * g.c.rs + e % g.n * g.c.cs];
      T sum = g.accumulate ? c + partials[e] : partials[e];
      for (std::int64_t s = 1; s < splits; ++s) sum += partials[s * mn + e];
      c = sum;
    }
  });
}

}  // namespace

template <class T>
void gemm_parallel(const GemmArgs<T>& g) {
  const std::int64_t threads = device().numThreads();
  const double flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  if (flops >= kGemmSplitFlops) {
    const std::int64_t splits = k_splits(g.m, g.n, g.k);
    if (splits > 1) return gemm_split_k(g, splits);  // on one thread too: the same sums whatever the count
  }
  if (threads <= 1 || flops < kGemmSplitFlops) {
    gemm(g);
    return;
  }
  // C is cut into row and column blocks on tile boundaries, the longer side first: up to kBlocksPerThread
  // blocks per thread when it has that many, otherwise as many as it has times enough blocks of the other side
  // to make up the rest. Several parts per thread, as parallel_for's blocks, let a core slowed by other work
  // hand parts to the others: on a shared many-core host the same GEMM run on every core at once goes at rates that
  // differ by more than 2x between cores, and with one part per thread a small fully connected layer's input and weight
  // gradients waited for the slowest. Each block packs its own panels; the repeated packing of the shared operands is
  // small next to the block's product. Every element is still summed in the same order, so the result does not depend
  // on the thread count.
  const auto blocks_of = [](std::int64_t len, std::int64_t align) { return (len + align - 1) / align; };
  const bool cols_first = g.n >= g.m;
  const std::int64_t first_blocks = cols_first ? blocks_of(g.n, kColAlign) : blocks_of(g.m, kRowAlign);
  const std::int64_t second_blocks = cols_first ? blocks_of(g.m, kRowAlign) : blocks_of(g.n, kColAlign);
  const std::int64_t first_parts = std::min(kBlocksPerThread * threads, first_blocks);
  const std::int64_t second_parts =
      std::max<std::int64_t>(1, std::min(second_blocks, kBlocksPerThread * threads / first_parts));
  const std::int64_t row_parts = cols_first ? second_parts : first_parts;
  const std::int64_t col_parts = cols_first ? first_parts : second_parts;
  // Part i of a side of length len: [i * step, min(len, (i + 1) * step)), step a multiple of align.
  const auto step_of = [](std::int64_t len, std::int64_t parts, std::int64_t align) {
    return (len / parts + align - 1) / align * align;
  };
  const std::int64_t row_step = step_of(g.m, row_parts, kRowAlign), col_step = step_of(g.n, col_parts, kColAlign);
  const std::int64_t parts = row_parts * col_parts;
  parallel_for(parts, flops / static_cast<double>(parts) / 8.0, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t part = begin; part < end; ++part) {
      const std::int64_t i0 = part / col_parts * row_step, i1 = std::min(g.m, i0 + row_step);
      const std::int64_t j0 = part % col_parts * col_step, j1 = std::min(g.n, j0 + col_step);
      if (i0 >= i1 || j0 >= j1) continue;
      GemmArgs<T> sub = g;
      sub.m = i1 - i0;
      sub.n = j1 - j0;
      sub.a = corner(g.a, i0, 0);
      sub.b = corner(g.b, 0, j0);
      sub.c = corner(g.c, i0, j0);
      gemm(sub);
    }
  });
}

#define MINIDL_INSTANTIATE_GEMM(T)                       \
  template void gemm<T>(const GemmArgs<T>&);             \
  template void gemm<T>(const GemmArgs<T>&, CpuIsa);     \
  template void gemm_parallel<T>(const GemmArgs<T>&);
MINIDL_INSTANTIATE_GEMM(float)
MINIDL_INSTANTIATE_GEMM(double)
#undef MINIDL_INSTANTIATE_GEMM

}  // namespace cpu
}  // namespace minidl
