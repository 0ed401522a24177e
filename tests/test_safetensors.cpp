// The safetensors reader/writer at the byte level, and the atomic file writes under it.
#include "file_helpers.h"
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "io/atomic_file.h"
#include "minidl/errors.h"
#include "minidl/io/safetensors.h"
#include "safetensors_corpus.h"

namespace {

namespace fs = std::filesystem;
namespace corpus = minidl::test::safetensors_corpus;
using minidl::FormatError;
using minidl::IOError;
using minidl::ValueError;
using minidl::io::TensorRecord;
using Bytes = std::vector<std::uint8_t>;

using test_files::message_of;
using test_files::slurp;
using test_files::spit;
/// Each test's files live in a fresh temp directory.
struct TempDir : test_files::TempDir {
  TempDir() : test_files::TempDir("minidl_st_") {}
};

std::uint64_t fresh_seed() {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "[ seed     ] " << seed << "\n";
  return seed;
}

TensorRecord random_record(std::mt19937_64& rng, const std::string& name, const std::string& dtype,
                           std::vector<std::int64_t> shape) {
  std::int64_t numel = 1;
  for (auto d : shape) numel *= d;
  const std::size_t nbytes = static_cast<std::size_t>(numel) * minidl::io::dtype_bytes(dtype);
  TensorRecord t{name, dtype, std::move(shape), Bytes(nbytes)};
  for (auto& b : t.data) b = static_cast<std::uint8_t>(dtype == "BOOL" ? rng() % 2 : rng());
  return t;
}

void expect_same_tensors(const std::vector<TensorRecord>& expected, const std::vector<TensorRecord>& found) {
  ASSERT_EQ(expected.size(), found.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("tensor " + expected[i].name);
    EXPECT_EQ(expected[i].name, found[i].name);
    EXPECT_EQ(expected[i].dtype, found[i].dtype);
    EXPECT_EQ(expected[i].shape, found[i].shape);
    EXPECT_EQ(expected[i].data, found[i].data);  // compares every byte
  }
}

TEST(Safetensors, DtypeBytes) {
  const std::vector<std::pair<std::string, std::size_t>> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4},  {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  for (const auto& [dtype, bytes] : sizes) EXPECT_EQ(minidl::io::dtype_bytes(dtype), bytes) << dtype;
  for (const std::string bad : {"", "f32", "F128", "F4", "float32"}) {
    const std::string msg = message_of<FormatError>([&] { minidl::io::dtype_bytes(bad); });
    EXPECT_NE(msg.find("'" + bad + "'"), std::string::npos) << msg;
  }
}

TEST(Safetensors, RoundTripRandom) {
  std::mt19937_64 rng(fresh_seed());
  const std::vector<TensorRecord> tensors = {
      random_record(rng, "layer.0.weight", "F32", {3, 4}),
      random_record(rng, "scalar", "I64", {}),
      random_record(rng, "empty", "F16", {2, 0, 3}),
      random_record(rng, "f64", "F64", {5}),
      random_record(rng, "bf16", "BF16", {7}),
      random_record(rng, "i32", "I32", {2, 2, 2}),
      random_record(rng, "i16", "I16", {3}),
      random_record(rng, "i8", "I8", {9}),
      random_record(rng, "u8", "U8", {4, 4}),
      random_record(rng, "mask", "BOOL", {6}),
      random_record(rng, "also_empty", "U8", {0}),
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "\xc3\xbcnicode \"quoted\""}};

  const Bytes bytes = minidl::io::serialize_safetensors(tensors, metadata);
  const auto parsed = minidl::io::parse_safetensors(bytes, "memory");
  expect_same_tensors(tensors, parsed.tensors);
  EXPECT_EQ(parsed.metadata, metadata);

  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  minidl::io::write_safetensors(path, tensors, metadata);
  EXPECT_EQ(slurp(path), bytes);
  const auto loaded = minidl::io::read_safetensors(path);
  expect_same_tensors(tensors, loaded.tensors);
  EXPECT_EQ(loaded.metadata, metadata);
}

TEST(Safetensors, ZeroSizeTensorsAtOneOffsetKeepTheirOrder) {
  std::mt19937_64 rng(fresh_seed());
  const std::vector<TensorRecord> tensors = {random_record(rng, "z2", "F32", {0}), random_record(rng, "z1", "F32", {0}),
                                             random_record(rng, "a", "U8", {3}),
                                             random_record(rng, "z0", "I64", {4, 0})};
  const auto parsed = minidl::io::parse_safetensors(minidl::io::serialize_safetensors(tensors, {}), "memory");
  expect_same_tensors(tensors, parsed.tensors);
  EXPECT_TRUE(parsed.metadata.empty());
}

TEST(Safetensors, ByteExactAgainstReferenceWriter) {
  // What the Python safetensors library writes for {"a": torch.tensor([1.0, -2.5])}: the 54-byte header
  // below padded with 2 spaces to 56, then the two floats little-endian.
  const std::string json = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(json.size(), 54u);
  Bytes expected = {56, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), json.begin(), json.end());
  expected.insert(expected.end(), {' ', ' '});
  expected.insert(expected.end(), {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x20, 0xC0});  // 1.0f, -2.5f

  const TensorRecord a{"a", "F32", {2}, {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x20, 0xC0}};
  EXPECT_EQ(minidl::io::serialize_safetensors({a}, {}), expected);
  const auto parsed = minidl::io::parse_safetensors(expected, "reference");
  expect_same_tensors({a}, parsed.tensors);

  // With metadata the reference writer puts __metadata__ first: 85-byte header padded with 3 spaces to 88.
  const std::string json_meta =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(json_meta.size(), 85u);
  Bytes expected_meta = {88, 0, 0, 0, 0, 0, 0, 0};
  expected_meta.insert(expected_meta.end(), json_meta.begin(), json_meta.end());
  expected_meta.insert(expected_meta.end(), {' ', ' ', ' '});
  expected_meta.insert(expected_meta.end(), a.data.begin(), a.data.end());
  EXPECT_EQ(minidl::io::serialize_safetensors({a}, {{"format", "pt"}}), expected_meta);
  EXPECT_EQ(minidl::io::parse_safetensors(expected_meta, "reference").metadata,
            (std::map<std::string, std::string>{{"format", "pt"}}));
}

TEST(Safetensors, HeaderPaddedWithSpacesToMultipleOf8) {
  for (std::size_t name_length = 1; name_length <= 16; ++name_length) {
    const TensorRecord t{std::string(name_length, 'w'), "U8", {1}, {7}};
    const Bytes bytes = minidl::io::serialize_safetensors({t}, {});
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= std::uint64_t{bytes[i]} << (8 * i);
    EXPECT_EQ(n % 8, 0u) << name_length;
    ASSERT_EQ(bytes.size(), 8 + n + 1);
    const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
    const std::size_t close = header.find_last_of('}');
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << header;
    EXPECT_LT(header.size() - close - 1, 8u) << header;
    EXPECT_EQ(minidl::io::parse_safetensors(bytes, "padded").tensors.at(0).name, t.name);
  }
  // No tensors at all: "{}" padded to 8.
  EXPECT_EQ(minidl::io::serialize_safetensors({}, {}), corpus::file("{}"));
}

TEST(Safetensors, WriterRejectsBadRecords) {
  const TensorRecord ok{"a", "F32", {2}, Bytes(8, 1)};
  const auto rejects = [&](const TensorRecord& bad, const std::string& fragment) {
    const std::string msg =
        message_of<ValueError>([&] { minidl::io::serialize_safetensors({ok, bad}, {}); });
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  };
  rejects({"a", "F32", {2}, Bytes(8, 1)}, "unique names");
  rejects({"", "F32", {2}, Bytes(8, 1)}, "non-empty name");
  rejects({"__metadata__", "F32", {2}, Bytes(8, 1)}, "reserved");
  rejects({"b\xff", "F32", {2}, Bytes(8, 1)}, "UTF-8");
  rejects({"b", "F128", {2}, Bytes(8, 1)}, "dtype");
  rejects({"b", "F32", {-2}, Bytes(8, 1)}, "negative");
  rejects({"b", "F32", {2}, Bytes(7, 1)}, "expected 8 bytes");
  rejects({"b", "F32", {}, Bytes(8, 1)}, "expected 4 bytes");
  rejects({"b", "F32", {0}, Bytes(1, 1)}, "expected 0 bytes");
  rejects({"b", "F32", {1ll << 62, 4}, Bytes(1, 1)}, "more than 2^64");
  const std::string msg = message_of<ValueError>(
      [&] { minidl::io::serialize_safetensors({ok}, {{"k", "\xc0\xaf"}}); });
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
  // A header no reader would accept is refused at write time.
  const std::string big = message_of<ValueError>(
      [&] { minidl::io::serialize_safetensors({ok}, {{"k", std::string(100'000'000, 'x')}}); });
  EXPECT_NE(big.find("expected at most 100000000 bytes"), std::string::npos) << big;
}

TEST(Safetensors, ValidCorpusIsAccepted) {
  for (const auto& c : corpus::valid_cases()) {
    SCOPED_TRACE(c.label);
    EXPECT_NO_THROW(minidl::io::parse_safetensors(c.bytes, c.label));
  }
  const auto cases = corpus::valid_cases();
  const auto find = [&](const std::string& label) {
    for (const auto& c : cases) {
      if (c.label == label) return minidl::io::parse_safetensors(c.bytes, label);
    }
    throw std::runtime_error("no case " + label);
  };
  const auto order = find("header_order_differs_from_offsets");
  ASSERT_EQ(order.tensors.size(), 2u);
  EXPECT_EQ(order.tensors[0].name, "a");  // data-offset order, not header order
  const Bytes data = corpus::filler(16);
  EXPECT_EQ(order.tensors[0].data, Bytes(data.begin(), data.begin() + 8));
  EXPECT_EQ(order.tensors[1].data, Bytes(data.begin() + 8, data.end()));
  EXPECT_EQ(order.tensors[1].shape, (std::vector<std::int64_t>{2, 2}));
  const auto names = find("unicode_and_escaped_names");
  EXPECT_EQ(names.tensors.at(0).name, "Gewicht_\xc3\xa4");
  EXPECT_EQ(names.tensors.at(1).name, "q\"\\\n");
  EXPECT_EQ(find("with_metadata").metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"k", ""}}));
  EXPECT_EQ(find("all_dtypes").tensors.size(), 17u);
  EXPECT_TRUE(find("empty_header").tensors.empty());
}

TEST(Safetensors, MalformedCorpusIsRejectedWithPreciseMessages) {
  for (const auto& c : corpus::malformed_cases()) {
    SCOPED_TRACE(c.label);
    const std::string name = "corpus/" + c.label + ".safetensors";
    const std::string msg = message_of<FormatError>([&] { minidl::io::parse_safetensors(c.bytes, name); });
    EXPECT_NE(msg.find("'" + name + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.fragment), std::string::npos) << "wanted: " << c.fragment << "\n got: " << msg;
    EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
    EXPECT_NE(msg.find("found"), std::string::npos) << msg;
  }
}

TEST(Safetensors, HugeNestingIsRejectedWithoutBuildingIt) {
  const std::string header = "{\"a\":" + std::string(10'000'000, '[');
  const std::string msg = message_of<FormatError>([&] { minidl::io::parse_safetensors(corpus::file(header), "deep"); });
  EXPECT_NE(msg.find("nested at most"), std::string::npos) << msg;
}

TEST(Safetensors, EveryTruncationAndExtensionIsRejected) {
  std::mt19937_64 rng(fresh_seed());
  const Bytes bytes = minidl::io::serialize_safetensors(
      {random_record(rng, "w", "F32", {3, 2}), random_record(rng, "b", "F64", {2})}, {{"k", "v"}});
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const Bytes prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(minidl::io::parse_safetensors(prefix, "cut"), FormatError) << "length " << n;
  }
  Bytes longer = bytes;
  longer.push_back(static_cast<std::uint8_t>(rng()));
  EXPECT_THROW(minidl::io::parse_safetensors(longer, "long"), FormatError);
}

TEST(Safetensors, ReadFileNamesThePath) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  spit(path, corpus::file("{\"a\":null}"));
  const std::string msg = message_of<FormatError>([&] { minidl::io::read_safetensors(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;

  const std::string missing = dir.file("missing.safetensors");
  const std::string io_msg = message_of<IOError>([&] { minidl::io::read_safetensors(missing); });
  EXPECT_NE(io_msg.find(missing), std::string::npos) << io_msg;
  EXPECT_NE(io_msg.find("No such file"), std::string::npos) << io_msg;
}

TEST(AtomicFile, ReadWholeFile) {
  TempDir dir;
  std::mt19937_64 rng(fresh_seed());
  Bytes data(100'003);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng());
  spit(dir.file("f"), data);
  EXPECT_EQ(minidl::io::read_whole_file(dir.file("f")), data);
  spit(dir.file("empty"), {});
  EXPECT_TRUE(minidl::io::read_whole_file(dir.file("empty")).empty());
  const std::string msg = message_of<IOError>([&] { minidl::io::read_whole_file(dir.file("")); });
  EXPECT_NE(msg.find(dir.file("")), std::string::npos) << msg;  // the directory itself: read() fails
}

TEST(AtomicFile, MissingDirectoryThrowsAndLeavesNoTempFile) {
  TempDir dir;
  const std::string path = dir.file("missing/sub/model.safetensors");
  const Bytes data = {1, 2, 3};
  const std::string msg = message_of<IOError>([&] { minidl::io::atomic_write_file(path, data.data(), data.size()); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicFile, OverwriteReplacesTheFile) {
  TempDir dir;
  const std::string path = dir.file("f.bin");
  const Bytes first(1000, 0xAB), second = {9, 8, 7};
  minidl::io::atomic_write_file(path, first.data(), first.size());
  EXPECT_EQ(slurp(path), first);
  minidl::io::atomic_write_file(path, second.data(), second.size());
  EXPECT_EQ(slurp(path), second);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"f.bin"});
}

TEST(AtomicFile, FailedRenameLeavesTargetIntact) {
  // A directory in the target's place makes the final rename fail after the temporary file was written.
  TempDir dir;
  const std::string path = dir.file("target");
  fs::create_directory(path);
  spit(dir.file("target/inside"), {1, 2, 3});
  const Bytes data = {4, 5, 6};
  const std::string msg = message_of<IOError>([&] { minidl::io::atomic_write_file(path, data.data(), data.size()); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("renaming"), std::string::npos) << msg;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"target"});
  EXPECT_EQ(slurp(dir.file("target/inside")), (Bytes{1, 2, 3}));
}

// Lowers the file-size limit so writes fail with EFBIG like on a full disk (works as root, unlike chmod).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    saved_handler_ = signal(SIGXFSZ, SIG_IGN);  // otherwise the write kills the process
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lowered);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, saved_handler_);
  }

 private:
  rlimit saved_{};
  sighandler_t saved_handler_;
};

TEST(AtomicFile, FailedWriteLeavesOldFileIntact) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  std::mt19937_64 rng(fresh_seed());
  const std::vector<TensorRecord> old_tensors = {random_record(rng, "w", "F32", {4})};
  minidl::io::write_safetensors(path, old_tensors, {});
  const Bytes old_bytes = slurp(path);

  const std::vector<TensorRecord> big = {random_record(rng, "w", "F32", {64, 1024})};
  std::string msg;
  {
    FileSizeLimit limit(4096);
    msg = message_of<IOError>([&] { minidl::io::write_safetensors(path, big, {}); });
  }
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("writing"), std::string::npos) << msg;
  EXPECT_EQ(slurp(path), old_bytes);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.safetensors"});
  expect_same_tensors(old_tensors, minidl::io::read_safetensors(path).tensors);
}

}  // namespace
