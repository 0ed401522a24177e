#pragma once
// The CPU backend's matrix product: C = A * B (or C += A * B) on strided views, so transposed operands cost no
// copy. It is compiled for several instruction sets in one library (x86-64 baseline, AVX2 + FMA, AVX-512) and
// picks the best one the CPU supports at run time, so a portable build is as fast as a -march=native one on
// the kernels that carry the FLOPs (convolutions and linear layers). Instantiated for float and double.
#include <cstdint>
#include <vector>

namespace minidl {
namespace cpu {

/// Instruction sets gemm can run with. Every x86-64 CPU runs Baseline; other architectures only have it.
enum class CpuIsa { Baseline, Avx2, Avx512 };

/// The instruction sets this CPU and build support, Baseline first.
const std::vector<CpuIsa>& available_isas();
/// The one gemm() uses: the best available, unless the environment variable MINIDL_CPU_ISA (baseline, avx2 or
/// avx512) names an available one.
CpuIsa active_isa();
const char* isa_name(CpuIsa isa);

/// An m x n matrix view: element (i, j) is at data[i * rs + j * cs]. An offset table replaces the stride of
/// its axis: with row_offsets, element (i, j) is at data[row_offsets[i] + j * cs] (likewise col_offsets; with
/// both, at data[row_offsets[i] + col_offsets[j]]).
/// Tables describe matrices no stride can, such as the im2col matrix of a convolution read straight from
/// the image (the taps of each row start at their own offset).
template <class T>
struct MatrixView {
  T* data;
  std::int64_t rs, cs;
  const std::int64_t* row_offsets = nullptr;
  const std::int64_t* col_offsets = nullptr;
};

/// C (m x n) = A (m x k) * B (k x n), or C += A * B when `accumulate`. C must not overlap A or B, and has
/// no offset tables.
template <class T>
struct GemmArgs {
  std::int64_t m, n, k;
  MatrixView<const T> a, b;
  MatrixView<T> c;
  bool accumulate;
};

/// Runs on the calling thread (callers that already split their work over the pool use this one).
template <class T>
void gemm(const GemmArgs<T>& g);
/// Runs with the given instruction set, which must be available (tests and benchmarks compare them).
template <class T>
void gemm(const GemmArgs<T>& g, CpuIsa isa);
/// Splits C into blocks over the library's thread pool. Products under kGemmSplitFlops (some tens of
/// microseconds of work) run on the calling thread: handing blocks to the pool would cost about as much.
template <class T>
void gemm_parallel(const GemmArgs<T>& g);
constexpr double kGemmSplitFlops = 4e6;

}  // namespace cpu
}  // namespace minidl
