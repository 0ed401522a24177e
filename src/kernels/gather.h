#pragma once
// Row gather and scatter-add along the middle dimension of an (outer, n, inner) view: the kernels behind
// index_select and its backward, declared once for both backends (like kernels/backend.h) so the CPU
// (src/cpu/gather.cpp) and CUDA (src/cuda/gather.cu) versions cannot drift apart. Tensors are contiguous and
// allocated by the caller, which has checked shapes, dtypes and devices; `index` is int64 with k elements.
#include <cstdint>

#include "minidl/config.h"
#include "minidl/tensor.h"

#define MINIDL_GATHER_KERNELS                                                                                    \
  /* out (outer, k, inner)[o, j, i] = src (outer, n, inner)[o, index[j], i]; every index must lie in [0, n). */  \
  void index_select(const Tensor& src, const Tensor& index, Tensor& out, std::int64_t outer, std::int64_t n,     \
                    std::int64_t inner);                                                                         \
  /* dst (outer, n, inner)[o, index[j], i] += src (outer, k, inner)[o, j, i], repeated rows summed in the order */ \
  /* of j (deterministic: no atomics); every index must lie in [0, n). Floating dtypes only. */                 \
  void index_add(const Tensor& src, const Tensor& index, Tensor& dst, std::int64_t outer, std::int64_t n,        \
                 std::int64_t inner);                                                                            \
  /* The smallest position j with index[j] outside [0, n), or -1 when all are in range. On CUDA this reads */   \
  /* the answer back, so it waits for the stream. */                                                             \
  std::int64_t first_out_of_range(const Tensor& index, std::int64_t n);

namespace minidl {
namespace cpu {
MINIDL_GATHER_KERNELS
}  // namespace cpu
#if MINIDL_CUDA_ENABLED
namespace gpu {
MINIDL_GATHER_KERNELS
}  // namespace gpu
#endif
}  // namespace minidl
