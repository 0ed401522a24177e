#pragma once
// A minimal PNG encoder for 8-bit grayscale images (what the sample grids need): the signature, an IHDR chunk, one
// IDAT chunk holding the zlib stream of the filtered rows (filter type 0, "None", on every row) and IEND. Each
// chunk's CRC is zlib's crc32 over its type and data, as the PNG specification (ISO/IEC 15948) defines it.
#include <cstdint>
#include <string>
#include <vector>

namespace dcgan {

/// The PNG file of a width x height grayscale image, `pixels` row by row (width * height bytes). Throws
/// minidl::ValueError naming the expected and found sizes when they disagree or a side is 0 or above 2^31 - 1.
std::vector<std::uint8_t> encode_png_gray(std::int64_t width, std::int64_t height,
                                          const std::vector<std::uint8_t>& pixels);

/// Writes encode_png_gray(...) to `path` atomically (a crash leaves the old file or the whole new one); throws
/// minidl::IOError naming the file.
void write_png_gray(const std::string& path, std::int64_t width, std::int64_t height,
                    const std::vector<std::uint8_t>& pixels);

}  // namespace dcgan
