#pragma once
// Reader for IDX files (the MNIST / Fashion-MNIST format), raw or gzip-compressed.
//
// Layout: magic 00 00 <type> <ndims>, then ndims big-endian u32 sizes, then the data. Only type 0x08
// (unsigned byte) is accepted: images have 3 dimensions (count, rows, cols), labels have 1 (count).
// Every deviation -- truncation anywhere, wrong magic/type/ndims, zero or absurd sizes, trailing bytes,
// labels out of range, corrupt gzip -- throws minidl::FormatError naming the file, the field, the expected
// and the found value. A reader either returns a complete, validated object or throws.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace minidl::data {

struct IdxImages {
  std::int64_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count*rows*cols bytes, row-major (image, row, col)
};

struct IdxLabels {
  std::int64_t count = 0;
  std::vector<std::uint8_t> labels;  // count values, each < the num_classes it was read with
};

/// Largest size accepted for one IDX dimension. IDX sizes are u32; a set top bit only comes from a
/// corrupt (or byte-swapped) header, and this bound keeps the 3-factor product check meaningful.
constexpr std::int64_t kIdxMaxDim = 0x7fffffff;

/// Largest decompressed size accepted from a gzip stream (2 GiB): a bound against gzip bombs that is
/// still 40x the largest MNIST-family file.
constexpr std::size_t kMaxGunzipBytes = std::size_t{1} << 31;

IdxImages read_idx_images(const std::string& path);
IdxLabels read_idx_labels(const std::string& path, int num_classes = 10);

/// Parse bytes already in memory: raw IDX, or gzip (recognised by its 1f 8b magic). `name` is used in
/// error messages. Used by fuzzers and by the file readers above.
IdxImages parse_idx_images(const std::vector<std::uint8_t>& bytes, const std::string& name);
IdxLabels parse_idx_labels(const std::vector<std::uint8_t>& bytes, const std::string& name,
                           int num_classes = 10);

/// Throws FormatError when the two files do not describe the same number of examples.
void check_same_count(const IdxImages& images, const IdxLabels& labels, const std::string& images_path,
                      const std::string& labels_path);

/// Reads a whole file; when it starts with the gzip magic, returns the decompressed content instead.
/// Throws IOError when the file cannot be opened or read, FormatError when the gzip data is corrupt.
std::vector<std::uint8_t> read_file_maybe_gzip(const std::string& path);

/// Decompresses a gzip stream (concatenated members allowed, as gzip(1) does). Throws FormatError
/// naming `name` when the stream is corrupt or truncated, has trailing non-gzip bytes, or would
/// decompress to more than max_bytes.
std::vector<std::uint8_t> gunzip(const std::vector<std::uint8_t>& gz, const std::string& name,
                                 std::size_t max_bytes = kMaxGunzipBytes);

/// True when bytes start with the gzip magic 1f 8b.
bool is_gzip(const std::vector<std::uint8_t>& bytes);

}  // namespace minidl::data
