#pragma once
// float32, bfloat16 and float16 matrix products through cuBLASLt with an algorithm chosen once per shape (see
// matmul.cu). gpu::matmul and gpu::matmul_fused (matmul.cu's backend entries) check the sizes and call this.
#include <cublasLt.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/matmul_layout.h"

namespace minidl {
namespace gpu {

/// The cuBLASLt handle of the current device, created on first use and kept for the process. Creating it before
/// a graph capture keeps the capture free of the library's set-up.
cublasLtHandle_t cublaslt();

/// Row-major out[i] = op(a[i])·op(b[i]) for i < l.batch, on stream(), the operands placed as `l` says
/// (kernels/matmul_layout.h), all of `type` (CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F), accumulated in float32 (TF32
/// where cuda::allow_tf32_matmul() allows it for float32); out is dense. All sizes are at least 1 except k (k = 0
/// writes zeros) and fit in an int (gpu::matmul checks). With an epilogue, `vector` is its bias (read) or bias
/// gradient (written), of `type`; returns false, with nothing written, when cuBLASLt offers no algorithm for that
/// epilogue here (or k = 0); without one it always runs (or throws).
bool lt_matmul(const void* a, const void* b, void* out, cudaDataType_t type, const kernels::MatmulLayout& l,
               cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT, void* vector = nullptr);

/// What the per-shape search has decided so far, one line per shape and settings: the cuBLASLt algorithm
/// (id, tile, split-K, reduction scheme), its workspace, its measured time and that of the heuristic's first.
std::vector<std::string> matmul_algorithm_choices();

}  // namespace gpu
}  // namespace minidl
