#pragma once
// Hand-built safetensors files, valid and malformed, written byte by byte without minidl's writer so they test
// the reader independently of it. Standard library only, so a fuzzer's seed-corpus generator can reuse them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace minidl::test::safetensors_corpus {

using Bytes = std::vector<std::uint8_t>;

/// A file whose length field says `declared_length`, followed by `header` and `data` verbatim.
inline Bytes raw_file(std::uint64_t declared_length, const std::string& header, const Bytes& data = {}) {
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(declared_length >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

/// A file with a correct length field; the header is padded with spaces to a multiple of 8 when `pad` is set,
/// as every reference writer does.
inline Bytes file(std::string header, const Bytes& data = {}, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  return raw_file(header.size(), header, data);
}

/// `n` deterministic bytes, none zero, so a reader that drops or shifts data is caught.
inline Bytes filler(std::size_t n, std::uint8_t seed = 1) {
  Bytes out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(1 + (seed + 37 * i) % 255);
  return out;
}

/// `"name":{"dtype":...,"shape":...,"data_offsets":[begin,end]}`; name, dtype and shape are raw JSON text
/// (already escaped), so malformed values can be injected.
inline std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                         const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}
inline std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                         std::uint64_t begin, std::uint64_t end) {
  return entry(name, "\"" + dtype + "\"", shape, "[" + std::to_string(begin) + "," + std::to_string(end) + "]");
}

/// `{m1,m2,...}`
inline std::string object(const std::vector<std::string>& members) {
  std::string out = "{";
  for (std::size_t i = 0; i < members.size(); ++i) out += (i ? "," : "") + members[i];
  return out + "}";
}

struct Case {
  std::string label;     ///< usable as a file name
  Bytes bytes;
  std::string fragment;  ///< malformed cases: text the FormatError message must contain
};

/// Files every conforming reader must accept.
inline std::vector<Case> valid_cases() {
  const std::string a8 = entry("a", "F32", "[2]", 0, 8);
  return {
      {"empty_header", file("{}"), ""},
      {"single_f32", file(object({a8}), filler(8)), ""},
      {"scalar_i64", file(object({entry("s", "I64", "[]", 0, 8)}), filler(8)), ""},
      {"zero_size_between",
       file(object({a8, entry("z", "F32", "[0,3]", 8, 8), entry("b", "U8", "[3]", 8, 11)}), filler(11)), ""},
      {"with_metadata", file(object({"\"__metadata__\":{\"format\":\"pt\",\"k\":\"\"}", a8}), filler(8)), ""},
      {"empty_metadata", file(object({"\"__metadata__\":{}", a8}), filler(8)), ""},
      {"unpadded_header", file(object({a8}), filler(8), /*pad=*/false), ""},
      {"header_order_differs_from_offsets",
       file(object({entry("b", "I16", "[2,2]", 8, 16), a8}), filler(16)), ""},
      {"unicode_and_escaped_names",
       file(object({entry("Gewicht_\xc3\xa4", "F32", "[1]", 0, 4), entry("q\\\"\\\\\\n", "U8", "[1]", 4, 5)}),
            filler(5)),
       ""},
      {"all_dtypes",
       file(object({entry("bool", "BOOL", "[1]", 0, 1), entry("u8", "U8", "[1]", 1, 2), entry("i8", "I8", "[1]", 2, 3),
                    entry("e5m2", "F8_E5M2", "[1]", 3, 4), entry("e4m3", "F8_E4M3", "[1]", 4, 5),
                    entry("e8m0", "F8_E8M0", "[1]", 5, 6), entry("i16", "I16", "[1]", 6, 8),
                    entry("u16", "U16", "[1]", 8, 10), entry("f16", "F16", "[1]", 10, 12),
                    entry("bf16", "BF16", "[1]", 12, 14), entry("i32", "I32", "[1]", 14, 18),
                    entry("u32", "U32", "[1]", 18, 22), entry("f32", "F32", "[1]", 22, 26),
                    entry("i64", "I64", "[1]", 26, 34), entry("u64", "U64", "[1]", 34, 42),
                    entry("f64", "F64", "[1]", 42, 50), entry("c64", "C64", "[1]", 50, 58)}),
            filler(58)),
       ""},
  };
}

/// Files breaking one rule each; a reader must reject every one with a FormatError containing `fragment`.
inline std::vector<Case> malformed_cases() {
  const std::string a8 = entry("a", "F32", "[2]", 0, 8);
  const auto with_shape = [](const std::string& shape) {
    return file(object({entry("a", "\"F32\"", shape, "[0,8]")}), filler(8));
  };
  const auto with_offsets = [](const std::string& offsets) {
    return file(object({entry("a", "\"F32\"", "[2]", offsets)}), filler(8));
  };
  const auto with_metadata = [&](const std::string& metadata) {
    return file(object({"\"__metadata__\":" + metadata, a8}), filler(8));
  };
  const std::string bad_shape = "field 'shape': expected an array";
  const std::string bad_offsets = "field 'data_offsets': expected [begin, end]";
  const std::string bad_metadata = "__metadata__: expected an object of string to string";
  const std::string bad_utf8 = "expected valid UTF-8";
  const std::string bad_json = "expected valid JSON";
  const std::string not_object = "expected a JSON object starting with '{'";
  return {
      // length field
      {"empty_file", {}, "expected at least 8 bytes"},
      {"seven_bytes", Bytes(7, 0), "expected at least 8 bytes"},
      {"header_length_over_cap", raw_file(100'000'001, "{}"), "expected at most 100000000 bytes"},
      {"header_length_max_u64", raw_file(~std::uint64_t{0}, "{}"), "expected at most 100000000 bytes"},
      {"header_length_past_end", raw_file(64, "{}      "), "(the rest of the file)"},
      // encoding and JSON syntax
      {"header_invalid_utf8_byte", file("{\"a\xff\":{}}"), bad_utf8},
      {"header_overlong_utf8", file("{\"\xc0\xaf\":{}}"), bad_utf8},
      {"header_utf8_surrogate", file("{\"\xed\xa0\x80\":{}}"), bad_utf8},
      {"header_utf8_above_max", file("{\"\xf4\x90\x80\x80\":{}}"), bad_utf8},
      {"header_utf8_cut_short", file("{\"\xe2\x82\":{}}"), bad_utf8},
      {"header_utf8_cut_by_length", raw_file(3, "{\"\xe2\x82\xac\":{}}"), bad_utf8},
      {"header_empty", raw_file(0, ""), "found an empty header"},
      {"header_array", file("[]"), not_object},
      {"header_string", file("\"abc\""), not_object},
      {"header_number", file("42"), not_object},
      {"header_leading_space", file(" {}"), not_object},
      {"header_unterminated", file("{\"a\":"), bad_json},
      {"header_trailing_garbage", file("{} x"), bad_json},
      {"header_nul_padding", raw_file(8, std::string("{}\0\0\0\0\0\0", 8)), bad_json},
      {"header_nul_then_garbage", raw_file(8, std::string("{}\0 junk", 8)), bad_json},
      {"header_nul_in_name", file(object({entry(std::string("a\0b", 3), "F32", "[2]", 0, 8)}), filler(8)), bad_json},
      {"header_two_objects", file("{}{}"), bad_json},
      {"header_lone_surrogate_escape", file(object({entry("\\ud800", "F32", "[2]", 0, 8)}), filler(8)), bad_json},
      {"header_number_out_of_range", with_shape("[1e400]"), bad_json},
      {"header_deep_nesting", with_shape(std::string(40, '[') + std::string(40, ']')),
       "expected JSON nested at most 16 levels deep"},
      // duplicates (nlohmann alone would keep the last one)
      {"duplicate_tensor", file(object({a8, a8}), filler(8)), "found duplicate 'a'"},
      {"duplicate_metadata", file(object({"\"__metadata__\":{}", "\"__metadata__\":{}", a8}), filler(8)),
       "found duplicate '__metadata__'"},
      {"duplicate_entry_key",
       file("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", filler(8)),
       "tensor 'a': expected unique keys, found duplicate key 'dtype'"},
      {"duplicate_metadata_key", with_metadata("{\"k\":\"v\",\"k\":\"w\"}"), "found duplicate key 'k'"},
      // entry structure
      {"empty_tensor_name", file(object({entry("", "F32", "[2]", 0, 8)}), filler(8)), "non-empty tensor name"},
      {"entry_array", file("{\"a\":[1,2]}"), "tensor 'a': expected an object with keys"},
      {"entry_null", file("{\"a\":null}"), "tensor 'a': expected an object with keys"},
      {"entry_string", file("{\"a\":\"F32\"}"), "tensor 'a': expected an object with keys"},
      {"missing_dtype", file("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", filler(8)), "expected key 'dtype'"},
      {"missing_shape", file("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", filler(8)), "expected key 'shape'"},
      {"missing_data_offsets", file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", filler(8)),
       "expected key 'data_offsets'"},
      {"empty_entry", file("{\"a\":{}}"), "expected key 'dtype'"},
      {"extra_key",
       file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", filler(8)),
       "found extra key 'extra'"},
      // dtype
      {"dtype_unknown", file(object({entry("a", "F128", "[2]", 0, 8)}), filler(8)), "field 'dtype'"},
      {"dtype_lowercase", file(object({entry("a", "f32", "[2]", 0, 8)}), filler(8)), "field 'dtype'"},
      {"dtype_sub_byte", file(object({entry("a", "F4", "[2]", 0, 1)}), filler(1)), "field 'dtype'"},
      {"dtype_number", file(object({entry("a", "4", "[2]", "[0,8]")}), filler(8)), "field 'dtype'"},
      {"dtype_null", file(object({entry("a", "null", "[2]", "[0,8]")}), filler(8)), "field 'dtype'"},
      // shape
      {"shape_not_array", with_shape("2"), bad_shape},
      {"shape_object", with_shape("{}"), bad_shape},
      {"shape_negative", with_shape("[-2]"), bad_shape},
      {"shape_negative_zero", with_shape("[-0,2]"), bad_shape},
      {"shape_float", with_shape("[2.0]"), bad_shape},
      {"shape_fraction", with_shape("[1.5]"), bad_shape},
      {"shape_exponent", with_shape("[2e0]"), bad_shape},
      {"shape_string", with_shape("[\"2\"]"), bad_shape},
      {"shape_nested", with_shape("[[2]]"), bad_shape},
      {"shape_bool", with_shape("[true]"), bad_shape},
      {"shape_null_dim", with_shape("[null]"), bad_shape},
      {"shape_above_int64", with_shape("[9223372036854775808]"), bad_shape},
      {"shape_above_uint64", with_shape("[18446744073709551616]"), bad_shape},
      {"shape_elements_overflow",
       file(object({entry("a", "F32", "[4294967296,4294967296,1]", 0, 0)})), "which overflows"},
      {"shape_bytes_overflow", file(object({entry("a", "F32", "[4611686018427387904]", 0, 0)})), "which overflows"},
      // data_offsets
      {"offsets_not_array", with_offsets("8"), bad_offsets},
      {"offsets_one_value", with_offsets("[8]"), bad_offsets},
      {"offsets_three_values", with_offsets("[0,4,8]"), bad_offsets},
      {"offsets_empty", with_offsets("[]"), bad_offsets},
      {"offsets_negative", with_offsets("[-8,0]"), bad_offsets},
      {"offsets_float", with_offsets("[0,8.0]"), bad_offsets},
      {"offsets_string", with_offsets("[\"0\",\"8\"]"), bad_offsets},
      {"offsets_reversed", with_offsets("[8,0]"), bad_offsets},
      {"offsets_above_uint64", with_offsets("[0,18446744073709551616]"), bad_offsets},
      // byte length vs shape x dtype
      {"byte_length_short", file(object({entry("a", "F32", "[2]", 0, 4)}), filler(4)), "end - begin = 8 bytes"},
      {"byte_length_long", file(object({entry("a", "F32", "[2]", 0, 12)}), filler(12)), "end - begin = 8 bytes"},
      {"byte_length_scalar", file(object({entry("a", "F64", "[]", 0, 4)}), filler(4)), "end - begin = 8 bytes"},
      {"byte_length_zero_size", file(object({entry("a", "F32", "[0,2]", 0, 4)}), filler(4)), "end - begin = 0 bytes"},
      // layout of the data section
      {"offsets_not_from_zero", file(object({entry("a", "F32", "[2]", 4, 12)}), filler(12)), "a hole of 4 bytes"},
      {"offsets_hole", file(object({a8, entry("b", "F32", "[2]", 12, 20)}), filler(20)), "a hole of 4 bytes"},
      {"offsets_overlap", file(object({a8, entry("b", "F32", "[2]", 4, 12)}), filler(12)), "an overlap of 4 bytes"},
      {"offsets_same_range", file(object({a8, entry("b", "F32", "[2]", 0, 8)}), filler(8)), "an overlap of 8 bytes"},
      {"offsets_near_uint64_max",
       file(object({entry("a", "F32", "[2]", 18446744073709551607u, 18446744073709551615u)}), filler(8)),
       "a hole of 18446744073709551607 bytes"},
      {"trailing_bytes", file(object({a8}), filler(9)), "(trailing bytes)"},
      {"truncated_data", file(object({a8}), filler(7)), "(file truncated)"},
      {"no_tensors_trailing_bytes", file("{}", filler(1)), "(trailing bytes)"},
      // __metadata__
      {"metadata_string", with_metadata("\"x\""), bad_metadata},
      {"metadata_null", with_metadata("null"), bad_metadata},
      {"metadata_array", with_metadata("[\"a\",\"b\"]"), bad_metadata},
      {"metadata_number_value", with_metadata("{\"k\":1}"), "__metadata__ key 'k': expected a string value"},
      {"metadata_object_value", with_metadata("{\"k\":{}}"), "__metadata__ key 'k': expected a string value"},
      {"metadata_null_value", with_metadata("{\"k\":null}"), "__metadata__ key 'k': expected a string value"},
      {"metadata_array_value", with_metadata("{\"k\":[\"v\"]}"), "__metadata__ key 'k': expected a string value"},
  };
}

}  // namespace minidl::test::safetensors_corpus
