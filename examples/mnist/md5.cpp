#include "md5.h"

#include <minidl/errors.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace mnist {

namespace {

// RFC 1321, 3.4: per-step shift amounts (four per round) and the sine table T[i] = floor(2^32 * |sin(i + 1)|).
constexpr int kShift[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};
constexpr std::uint32_t kSine[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};

std::uint32_t rotate_left(std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

}  // namespace

Md5::Md5() { reset(); }

void Md5::reset() {
  state_ = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};  // RFC 1321, 3.3
  length_ = 0;
  buffered_ = 0;
}

void Md5::process_block(const std::uint8_t* block) {
  std::uint32_t m[16];  // the block as 16 little-endian words
  for (int i = 0; i < 16; ++i) {
    m[i] = static_cast<std::uint32_t>(block[4 * i]) | static_cast<std::uint32_t>(block[4 * i + 1]) << 8 |
           static_cast<std::uint32_t>(block[4 * i + 2]) << 16 | static_cast<std::uint32_t>(block[4 * i + 3]) << 24;
  }
  std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  for (int i = 0; i < 64; ++i) {
    const int round = i / 16;
    std::uint32_t f;
    int word;
    switch (round) {
      case 0: f = (b & c) | (~b & d); word = i; break;
      case 1: f = (b & d) | (c & ~d); word = (5 * i + 1) % 16; break;
      case 2: f = b ^ c ^ d; word = (3 * i + 5) % 16; break;
      default: f = c ^ (b | ~d); word = (7 * i) % 16; break;
    }
    const std::uint32_t rotated = rotate_left(a + f + kSine[i] + m[word], kShift[round][i % 4]);
    a = d;
    d = c;
    c = b;
    b += rotated;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
}

void Md5::update(const void* data, std::size_t size) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  length_ += size;
  if (buffered_ > 0) {
    const std::size_t take = std::min(size, buffer_.size() - buffered_);
    std::memcpy(buffer_.data() + buffered_, p, take);
    buffered_ += take;
    p += take;
    size -= take;
    if (buffered_ < buffer_.size()) return;
    process_block(buffer_.data());
    buffered_ = 0;
  }
  for (; size >= 64; p += 64, size -= 64) process_block(p);
  std::memcpy(buffer_.data(), p, size);
  buffered_ = size;
}

std::string Md5::hex_digest() {
  // RFC 1321, 3.1-3.2: a 1 bit, zeros up to 56 bytes mod 64, then the message length in bits (little-endian).
  const std::uint64_t bits = length_ * 8;
  const std::uint8_t one = 0x80, zeros[64] = {};
  update(&one, 1);
  update(zeros, (buffered_ <= 56 ? 56 : 120) - buffered_);
  std::uint8_t length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<std::uint8_t>(bits >> (8 * i));
  update(length_bytes, 8);

  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::uint32_t word : state_) {
    for (int i = 0; i < 4; ++i) {
      const auto byte = static_cast<std::uint8_t>(word >> (8 * i));
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

std::string md5_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw minidl::IOError("cannot open " + path + " to compute its MD5: " + std::strerror(errno));
  Md5 md5;
  std::vector<char> chunk(1 << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    md5.update(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw minidl::IOError("cannot read " + path + " to compute its MD5: " + std::strerror(errno));
  return md5.hex_digest();
}

}  // namespace mnist
