#pragma once
// Builders of valid and malformed IDX byte vectors (raw and gzip), shared by tests/test_idx.cpp and the
// fuzzer seed-corpus generator. Header-only; depends on the standard library and zlib.
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace minidl::idx_corpus {

using Bytes = std::vector<std::uint8_t>;

inline void put_be32(Bytes& out, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

/// A well-formed unsigned-byte IDX file with the given sizes and data.
inline Bytes idx_file(const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes out(4 + 4 * dims.size());
  out[2] = 0x08;
  out[3] = static_cast<std::uint8_t>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) put_be32(out, 4 + 4 * i, dims[i]);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

/// n uniformly random values in [0, bound), never all zeros when bound > 1.
inline Bytes random_bytes(std::size_t n, std::uint32_t seed, int bound = 256) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, bound - 1);
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(dist(rng));
  if (bound > 1 && n > 0 && std::all_of(out.begin(), out.end(), [](std::uint8_t b) { return b == 0; })) out[0] = 1;
  return out;
}

/// gzip-compresses raw as `members` concatenated gzip members (as `cat a.gz b.gz` produces).
inline Bytes gzip(const Bytes& raw, int members = 1, int level = Z_DEFAULT_COMPRESSION) {
  Bytes out;
  const std::size_t piece = (raw.size() + members - 1) / std::max(members, 1);
  for (int m = 0; m < members; ++m) {
    const std::size_t begin = std::min(raw.size(), m * piece), end = std::min(raw.size(), begin + piece);
    z_stream zs{};
    if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("idx_corpus::gzip: deflateInit2 failed");
    Bytes member(deflateBound(&zs, static_cast<uLong>(end - begin)) + 32);
    zs.next_in = const_cast<Bytef*>(raw.data() + begin);
    zs.avail_in = static_cast<uInt>(end - begin);
    zs.next_out = member.data();
    zs.avail_out = static_cast<uInt>(member.size());
    const int rc = deflate(&zs, Z_FINISH);
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) throw std::runtime_error("idx_corpus::gzip: deflate did not finish");
    out.insert(out.end(), member.begin(), member.begin() + static_cast<std::ptrdiff_t>(zs.total_out));
  }
  return out;
}

/// A broken file: `id` is a short file-name-safe description, `field` a text the reader's error message
/// must contain (the field it rejects).
struct Malformed {
  std::string id;
  Bytes bytes;
  std::string field;
};

namespace detail {

inline std::string dim_field(std::size_t i, const char* name) {
  return "dimension " + std::to_string(i) + " (" + name + ")";
}

// Breakages every IDX kind shares, derived from a valid raw file with the given dimension names.
inline std::vector<Malformed> malformed_common(const Bytes& valid, const std::vector<const char*>& dim_names) {
  const std::size_t ndims = dim_names.size(), header = 4 + 4 * ndims, data = valid.size() - header;
  std::vector<Malformed> out;
  auto patched = [&](std::size_t at, std::uint8_t v) {
    Bytes b = valid;
    b[at] = v;
    return b;
  };
  auto with_dim = [&](std::size_t i, std::uint32_t v) {
    Bytes b = valid;
    put_be32(b, 4 + 4 * i, v);
    return b;
  };
  auto prefix = [&](std::size_t n) { return Bytes(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(n)); };

  out.push_back({"empty", {}, "header"});
  for (std::size_t n = 1; n < header; ++n) out.push_back({"header_cut_" + std::to_string(n), prefix(n), "header"});

  out.push_back({"magic_01_00", patched(0, 0x01), "magic"});
  out.push_back({"magic_00_01", patched(1, 0x01), "magic"});
  out.push_back({"magic_ff_ff", [&] { Bytes b = patched(0, 0xff); b[1] = 0xff; return b; }(), "magic"});
  // The whole header written little-endian: 08 0n 00 00 ...
  out.push_back({"magic_little_endian", [&] {
                   Bytes b = valid;
                   std::reverse(b.begin(), b.begin() + 4);
                   return b;
                 }(), "magic"});

  for (int type : {0x00, 0x09, 0x0b, 0x0c, 0x0d, 0x0e, 0xff})
    out.push_back({"type_" + std::to_string(type), patched(2, static_cast<std::uint8_t>(type)), "type byte"});

  for (int nd : {0, 1, 2, 3, 4, 255})
    if (static_cast<std::size_t>(nd) != ndims)
      out.push_back({"ndims_" + std::to_string(nd), patched(3, static_cast<std::uint8_t>(nd)), "number of dimensions"});

  for (std::size_t i = 0; i < ndims; ++i) {
    out.push_back({std::string("zero_") + dim_names[i], with_dim(i, 0), dim_field(i, dim_names[i])});
    out.push_back({std::string("huge_") + dim_names[i], with_dim(i, 0x80000000u), dim_field(i, dim_names[i])});
  }
  out.push_back({std::string("max_u32_") + dim_names[0], with_dim(0, 0xffffffffu), dim_field(0, dim_names[0])});
  // Larger than the data actually present, without overflow.
  out.push_back({"dim_too_big_for_data", with_dim(0, 0x7fffffffu), "data truncated"});

  for (std::size_t keep : {std::size_t{0}, std::size_t{1}, data / 2, data - 1})
    out.push_back({"data_cut_" + std::to_string(keep), prefix(header + keep), "data truncated"});
  for (std::size_t extra : {1, 100}) {
    Bytes b = valid;
    b.insert(b.end(), extra, 0x5a);
    out.push_back({"trailing_" + std::to_string(extra), b, "trailing bytes"});
  }

  // gzip damage. Members written by zlib have a 10-byte header and an 8-byte trailer (CRC32, size).
  const Bytes gz = gzip(valid);
  auto gz_patched = [&](std::size_t at, std::uint8_t xor_mask) {
    Bytes b = gz;
    b[at] ^= xor_mask;
    return b;
  };
  for (std::size_t keep : {std::size_t{2}, std::size_t{9}, std::size_t{10}, gz.size() / 2, gz.size() - 8,
                           gz.size() - 1})
    out.push_back({"gzip_cut_" + std::to_string(keep),
                   Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(keep)), "gzip"});
  out.push_back({"gzip_bad_method", gz_patched(2, 0x0f), "gzip"});
  out.push_back({"gzip_reserved_flags", gz_patched(3, 0xe0), "gzip"});
  out.push_back({"gzip_bad_crc", gz_patched(gz.size() - 8, 0x01), "gzip"});
  out.push_back({"gzip_bad_isize", gz_patched(gz.size() - 1, 0x80), "gzip"});
  out.push_back({"gzip_flipped_body", gz_patched(10 + (gz.size() - 18) / 2, 0xff), "gzip"});
  out.push_back({"gzip_trailing_zero", [&] { Bytes b = gz; b.push_back(0); return b; }(), "gzip"});
  out.push_back({"gzip_trailing_text", [&] { Bytes b = gz; b.insert(b.end(), {'x', 'y', 'z'}); return b; }(), "gzip"});
  // A second member that is only a magic number.
  out.push_back({"gzip_trailing_magic", [&] { Bytes b = gz; b.insert(b.end(), {0x1f, 0x8b}); return b; }(), "gzip"});
  // Intact gzip around a broken IDX file: the IDX checks still apply after decompression.
  out.push_back({"gzip_of_data_cut", gzip(prefix(valid.size() - 1)), "data truncated"});
  out.push_back({"gzip_of_gzip", gzip(gz), "magic"});
  return out;
}

}  // namespace detail

/// A valid images file: count x rows x cols random pixels.
inline Bytes images_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, const Bytes& pixels) {
  return idx_file({count, rows, cols}, pixels);
}

/// A valid labels file.
inline Bytes labels_file(const Bytes& labels) { return idx_file({static_cast<std::uint32_t>(labels.size())}, labels); }

/// Every way an images file can be broken.
inline std::vector<Malformed> malformed_images(std::uint32_t seed) {
  const Bytes valid = images_file(3, 5, 4, random_bytes(3 * 5 * 4, seed));
  std::vector<Malformed> out = detail::malformed_common(valid, {"count", "rows", "cols"});
  // Sizes whose product does not fit in 64 bits (each one within the per-dimension cap).
  Bytes b = valid;
  for (std::size_t i = 0; i < 3; ++i) put_be32(b, 4 + 4 * i, 0x7fffffffu);
  out.push_back({"product_overflow_max", b, "data size"});
  put_be32(b, 12, 4);
  out.push_back({"product_overflow_just", b, "data size"});
  // Just below overflow: (2^31-1)^2 * 2 < 2^63, so the reader must report missing data instead.
  put_be32(b, 12, 2);
  out.push_back({"product_no_overflow", b, "data truncated"});
  return out;
}

/// Every way a labels file can be broken, for a reader given num_classes.
inline std::vector<Malformed> malformed_labels(std::uint32_t seed, int num_classes = 10) {
  const Bytes labels = random_bytes(17, seed, num_classes);
  std::vector<Malformed> out = detail::malformed_common(labels_file(labels), {"count"});
  for (std::size_t at : {std::size_t{0}, std::size_t{8}, labels.size() - 1}) {
    for (int value : {num_classes, 255}) {
      if (value < num_classes || value > 255) continue;  // for 256 classes every byte is valid
      Bytes bad = labels;
      bad[at] = static_cast<std::uint8_t>(value);
      out.push_back({"label_" + std::to_string(at) + "_is_" + std::to_string(value), labels_file(bad),
                     "label[" + std::to_string(at) + "]"});
    }
  }
  return out;
}

}  // namespace minidl::idx_corpus
