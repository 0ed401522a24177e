#pragma once
// The network's input from a batch of (N, 1, 32, 32) images, made on the batch's device with tensor ops: the
// standard CIFAR augmentation (torchvision's RandomCrop(32, padding=4) and RandomHorizontalFlip(), per image) and
// the grayscale repeated to three channels. The random numbers are drawn from minidl's CPU generator and copied to
// the device (3N integers per batch), so that a CPU and a GPU run from one seed crop and flip alike, and a resumed
// run (which restores the generator) continues the uninterrupted one's draws.
#include <minidl/minidl.h>

#include <cstdint>

namespace resnet {

/// Pixels of padding around each image before the 32x32 crop.
inline constexpr std::int64_t kCropPadding = 4;

/// Each image's crop offsets (dy, dx in [0, 2 * kCropPadding]) and flip (0 or 1): int64 (N) each.
struct CropFlipDraws {
  minidl::Tensor dy, dx, flip;
};

/// Draws a batch's CropFlipDraws of `n` images from minidl's CPU generator (dy, then dx, then flip), on `device`.
CropFlipDraws draw_crop_flip(std::int64_t n, const minidl::Device& device);

/// gray (N, 1, 32, 32) padded by kCropPadding with `background`, cropped to 32x32 at (dy, dx), mirrored where
/// flip is 1, and repeated to (N, 3, 32, 32): out[n, c, i, j] = padded[n, 0, dy + i, dx + (flip ? 31 - j : j)].
/// Two gathers on gray's device; no gradient.
minidl::Tensor crop_flip(const minidl::Tensor& gray, const CropFlipDraws& draws, double background);

/// gray (N, 1, 32, 32) repeated to (N, 3, 32, 32), contiguous: the input without augmentation (and for testing).
minidl::Tensor to_three_channels(const minidl::Tensor& gray);

}  // namespace resnet
