#pragma once
// Whole-file reads and crash-safe whole-file writes, shared by every file format minidl saves.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace minidl::io {

/// Replaces `path` with `size` bytes from `data` so that a crash or a failure at any point leaves either the
/// old file or the complete new one: the bytes go to a unique temporary file in the same directory, which is
/// fsynced and renamed over `path`, then the directory is fsynced so the rename itself is durable.
/// On failure the temporary file is removed and IOError names `path` and the system's reason.
void atomic_write_file(const std::string& path, const void* data, std::size_t size);

/// The complete contents of `path`. Throws IOError naming `path` and the system's reason.
std::vector<std::uint8_t> read_whole_file(const std::string& path);

}  // namespace minidl::io
