#pragma once
// Convolution kernels that stage a band of the source image in shared memory, then multiply on TF32 tensor
// cores (mma.sync) with every operand read from shared memory. For a 32 → 64 channel 3×3 convolution on 26×26
// images the implicit-GEMM kernels (conv2d_igemm.h), which gather each tile's operand from global memory
// element by element, were issue-bound: Nsight Compute showed about 900 instructions per warp and tile of 32
// reduction steps, 25% occupancy and a second, nearly empty wave.
// Here a block loads its rows of every channel once (a 3×3 window reads each element 9 times from shared memory
// instead of from global memory), so the inner loop is one 64-bit tap-table load, shared-memory loads (the weights
// stored in fragment order: two 128-bit loads per step) and mma, software-pipelined one step ahead. That loop
// (about 4 instructions per mma, where the first version issued about 24) is what makes the forward and input
// gradient fast (measurements: docs/BENCHMARKS.md, bench_ops_gpu conv2/staged_*).
// The weight gradient reduces over all N·P·Q pixels instead: blocks of four-warp groups stage a band of pixels'
// source rows and dy, multiply them the same way (dy fragments by ldmatrix, X gathered from the patch through a
// table of window corners), and sum the groups' results and then the blocks' partial sums in a fixed order.
// conv2d.cpp offers them as candidates in its per-shape search when TF32 is allowed; float only, deterministic.
#include "cuda/conv2d_igemm.h"
#include "kernels/elementwise.h"
#include "kernels/params.h"

#include <vector>

namespace minidl {
namespace gpu {

/// The band counts (blocks per image along the output rows) worth timing for `p` in `pass`, best first: the
/// kernel's cost model's pick, then the fewest bands that let two and three blocks share a multiprocessor. For
/// the weight gradient, the number of bands an image's P·Q pixels are cut into (each a multiple of 16 pixels
/// long): the cost model's pick, the longest band that fits in shared memory, and bands of half the pick's length.
/// Empty when the kernels do not handle `p` in `pass`: they take the forward pass, the stride-1 input gradient
/// and the weight gradient with groups 1, 32-bit offsets within an image and a weight tensor, a device of
/// compute capability 8.0 or later, and shared memory for the weights of 32 output channels plus at least one
/// band of source rows (weight gradient: a band's source rows of the channels of 96 columns (c, r, s), and dy).
std::vector<int> staged_band_choices(const kernels::Conv2dParams& p, ConvPass pass);

/// y = act(conv(x, w) + bias) (bias may be null), in `bands` blocks per image and 32 output channels (one of
/// staged_band_choices). Same layouts as kernels/backend.h.
void staged_conv2d_forward(const kernels::Conv2dParams& p, const float* x, const float* w, const float* bias, float* y,
                           kernels::Activation act, int bands);
/// dx = gradient of the convolution w.r.t. x (stride 1); overwrites dx.
void staged_conv2d_backward_input(const kernels::Conv2dParams& p, const float* dy, const float* w, float* dx, int bands);
/// dw = gradient w.r.t. the weight, and db = the bias's (dy summed per output channel) when dbias is not null;
/// overwrites them. Any stride, padding and dilation; takes a gpu::Workspace for the partial sums of its splits.
void staged_conv2d_backward_weight(const kernels::Conv2dParams& p, const float* x, const float* dy, float* dw,
                                   float* dbias, int bands);

}  // namespace gpu
}  // namespace minidl
