#include "minidl/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "io/atomic_file.h"
#include "minidl/errors.h"

namespace minidl::io {
namespace {

using Json = nlohmann::json;

// The reference implementation refuses larger headers, so no conforming writer produces them.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::uint64_t kLengthFieldBytes = 8;
const std::string kMetadataKey = "__metadata__";
// Valid headers nest three levels deep (header, entry, shape). The cap bounds the memory that a hostile
// header of 10^8 '[' would otherwise make the JSON parser allocate.
constexpr int kMaxNesting = 16;
constexpr const char* kEntryKeys[] = {"dtype", "shape", "data_offsets"};

struct DtypeSize {
  const char* name;
  std::size_t bytes;
};
// The byte-sized dtypes of the safetensors spec. Sub-byte ones (F4, F6_*) have no whole-byte element size.
constexpr DtypeSize kDtypes[] = {{"BOOL", 1},    {"U8", 1},      {"I8", 1},      {"F8_E5M2", 1}, {"F8_E4M3", 1},
                                 {"F8_E8M0", 1}, {"I16", 2},     {"U16", 2},     {"F16", 2},     {"BF16", 2},
                                 {"I32", 4},     {"U32", 4},     {"F32", 4},     {"I64", 8},     {"U64", 8},
                                 {"F64", 8},     {"C64", 8}};

std::optional<std::size_t> find_dtype(const std::string& dtype) {
  for (const auto& d : kDtypes) {
    if (dtype == d.name) return d.bytes;
  }
  return std::nullopt;
}

std::string known_dtypes() {
  std::string out;
  for (const auto& d : kDtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

// Offset of the first byte that does not begin a well-formed UTF-8 sequence (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or npos when all of [s, s + n) is valid.
std::size_t invalid_utf8_at(const std::uint8_t* s, std::size_t n) {
  std::size_t i = 0;
  while (i < n) {
    const std::uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return std::string::npos;
}

bool is_utf8(const std::string& s) {
  return invalid_utf8_at(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()) == std::string::npos;
}

// Values quoted in messages are cut short: a hostile header could make them megabytes long.
constexpr std::size_t kShownChars = 80;
std::string shorten(std::string s) {
  if (s.size() > kShownChars) s = s.substr(0, kShownChars) + "...";
  return s;
}
std::string quoted(const std::string& s) { return "'" + shorten(s) + "'"; }
std::string shown(const Json& j) { return shorten(j.dump(-1, ' ', false, Json::error_handler_t::replace)); }

std::string hex_byte(std::uint8_t b) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

std::string entry_label(const std::string& key) {
  return key == kMetadataKey ? kMetadataKey : "tensor " + quoted(key);
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// product(shape) * element_bytes, or nullopt when it does not fit in 64 bits.
std::optional<std::uint64_t> checked_nbytes(const std::vector<std::uint64_t>& shape, std::uint64_t element_bytes) {
  std::uint64_t n = element_bytes;
  for (const std::uint64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// Parses the header text, rejecting duplicate keys at any depth (nlohmann would keep the last one silently),
// and returns the top-level keys in header order (nlohmann::json sorts them) so ties keep the writer's order.
Json parse_header_json(const std::uint8_t* begin, const std::uint8_t* end, const std::string& prefix,
                       std::vector<std::string>* top_level_keys) {
  struct Frame {
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<Frame> frames;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxNesting) {
      throw FormatError(detail::str(prefix, "header: expected JSON nested at most ", kMaxNesting,
                                    " levels deep, found deeper nesting"));
    }
    if (event == Json::parse_event_t::object_start) {
      frames.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      frames.pop_back();
    } else if (event == Json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      Frame& frame = frames.back();
      if (!frame.keys.insert(key).second) {
        if (frames.size() == 1) {
          throw FormatError(detail::str(prefix, "header: expected unique top-level keys (tensor names), found ",
                                        "duplicate ", quoted(key)));
        }
        throw FormatError(detail::str(prefix, entry_label(frames.front().last_key),
                                      ": expected unique keys, found duplicate key ", quoted(key)));
      }
      frame.last_key = key;
      if (frames.size() == 1) top_level_keys->push_back(key);
    }
    return true;
  };
  try {
    return Json::parse(begin, end, on_event, /*allow_exceptions=*/true);
  } catch (const Json::exception& e) {
    throw FormatError(detail::str(prefix, "header: expected valid JSON, found error: ", e.what()));
  }
}

struct Placement {
  std::uint64_t begin, end;
  std::size_t record;  // index into SafetensorsContents::tensors
};

std::vector<std::uint64_t> parse_shape(const Json& shape, const std::string& where) {
  const std::uint64_t max_dim = std::numeric_limits<std::int64_t>::max();
  const auto valid_dim = [&](const Json& d) { return d.is_number_unsigned() && d.get<std::uint64_t>() <= max_dim; };
  MINIDL_CHECK(shape.is_array() && std::all_of(shape.begin(), shape.end(), valid_dim), FormatError, where,
               " field 'shape': expected an array of integers in [0, ", max_dim, "], found ", shown(shape));
  return shape.get<std::vector<std::uint64_t>>();
}

std::pair<std::uint64_t, std::uint64_t> parse_offsets(const Json& offsets, const std::string& where) {
  const bool ok = offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                  offsets[1].is_number_unsigned() && offsets[0].get<std::uint64_t>() <= offsets[1].get<std::uint64_t>();
  MINIDL_CHECK(ok, FormatError, where,
               " field 'data_offsets': expected [begin, end] with integers 0 <= begin <= end, found ", shown(offsets));
  return {offsets[0].get<std::uint64_t>(), offsets[1].get<std::uint64_t>()};
}

// Validates one tensor entry and returns its record (without data) and its byte range in the data section.
std::pair<TensorRecord, std::pair<std::uint64_t, std::uint64_t>> parse_entry(const std::string& name,
                                                                            const Json& entry,
                                                                            const std::string& prefix) {
  const std::string where = prefix + "tensor " + quoted(name);
  MINIDL_CHECK(!name.empty(), FormatError, where, ": expected a non-empty tensor name, found an empty one");
  MINIDL_CHECK(entry.is_object(), FormatError, where,
               ": expected an object with keys dtype, shape, data_offsets, found ", shown(entry));
  for (const char* key : kEntryKeys) {
    if (entry.contains(key)) continue;
    std::string present;
    for (const auto& item : entry.items()) present += (present.empty() ? "" : ", ") + quoted(item.key());
    throw FormatError(detail::str(where, ": expected key '", key, "', found keys [", present, "]"));
  }
  for (const auto& item : entry.items()) {
    MINIDL_CHECK(std::count(std::begin(kEntryKeys), std::end(kEntryKeys), item.key()) == 1, FormatError, where,
                 ": expected only keys dtype, shape, data_offsets, found extra key ", quoted(item.key()));
  }

  const Json& dtype = entry["dtype"];
  const std::optional<std::size_t> element_bytes =
      dtype.is_string() ? find_dtype(dtype.get_ref<const std::string&>()) : std::nullopt;
  MINIDL_CHECK(element_bytes, FormatError, where, " field 'dtype': expected one of ", known_dtypes(), ", found ",
               shown(dtype));

  const std::vector<std::uint64_t> shape = parse_shape(entry["shape"], where);
  const std::optional<std::uint64_t> nbytes = checked_nbytes(shape, *element_bytes);
  MINIDL_CHECK(nbytes, FormatError, where, " field 'shape': expected a byte size (elements x ", *element_bytes,
               "-byte ", dtype.get_ref<const std::string&>(), ") that fits in 64 bits, found shape ",
               shorten(shape_text(shape)), " which overflows");

  const auto [begin, end] = parse_offsets(entry["data_offsets"], where);
  MINIDL_CHECK(end - begin == *nbytes, FormatError, where, " field 'data_offsets': expected end - begin = ", *nbytes,
               " bytes (shape ", shorten(shape_text(shape)), " x ", *element_bytes, "-byte ",
               dtype.get_ref<const std::string&>(), "), found ", end - begin, " bytes");

  TensorRecord record;
  record.name = name;
  record.dtype = dtype.get<std::string>();
  record.shape.assign(shape.begin(), shape.end());
  return {std::move(record), {begin, end}};
}

std::map<std::string, std::string> parse_metadata(const Json& metadata, const std::string& prefix) {
  MINIDL_CHECK(metadata.is_object(), FormatError, prefix, kMetadataKey,
               ": expected an object of string to string, found ", shown(metadata));
  std::map<std::string, std::string> out;
  for (const auto& item : metadata.items()) {
    MINIDL_CHECK(item.value().is_string(), FormatError, prefix, kMetadataKey, " key ", quoted(item.key()),
                 ": expected a string value, found ", shown(item.value()));
    out.emplace(item.key(), item.value().get<std::string>());
  }
  return out;
}

// The tensors must tile [0, data_size) exactly, as the reference reader demands: no byte may be unowned
// (a hole could hide data) or shared (an overlap aliases two tensors).
void check_layout(std::vector<Placement>& placements, const std::vector<TensorRecord>& records,
                  std::uint64_t data_size, const std::string& prefix) {
  std::stable_sort(placements.begin(), placements.end(), [](const Placement& a, const Placement& b) {
    return std::make_pair(a.begin, a.end) < std::make_pair(b.begin, b.end);
  });
  std::uint64_t expected = 0;
  for (const Placement& p : placements) {
    if (p.begin != expected) {
      const std::string problem =
          p.begin > expected ? detail::str("a hole of ", p.begin - expected, " bytes")
                             : detail::str("an overlap of ", expected - p.begin, " bytes with the previous tensor");
      throw FormatError(detail::str(prefix, "tensor ", quoted(records[p.record].name), " field 'data_offsets': ",
                                    "expected begin ", expected,
                                    " (tensors must tile the data section from offset 0), found ", p.begin, " (",
                                    problem, ")"));
    }
    expected = p.end;
  }
  MINIDL_CHECK(expected == data_size, FormatError, prefix, "data section: expected ", expected,
               " bytes (the end of the last tensor), found ", data_size, " bytes (",
               data_size > expected ? "trailing bytes" : "file truncated", ")");
}

}  // namespace

std::size_t dtype_bytes(const std::string& dtype) {
  const std::optional<std::size_t> bytes = find_dtype(dtype);
  MINIDL_CHECK(bytes, FormatError, "safetensors dtype: expected one of ", known_dtypes(), ", found ", quoted(dtype));
  return *bytes;
}

std::vector<std::uint8_t> serialize_safetensors(const std::vector<TensorRecord>& tensors,
                                                const std::map<std::string, std::string>& metadata) {
  // The header is written by hand rather than through a JSON object so the keys keep the order of the reference
  // writer (__metadata__ first, then dtype, shape, data_offsets) and the output is byte-identical to it.
  const auto json_string = [](const std::string& s) { return Json(s).dump(); };
  std::string header = "{";
  if (!metadata.empty()) {
    header += json_string(kMetadataKey) + ":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      MINIDL_CHECK(is_utf8(key) && is_utf8(value), ValueError, "serialize_safetensors: metadata ", quoted(key),
                   ": expected UTF-8 key and value, found invalid UTF-8");
      header += (first ? "" : ",") + json_string(key) + ":" + json_string(value);
      first = false;
    }
    header += "}";
  }

  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const TensorRecord& t : tensors) {
    const std::string where = "serialize_safetensors: tensor " + quoted(t.name);
    MINIDL_CHECK(!t.name.empty(), ValueError, where, ": expected a non-empty name, found an empty one");
    MINIDL_CHECK(t.name != kMetadataKey, ValueError, where, ": expected a tensor name, found the reserved key");
    MINIDL_CHECK(is_utf8(t.name), ValueError, where, ": expected a UTF-8 name, found invalid UTF-8");
    MINIDL_CHECK(names.insert(t.name).second, ValueError, where, ": expected unique names, found a duplicate");
    const std::optional<std::size_t> element_bytes = find_dtype(t.dtype);
    MINIDL_CHECK(element_bytes, ValueError, where, " dtype: expected one of ", known_dtypes(), ", found ",
                 quoted(t.dtype));
    MINIDL_CHECK(std::all_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d >= 0; }), ValueError,
                 where, " shape: expected non-negative dimensions, found a negative one");
    const std::vector<std::uint64_t> shape(t.shape.begin(), t.shape.end());
    const std::optional<std::uint64_t> nbytes = checked_nbytes(shape, *element_bytes);
    MINIDL_CHECK(nbytes && *nbytes == t.data.size(), ValueError, where, " data: expected ",
                 nbytes ? std::to_string(*nbytes) : std::string("more than 2^64"), " bytes (shape ",
                 shape_text(shape), " x ", *element_bytes, "-byte ", t.dtype, "), found ", t.data.size(), " bytes");
    const char* separator = header == "{" ? "" : ",";  // "{" alone: this is the header's first member
    header += separator + json_string(t.name) + ":{\"dtype\":" + json_string(t.dtype) +
              ",\"shape\":" + Json(t.shape).dump() + ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + *nbytes) + "]}";
    offset += *nbytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  MINIDL_CHECK(header.size() <= kMaxHeaderBytes, ValueError, "serialize_safetensors: header: expected at most ",
               kMaxHeaderBytes, " bytes (what readers accept), found ", header.size(), " bytes");

  std::vector<std::uint8_t> out;
  out.reserve(kLengthFieldBytes + header.size() + offset);
  for (std::uint64_t i = 0; i < kLengthFieldBytes; ++i) {
    out.push_back(static_cast<std::uint8_t>(std::uint64_t{header.size()} >> (8 * i)));
  }
  out.insert(out.end(), header.begin(), header.end());
  for (const TensorRecord& t : tensors) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

SafetensorsContents parse_safetensors(const std::vector<std::uint8_t>& bytes, const std::string& name) {
  const std::string prefix = "safetensors file '" + name + "': ";
  MINIDL_CHECK(bytes.size() >= kLengthFieldBytes, FormatError, prefix, "expected at least ", kLengthFieldBytes,
               " bytes (the header length), found ", bytes.size(), " bytes");
  std::uint64_t header_size = 0;
  for (std::uint64_t i = 0; i < kLengthFieldBytes; ++i) header_size |= std::uint64_t{bytes[i]} << (8 * i);
  MINIDL_CHECK(header_size <= kMaxHeaderBytes, FormatError, prefix, "header length: expected at most ",
               kMaxHeaderBytes, " bytes, found ", header_size);
  const std::uint64_t available = bytes.size() - kLengthFieldBytes;
  MINIDL_CHECK(header_size <= available, FormatError, prefix, "header length: expected at most ", available,
               " bytes (the rest of the file), found ", header_size);

  const std::uint8_t* header = bytes.data() + kLengthFieldBytes;
  const std::size_t bad = invalid_utf8_at(header, header_size);
  MINIDL_CHECK(bad == std::string::npos, FormatError, prefix, "header: expected valid UTF-8, found invalid byte ",
               hex_byte(header[bad]), " at header offset ", bad);
  // nlohmann's lexer takes a NUL byte for the end of input and would accept "{}\0garbage"; raw NUL is never
  // valid JSON (not even inside a string), so it is refused here.
  const void* nul = std::memchr(header, 0, header_size);
  MINIDL_CHECK(nul == nullptr, FormatError, prefix, "header: expected valid JSON, found a NUL byte at header offset ",
               static_cast<const std::uint8_t*>(nul) - header);
  // The reference reader also refuses leading whitespace, so a header must open the object on its first byte.
  MINIDL_CHECK(header_size > 0 && header[0] == '{', FormatError, prefix,
               "header: expected a JSON object starting with '{', found ",
               header_size == 0 ? std::string("an empty header") : quoted(std::string(1, char(header[0]))));

  std::vector<std::string> keys;
  const Json root = parse_header_json(header, header + header_size, prefix, &keys);
  // root is an object: it parsed completely and begins with '{'.

  SafetensorsContents contents;
  std::vector<Placement> placements;
  for (const std::string& key : keys) {
    const Json& value = root.at(key);
    if (key == kMetadataKey) {
      contents.metadata = parse_metadata(value, prefix);
      continue;
    }
    auto [record, range] = parse_entry(key, value, prefix);
    placements.push_back({range.first, range.second, contents.tensors.size()});
    contents.tensors.push_back(std::move(record));
  }
  const std::uint64_t data_start = kLengthFieldBytes + header_size;
  check_layout(placements, contents.tensors, bytes.size() - data_start, prefix);

  std::vector<TensorRecord> ordered;
  ordered.reserve(placements.size());
  for (const Placement& p : placements) {
    TensorRecord& record = contents.tensors[p.record];
    record.data.assign(bytes.begin() + data_start + p.begin, bytes.begin() + data_start + p.end);
    ordered.push_back(std::move(record));
  }
  contents.tensors = std::move(ordered);
  return contents;
}

SafetensorsContents read_safetensors(const std::string& path) { return parse_safetensors(read_whole_file(path), path); }

void write_safetensors(const std::string& path, const std::vector<TensorRecord>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<std::uint8_t> bytes = serialize_safetensors(tensors, metadata);
  atomic_write_file(path, bytes.data(), bytes.size());
}

}  // namespace minidl::io
