#include "png.h"

#include <minidl/errors.h>
#include <zlib.h>

#include <limits>

#include "io/atomic_file.h"

namespace dcgan {

namespace {

void put_u32_be(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

/// Length, type, data, then the CRC of type and data.
void put_chunk(std::vector<std::uint8_t>& out, const char (&type)[5], const std::vector<std::uint8_t>& data) {
  put_u32_be(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t type_at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), out.data() + type_at, static_cast<uInt>(out.size() - type_at));
  put_u32_be(out, static_cast<std::uint32_t>(crc));
}

}  // namespace

std::vector<std::uint8_t> encode_png_gray(std::int64_t width, std::int64_t height,
                                          const std::vector<std::uint8_t>& pixels) {
  constexpr std::int64_t kMaxSide = std::numeric_limits<std::int32_t>::max();  // the format's limit
  MINIDL_CHECK(width >= 1 && width <= kMaxSide && height >= 1 && height <= kMaxSide, minidl::ValueError,
               "encode_png_gray: width and height must lie in [1, 2^31 - 1], found ", width, " x ", height);
  MINIDL_CHECK(static_cast<std::int64_t>(pixels.size()) == width * height, minidl::ValueError, "encode_png_gray: a ",
               width, " x ", height, " image needs ", width * height, " pixel bytes, found ", pixels.size());

  // Each row is its filter-type byte (0: None) followed by the row's pixels.
  std::vector<std::uint8_t> raw;
  raw.reserve(static_cast<std::size_t>(height * (width + 1)));
  for (std::int64_t y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + y * width, pixels.begin() + (y + 1) * width);
  }
  uLongf deflated_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<std::uint8_t> deflated(deflated_size);
  const int rc =
      compress2(deflated.data(), &deflated_size, raw.data(), static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION);
  MINIDL_CHECK(rc == Z_OK, minidl::Error, "encode_png_gray: zlib's compress2 failed with status ", rc);
  deflated.resize(deflated_size);

  std::vector<std::uint8_t> header;
  put_u32_be(header, static_cast<std::uint32_t>(width));
  put_u32_be(header, static_cast<std::uint32_t>(height));
  header.insert(header.end(), {8, 0, 0, 0, 0});  // bit depth 8, grayscale, deflate, adaptive filtering, no interlace

  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", deflated);
  put_chunk(png, "IEND", {});
  return png;
}

void write_png_gray(const std::string& path, std::int64_t width, std::int64_t height,
                    const std::vector<std::uint8_t>& pixels) {
  const std::vector<std::uint8_t> png = encode_png_gray(width, height, pixels);
  minidl::io::atomic_write_file(path, png.data(), png.size());
}

}  // namespace dcgan
