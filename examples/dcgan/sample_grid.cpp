#include "sample_grid.h"

#include <minidl/minidl.h>

#include <algorithm>
#include <cmath>

#include "png.h"

namespace dcgan {

GrayImage tile_images(const minidl::Tensor& images, std::int64_t columns, std::int64_t padding) {
  MINIDL_CHECK(images.dim() == 4 && images.size(1) == 1 && images.size(0) >= 1, minidl::ValueError,
               "tile_images: expected grayscale images (N, 1, H, W) with N >= 1, found ",
               minidl::shape_str(images.sizes()));
  MINIDL_CHECK(columns >= 1 && padding >= 0, minidl::ValueError,
               "tile_images: columns must be >= 1 and padding >= 0, "
               "found columns ",
               columns, ", padding ", padding);
  const std::int64_t n = images.size(0), h = images.size(2), w = images.size(3);
  const std::int64_t cols = std::min(columns, n), rows = (n + cols - 1) / cols;
  GrayImage grid;
  grid.width = cols * (w + padding) + padding;
  grid.height = rows * (h + padding) + padding;
  grid.pixels.assign(static_cast<std::size_t>(grid.width * grid.height), 0);
  const std::vector<float> v = images.detach().to(minidl::kFloat32).cpu().contiguous().to_vector<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t top = padding + (i / cols) * (h + padding), left = padding + (i % cols) * (w + padding);
    for (std::int64_t y = 0; y < h; ++y) {
      for (std::int64_t x = 0; x < w; ++x) {
        const double value = (static_cast<double>(v[(i * h + y) * w + x]) + 1.0) * 127.5;
        // A NaN (a diverged generator) shows black rather than reaching lround.
        const double byte = std::isnan(value) ? 0.0 : std::clamp(value, 0.0, 255.0);
        grid.pixels[(top + y) * grid.width + left + x] = static_cast<std::uint8_t>(std::lround(byte));
      }
    }
  }
  return grid;
}

void save_sample_grid(const minidl::Tensor& images, const std::string& path) {
  const GrayImage grid = tile_images(images);
  write_png_gray(path, grid.width, grid.height, grid.pixels);
}

}  // namespace dcgan
