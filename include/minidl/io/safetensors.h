#pragma once
// The safetensors file format at the byte level (https://github.com/huggingface/safetensors):
//   u64 little-endian N | N bytes of UTF-8 JSON header | data section
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end)} with offsets relative to
// the data section, plus an optional "__metadata__" object of string -> string. This layer knows nothing about
// minidl tensors: it moves named byte buffers, so it can be tested and fuzzed on its own.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace minidl::io {

/// One tensor as stored in the file: raw little-endian element bytes in row-major order.
struct TensorRecord {
  std::string name;
  /// safetensors dtype name: "F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", ...
  std::string dtype;
  std::vector<std::int64_t> shape;  ///< empty for a 0-d scalar
  std::vector<std::uint8_t> data;   ///< exactly product(shape) * dtype_bytes(dtype) bytes
};

struct SafetensorsContents {
  std::vector<TensorRecord> tensors;  ///< in data-offset order (header order among equal offsets)
  std::map<std::string, std::string> metadata;
};

/// Bytes per element of a safetensors dtype. Throws FormatError for an unknown or sub-byte dtype.
std::size_t dtype_bytes(const std::string& dtype);

/// The bytes of a safetensors file holding `tensors` stored contiguously in the given order. The header is
/// padded with spaces to a multiple of 8 bytes; "__metadata__" is written only when `metadata` is non-empty.
/// Throws ValueError for an empty, duplicate, reserved ("__metadata__") or non-UTF-8 name, an unknown dtype,
/// a negative dimension, or data whose size is not product(shape) * dtype size.
std::vector<std::uint8_t> serialize_safetensors(const std::vector<TensorRecord>& tensors,
                                                const std::map<std::string, std::string>& metadata);

/// Parses and fully validates a safetensors file; `name` (usually the path) appears in every error message.
/// Throws FormatError naming the file, the tensor/field and the expected vs found value for any rule broken.
SafetensorsContents parse_safetensors(const std::vector<std::uint8_t>& bytes, const std::string& name);

/// read_whole_file + parse_safetensors. Throws IOError when the file cannot be read, FormatError when invalid.
SafetensorsContents read_safetensors(const std::string& path);

/// serialize_safetensors + an atomic replace of `path`: readers see either the old file or the complete new
/// one, never a partial write. Throws IOError (the old file is left untouched) or ValueError.
void write_safetensors(const std::string& path, const std::vector<TensorRecord>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace minidl::io
