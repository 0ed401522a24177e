#pragma once
// minidl's flash-attention kernels (src/cuda/flash_attention.cu), GPU only: the CPU and every case these kernels
// do not take run the composed reference path of scaled_dot_product_attention (src/layers/attention.cpp), which
// the tests compare them with. This header includes no CUDA header.
#include <cstdint>

namespace minidl {
namespace gpu {

/// One operand seen as (batch, batch2, rows, cols): element strides of the outer batch dim, the inner batch dim
/// (heads) and the rows; the cols are contiguous. A head-split transpose (N, L, H, d) -> (N, H, L, d) is read
/// in place through these strides.
template <class P>
struct AttentionRows {
  P data = nullptr;
  std::int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
};

struct FlashAttentionShape {
  std::int64_t batch = 0;  // outer batch size (all leading dims but the last one merged)
  std::int64_t heads = 0;  // inner batch size
  int L = 0, S = 0;        // query and key rows
  int E = 0, Ev = 0;       // head dims of query/key and of value, each in [1, kFlashMaxHeadDim]
  float scale = 1.f;       // multiplies query · keyᵀ
  bool causal = false;     // key j visible to query i only when j <= i
};

constexpr int kFlashMaxHeadDim = 128;
/// Query and key rows up to this (the grid's y dim counts 64-row tiles).
constexpr std::int64_t kFlashMaxRows = 65535 * 64;

/// float32. Writes out (batch, heads, L, Ev) and lse (batch * heads * L, contiguous): the natural log of each
/// query's softmax denominator after the scale, what the backward pass recomputes the probabilities from.
void flash_attention_forward(const FlashAttentionShape& s, AttentionRows<const float*> q, AttentionRows<const float*> k,
                             AttentionRows<const float*> v, AttentionRows<float*> out, float* lse);

/// float32. From the forward's inputs, lse, dout and delta = rowsum(dout * out) (batch * heads * L, contiguous),
/// overwrites dq, dk and dv (each in its input's shape): dk and dv from one pass per key tile, dq from one per
/// query tile, so no atomics and the results are deterministic.
void flash_attention_backward(const FlashAttentionShape& s, AttentionRows<const float*> q,
                              AttentionRows<const float*> k, AttentionRows<const float*> v,
                              AttentionRows<const float*> dout, const float* lse, const float* delta,
                              AttentionRows<float*> dq, AttentionRows<float*> dk, AttentionRows<float*> dv);

}  // namespace gpu
}  // namespace minidl
