#pragma once
// functional::pixel_shuffle / pixel_unshuffle (LibTorch's), views, a permute and a reshape.
#include <cstdint>

#include "minidl/arg.h"
#include "minidl/tensor.h"

namespace minidl {
namespace nn {

struct PixelShuffleOptions {
  PixelShuffleOptions(std::int64_t upscale_factor) : upscale_factor_(upscale_factor) {}  // implicit, as LibTorch's
  MINIDL_ARG(std::int64_t, upscale_factor);
};
struct PixelUnshuffleOptions {
  PixelUnshuffleOptions(std::int64_t downscale_factor) : downscale_factor_(downscale_factor) {}
  MINIDL_ARG(std::int64_t, downscale_factor);
};

namespace functional {
using PixelShuffleFuncOptions = PixelShuffleOptions;
using PixelUnshuffleFuncOptions = PixelUnshuffleOptions;

/// (*, C * r^2, H, W) -> (*, C, H * r, W * r): channel c * r^2 + i * r + j lands at (h * r + i, w * r + j).
Tensor pixel_shuffle(const Tensor& input, const PixelShuffleFuncOptions& options);
/// The inverse: (*, C, H * r, W * r) -> (*, C * r^2, H, W).
Tensor pixel_unshuffle(const Tensor& input, const PixelUnshuffleFuncOptions& options);

}  // namespace functional
}  // namespace nn
}  // namespace minidl
