#include "minidl/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <memory>
#include <new>
#include <system_error>
#include <utility>

#include "minidl/errors.h"

namespace minidl::data {

namespace {

constexpr std::uint8_t kTypeUnsignedByte = 0x08;
constexpr const char* kImageDims[] = {"count", "rows", "cols"};
constexpr const char* kLabelDims[] = {"count"};

std::string hex_byte(std::uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned>(b));
  return buf;
}

std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

std::uint32_t read_le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}

// Validates the whole layout (header, sizes, exact data length) of an IDX file with N dimensions and
// returns the dimension sizes; the data are the last (product of sizes) bytes of `bytes`.
template <std::size_t N>
std::array<std::int64_t, N> parse_header(const std::vector<std::uint8_t>& bytes, const std::string& name,
                                         const char* kind, const char* const (&dim_names)[N]) {
  const std::string where = name + ": IDX " + kind;
  const std::size_t header_bytes = 4 + 4 * N;
  const std::size_t size = bytes.size();
  MINIDL_CHECK(size > 0, FormatError, where, " header: file is empty (expected at least ", header_bytes,
               " header bytes, found 0)");
  MINIDL_CHECK(size >= 4, FormatError, where, " header truncated: expected at least 4 bytes (magic, type, ",
               "number of dimensions), found ", size);
  MINIDL_CHECK(bytes[0] == 0 && bytes[1] == 0, FormatError, where, " magic: expected bytes 0x00 0x00, found ",
               hex_byte(bytes[0]), " ", hex_byte(bytes[1]));
  MINIDL_CHECK(bytes[2] == kTypeUnsignedByte, FormatError, where, " type byte: expected ",
               hex_byte(kTypeUnsignedByte), " (unsigned byte), found ", hex_byte(bytes[2]));
  MINIDL_CHECK(bytes[3] == N, FormatError, where, " number of dimensions: expected ", N, ", found ",
               static_cast<unsigned>(bytes[3]));
  MINIDL_CHECK(size >= header_bytes, FormatError, where, " header truncated: expected ", header_bytes,
               " bytes (magic, type, number of dimensions, then 4 per dimension), found ", size);

  std::array<std::int64_t, N> dims{};
  for (std::size_t i = 0; i < N; ++i) {
    dims[i] = read_be32(&bytes[4 + 4 * i]);
    MINIDL_CHECK(dims[i] >= 1 && dims[i] <= kIdxMaxDim, FormatError, where, " dimension ", i, " (",
                 dim_names[i], "): expected 1..", kIdxMaxDim, ", found ", dims[i]);
  }
  std::int64_t expected = 1;
  for (std::size_t i = 0; i < N; ++i) {
    if (expected > std::numeric_limits<std::int64_t>::max() / dims[i]) {
      std::string product = std::to_string(dims[0]);
      for (std::size_t j = 1; j < N; ++j) product += " x " + std::to_string(dims[j]);
      throw FormatError(detail::str(where, " data size: product of dimensions ", product,
                                    " overflows a 64-bit size"));
    }
    expected *= dims[i];
  }
  const std::uint64_t found = size - header_bytes;
  MINIDL_CHECK(found >= static_cast<std::uint64_t>(expected), FormatError, where, " data truncated: expected ",
               expected, " bytes after the ", header_bytes, "-byte header, found ", found);
  MINIDL_CHECK(found == static_cast<std::uint64_t>(expected), FormatError, where, " trailing bytes: expected ",
               expected, " data bytes after the ", header_bytes, "-byte header, found ", found, " (",
               found - expected, " extra)");
  return dims;
}

// Takes ownership of raw (already decompressed) bytes so the data can be moved out without a copy.
IdxImages images_from_raw(std::vector<std::uint8_t> raw, const std::string& name) {
  const auto dims = parse_header(raw, name, "images", kImageDims);
  raw.erase(raw.begin(), raw.end() - static_cast<std::ptrdiff_t>(dims[0] * dims[1] * dims[2]));
  IdxImages out;
  out.count = dims[0];
  out.rows = dims[1];
  out.cols = dims[2];
  out.pixels = std::move(raw);
  return out;
}

IdxLabels labels_from_raw(std::vector<std::uint8_t> raw, const std::string& name, int num_classes) {
  MINIDL_CHECK(num_classes >= 1 && num_classes <= 256, ValueError, name,
               ": IDX labels num_classes: expected 1..256 (labels are bytes), found ", num_classes);
  const auto dims = parse_header(raw, name, "labels", kLabelDims);
  raw.erase(raw.begin(), raw.end() - static_cast<std::ptrdiff_t>(dims[0]));
  for (std::size_t i = 0; i < raw.size(); ++i) {
    MINIDL_CHECK(raw[i] < num_classes, FormatError, name, ": IDX labels label[", i, "]: expected a value < ",
                 num_classes, " (num_classes), found ", static_cast<unsigned>(raw[i]));
  }
  IdxLabels out;
  out.count = dims[0];
  out.labels = std::move(raw);
  return out;
}

std::vector<std::uint8_t> decompressed(const std::vector<std::uint8_t>& bytes, const std::string& name) {
  return is_gzip(bytes) ? gunzip(bytes, name) : bytes;
}

}  // namespace

bool is_gzip(const std::vector<std::uint8_t>& bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

std::vector<std::uint8_t> gunzip(const std::vector<std::uint8_t>& gz, const std::string& name,
                                 std::size_t max_bytes) {
  // zlib counts in uInt (32 bits): feed input and output in pieces of at most this size.
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  // The buffer may grow one byte past the cap, so that a stream larger than allowed shows as such.
  const std::size_t limit = std::min(max_bytes, std::numeric_limits<std::size_t>::max() - 1) + 1;

  z_stream zs{};
  const int init = inflateInit2(&zs, 16 + MAX_WBITS);
  if (init == Z_MEM_ERROR) throw std::bad_alloc();
  MINIDL_CHECK(init == Z_OK, IOError, name, ": gzip: zlib inflateInit2 failed: ", zError(init));
  const std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);

  // The trailer of the last member stores its size mod 2^32: with one spare byte (so the stream can end
  // before the buffer fills) an exact first guess for the usual single-member file. Deflate cannot expand
  // more than ~1032x, which bounds what a lying trailer can make us reserve.
  std::size_t guess = std::size_t{1} << 16;
  if (gz.size() >= 4) guess = std::max<std::size_t>(guess, read_le32(&gz[gz.size() - 4]) + std::size_t{1});
  guess = std::min({guess, limit, std::max<std::size_t>(std::size_t{1} << 16, gz.size() * 1032)});
  std::vector<std::uint8_t> out(guess);

  std::size_t in_pos = 0, produced = 0, members = 0;
  for (;;) {
    if (zs.avail_in == 0 && in_pos < gz.size()) {
      const std::size_t take = std::min(gz.size() - in_pos, kPiece);
      zs.next_in = const_cast<Bytef*>(gz.data() + in_pos);
      zs.avail_in = static_cast<uInt>(take);
      in_pos += take;
    }
    if (produced == out.size()) out.resize(std::min(limit, std::max<std::size_t>(2 * out.size(), 1 << 16)));
    zs.next_out = out.data() + produced;
    zs.avail_out = static_cast<uInt>(std::min(out.size() - produced, kPiece));
    const uInt room = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;
    MINIDL_CHECK(produced <= max_bytes, FormatError, name, ": gzip: decompressed size exceeds the limit of ",
                 max_bytes, " bytes (a gzip bomb or not a data file)");
    const std::size_t consumed = in_pos - zs.avail_in;
    if (rc == Z_STREAM_END) {
      ++members;
      if (consumed == gz.size()) break;
      // gzip(1) decodes concatenated members; anything else after a member is damage, not data.
      MINIDL_CHECK(gz.size() - consumed >= 2 && gz[consumed] == 0x1f && gz[consumed + 1] == 0x8b, FormatError,
                   name, ": gzip: ", gz.size() - consumed, " trailing byte(s) after member ", members,
                   " (at compressed byte ", consumed, ") are not a gzip member");
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    MINIDL_CHECK(!(rc == Z_BUF_ERROR && consumed == gz.size()), FormatError, name,
                 ": gzip: stream truncated: expected more compressed data after byte ", consumed, " of member ",
                 members + 1);
    MINIDL_CHECK(rc == Z_OK, FormatError, name, ": gzip: corrupt stream in member ", members + 1,
                 " near compressed byte ", consumed, ": ", zs.msg ? zs.msg : zError(rc));
  }
  out.resize(produced);
  return out;
}

std::vector<std::uint8_t> read_file_maybe_gzip(const std::string& path) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  MINIDL_CHECK(f != nullptr, IOError, path, ": cannot open file: ", std::generic_category().message(errno));
  std::vector<std::uint8_t> bytes;
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  std::size_t got = 0;
  do {
    bytes.resize(bytes.size() + kBlock);
    got = std::fread(bytes.data() + bytes.size() - kBlock, 1, kBlock, f.get());
    bytes.resize(bytes.size() - kBlock + got);
  } while (got == kBlock);
  MINIDL_CHECK(!std::ferror(f.get()), IOError, path, ": cannot read file: ", std::generic_category().message(errno));
  return is_gzip(bytes) ? gunzip(bytes, path) : bytes;
}

IdxImages parse_idx_images(const std::vector<std::uint8_t>& bytes, const std::string& name) {
  return images_from_raw(decompressed(bytes, name), name);
}

IdxLabels parse_idx_labels(const std::vector<std::uint8_t>& bytes, const std::string& name, int num_classes) {
  return labels_from_raw(decompressed(bytes, name), name, num_classes);
}

IdxImages read_idx_images(const std::string& path) { return images_from_raw(read_file_maybe_gzip(path), path); }

IdxLabels read_idx_labels(const std::string& path, int num_classes) {
  return labels_from_raw(read_file_maybe_gzip(path), path, num_classes);
}

void check_same_count(const IdxImages& images, const IdxLabels& labels, const std::string& images_path,
                      const std::string& labels_path) {
  MINIDL_CHECK(images.count == labels.count, FormatError, "IDX count mismatch: images file ", images_path, " has ",
               images.count, " images but labels file ", labels_path, " has ", labels.count, " labels");
}

}  // namespace minidl::data
