#pragma once
// MD5 (RFC 1321), written from the RFC, for one job: checking downloaded files against the checksums their
// publishers list (MNIST's mirrors publish MD5s). It is not used, and not fit, for anything security-related.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mnist {

class Md5 {
 public:
  Md5();
  /// Feeds `size` more bytes; the digest does not depend on how the input is split into calls.
  void update(const void* data, std::size_t size);
  /// The digest of everything fed so far as 32 lowercase hex digits. Ends the computation: call update()
  /// or hex_digest() again only after reset().
  std::string hex_digest();
  void reset();

 private:
  void process_block(const std::uint8_t* block);

  std::array<std::uint32_t, 4> state_;
  std::uint64_t length_ = 0;  // bytes fed so far
  std::array<std::uint8_t, 64> buffer_;
  std::size_t buffered_ = 0;
};

/// The MD5 of a file's contents as 32 lowercase hex digits. Throws minidl::IOError naming the file when it
/// cannot be opened or read.
std::string md5_file(const std::string& path);

}  // namespace mnist
