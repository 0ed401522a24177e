#pragma once
// float32 matrix products through cuBLASLt with an algorithm chosen once per shape (see matmul.cu). gpu::matmul
// (matmul.cu's backend entry) checks the sizes and calls this for float32 tensors.
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
/// (kernels/matmul_layout.h); out is dense. All sizes are at least 1 except k (k = 0 writes zeros) and fit in an
/// int (gpu::matmul checks).
void lt_matmul(const float* a, const float* b, float* out, const kernels::MatmulLayout& l);

/// What the per-shape search has decided so far, one line per shape and settings: the cuBLASLt algorithm
/// (id, tile, split-K, reduction scheme), its workspace, its measured time and that of the heuristic's first.
std::vector<std::string> matmul_algorithm_choices();

}  // namespace gpu
}  // namespace minidl
