#pragma once
// The per-epoch picture of the generator's samples: images tiled into a grid as torchvision's make_grid does
// (`columns` per row, `padding` black pixels around and between them), Tanh's [-1, 1] mapped to bytes 0..255.
#include <minidl/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dcgan {

struct GrayImage {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> pixels;  // row by row
};

/// `images` (N, 1, H, W) in [-1, 1] on any device: pixel round((x + 1) / 2 * 255), values outside clamped. Throws
/// minidl::ValueError for another shape or a columns / padding out of range.
GrayImage tile_images(const minidl::Tensor& images, std::int64_t columns = 8, std::int64_t padding = 2);

/// tile_images(images) written as a PNG file (png.h).
void save_sample_grid(const minidl::Tensor& images, const std::string& path);

}  // namespace dcgan
