// IDX reader: round trips of random raw and gzip files, and rejection of every malformed case with a
// message that names the file and the field.
#include "minidl/data/idx.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <typeinfo>
#include <vector>

#include "idx_corpus.h"
#include "minidl/errors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using minidl::FormatError;
using minidl::IOError;
using minidl::ValueError;
using namespace minidl::data;
using namespace minidl::idx_corpus;
using minidl::testing::expect_error;

namespace {

class IdxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("minidl_test_idx_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& file, const Bytes& bytes) {
    const std::string path = (dir_ / file).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << "cannot write " << path;
    return path;
  }
  fs::path dir_;
};

void expect_images(const IdxImages& img, std::int64_t count, std::int64_t rows, std::int64_t cols,
                   const Bytes& pixels, const std::string& context) {
  ASSERT_EQ(img.count, count) << context;
  ASSERT_EQ(img.rows, rows) << context;
  ASSERT_EQ(img.cols, cols) << context;
  ASSERT_EQ(img.pixels.size(), pixels.size()) << context;
  for (std::size_t i = 0; i < pixels.size(); ++i) ASSERT_EQ(img.pixels[i], pixels[i]) << context << " pixel " << i;
}

void expect_labels(const IdxLabels& lab, const Bytes& labels, const std::string& context) {
  ASSERT_EQ(lab.count, static_cast<std::int64_t>(labels.size())) << context;
  ASSERT_EQ(lab.labels.size(), labels.size()) << context;
  for (std::size_t i = 0; i < labels.size(); ++i) ASSERT_EQ(lab.labels[i], labels[i]) << context << " label " << i;
}

// The encodings every valid file is checked in: raw, gzip in one member (default, stored and best
// compression) and gzip split into three concatenated members.
std::vector<std::pair<std::string, Bytes>> encodings(const Bytes& raw) {
  return {{"raw", raw},
          {"gz", gzip(raw)},
          {"gz_stored", gzip(raw, 1, 0)},
          {"gz_best", gzip(raw, 1, 9)},
          {"gz_3members", gzip(raw, 3)}};
}

}  // namespace

TEST_F(IdxFiles, ImagesRoundTrip) {
  const std::array<std::array<std::uint32_t, 3>, 5> shapes{
      {{1, 1, 1}, {3, 5, 4}, {7, 1, 13}, {100, 28, 28}, {2, 300, 1}}};
  std::uint32_t seed = 1;
  for (const auto& s : shapes) {
    const Bytes pixels = random_bytes(std::size_t{s[0]} * s[1] * s[2], seed++);
    for (const auto& [enc, bytes] : encodings(images_file(s[0], s[1], s[2], pixels))) {
      const std::string ctx =
          std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + " " + enc;
      const std::string path = write("images_" + std::to_string(seed) + "_" + enc + ".idx", bytes);
      expect_images(read_idx_images(path), s[0], s[1], s[2], pixels, ctx + " (file)");
      expect_images(parse_idx_images(bytes, ctx), s[0], s[1], s[2], pixels, ctx + " (memory)");
    }
  }
}

TEST_F(IdxFiles, LabelsRoundTrip) {
  std::uint32_t seed = 100;
  for (int num_classes : {10, 2, 1, 256}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{5000}}) {
      const Bytes labels = random_bytes(n, seed++, num_classes);
      for (const auto& [enc, bytes] : encodings(labels_file(labels))) {
        const std::string ctx = std::to_string(n) + " labels of " + std::to_string(num_classes) + " classes " + enc;
        const std::string path = write("labels_" + std::to_string(seed) + "_" + enc + ".idx", bytes);
        expect_labels(read_idx_labels(path, num_classes), labels, ctx + " (file)");
        expect_labels(parse_idx_labels(bytes, ctx, num_classes), labels, ctx + " (memory)");
      }
    }
  }
}

TEST_F(IdxFiles, ReadFileMaybeGzipReturnsContent) {
  const Bytes raw = random_bytes(70000, 7);
  const Bytes raw_read = read_file_maybe_gzip(write("raw.bin", raw));
  ASSERT_EQ(raw_read, raw);
  for (int members : {1, 4}) {
    const Bytes gz_read = read_file_maybe_gzip(write("data.gz", gzip(raw, members)));
    ASSERT_EQ(gz_read, raw) << members << " members";
  }
  EXPECT_TRUE(read_file_maybe_gzip(write("empty.bin", {})).empty());
  // An empty payload still makes a valid gzip member.
  EXPECT_TRUE(read_file_maybe_gzip(write("empty.gz", gzip({}))).empty());
}

TEST_F(IdxFiles, MalformedImagesRejected) {
  const auto cases = malformed_images(42);
  ASSERT_GT(cases.size(), 40u);
  for (const auto& c : cases) {
    const std::string path = write("bad_images_" + c.id + ".idx", c.bytes);
    expect_error<FormatError>([&] { read_idx_images(path); }, {path, c.field}, c.id + " (file)");
    const std::string name = "memory:" + c.id;
    expect_error<FormatError>([&] { parse_idx_images(c.bytes, name); }, {name, c.field}, c.id + " (memory)");
  }
}

TEST_F(IdxFiles, MalformedLabelsRejected) {
  for (int num_classes : {10, 3}) {
    const auto cases = malformed_labels(43, num_classes);
    ASSERT_GT(cases.size(), 30u);
    for (const auto& c : cases) {
      const std::string ctx = c.id + " num_classes=" + std::to_string(num_classes);
      const std::string path = write("bad_labels_" + c.id + ".idx", c.bytes);
      expect_error<FormatError>([&] { read_idx_labels(path, num_classes); }, {path, c.field}, ctx + " (file)");
      const std::string name = "memory:" + c.id;
      expect_error<FormatError>([&] { parse_idx_labels(c.bytes, name, num_classes); }, {name, c.field},
                                ctx + " (memory)");
    }
  }
}

TEST_F(IdxFiles, LabelOutOfRangeNamesIndexAndValue) {
  Bytes labels = random_bytes(50, 9, 10);
  labels[37] = 12;
  const std::string path = write("labels_bad_value.idx", labels_file(labels));
  expect_error<FormatError>([&] { read_idx_labels(path); }, {path, "label[37]", "found 12", "< 10"}, "label 12");
  // The same file is fine for a reader that expects more classes.
  expect_labels(read_idx_labels(path, 13), labels, "13 classes");
}

TEST_F(IdxFiles, ImagesWithLabelsLayoutRejected) {
  // A labels file given to the images reader and vice versa: caught by the dimension count.
  const std::string labels = write("labels.idx", labels_file(random_bytes(10, 3, 10)));
  const std::string images = write("images.idx", images_file(2, 3, 3, random_bytes(18, 4)));
  expect_error<FormatError>([&] { read_idx_images(labels); }, {labels, "number of dimensions", "expected 3, found 1"},
                            "labels as images");
  expect_error<FormatError>([&] { read_idx_labels(images); }, {images, "number of dimensions", "expected 1, found 3"},
                            "images as labels");
}

TEST_F(IdxFiles, TruncationMessagesGiveExpectedAndFound) {
  const Bytes valid = images_file(2, 3, 4, random_bytes(24, 5));
  const std::string cut = write("cut.idx", Bytes(valid.begin(), valid.end() - 5));
  expect_error<FormatError>([&] { read_idx_images(cut); }, {cut, "data truncated", "expected 24", "found 19"}, "cut");
  Bytes longer = valid;
  longer.insert(longer.end(), 3, 7);
  const std::string extra = write("extra.idx", longer);
  expect_error<FormatError>([&] { read_idx_images(extra); }, {extra, "trailing bytes", "found 27", "3 extra"}, "extra");
}

TEST_F(IdxFiles, MissingFileIsIOError) {
  const std::string missing = (dir_ / "does_not_exist.idx").string();
  expect_error<IOError>([&] { read_idx_images(missing); }, {missing, "cannot open"}, "missing images");
  expect_error<IOError>([&] { read_idx_labels(missing); }, {missing, "cannot open"}, "missing labels");
  expect_error<IOError>([&] { read_file_maybe_gzip(missing); }, {missing, "cannot open"}, "missing file");
  const std::string directory = dir_.string();
  expect_error<IOError>([&] { read_file_maybe_gzip(directory); }, {directory, "cannot read"}, "directory");
}

TEST_F(IdxFiles, CorruptGzipIsFormatErrorNamingFile) {
  Bytes gz = gzip(random_bytes(4000, 11));
  gz[gz.size() / 2] ^= 0xff;
  const std::string path = write("corrupt.gz", gz);
  expect_error<FormatError>([&] { read_file_maybe_gzip(path); }, {path, "gzip"}, "corrupt gzip");
}

TEST(Gunzip, DecompressedSizeIsCapped) {
  const Bytes raw = random_bytes(5000, 12);
  const Bytes gz = gzip(raw);
  EXPECT_EQ(gunzip(gz, "exact", raw.size()), raw);
  expect_error<FormatError>([&] { gunzip(gz, "small_cap", raw.size() - 1); }, {"small_cap", "gzip", "limit of 4999"},
                            "cap one below");
  // A bomb: 64 MiB of zeros compress to ~64 KiB; split over members, so the cap must hold across them.
  const Bytes bomb = gzip(Bytes(std::size_t{64} << 20, 0), 4, 9);
  ASSERT_LT(bomb.size(), std::size_t{1} << 20);
  expect_error<FormatError>([&] { gunzip(bomb, "bomb.gz", std::size_t{1} << 20); }, {"bomb.gz", "limit"}, "bomb");
}

TEST(Gunzip, DetectsMagic) {
  EXPECT_TRUE(is_gzip(gzip({1, 2, 3})));
  EXPECT_FALSE(is_gzip({}));
  EXPECT_FALSE(is_gzip({0x1f}));
  EXPECT_FALSE(is_gzip({0x00, 0x00, 0x08, 0x03}));
}

TEST(IdxCount, MismatchRejected) {
  IdxImages images;
  images.count = 5;
  images.rows = images.cols = 2;
  images.pixels = random_bytes(20, 13);
  IdxLabels labels;
  labels.count = 4;
  labels.labels = random_bytes(4, 14, 10);
  expect_error<FormatError>([&] { check_same_count(images, labels, "img.idx", "lab.idx"); },
                            {"img.idx", "lab.idx", "count", "5", "4"}, "count mismatch");
  labels.count = 5;
  labels.labels = random_bytes(5, 15, 10);
  EXPECT_NO_THROW(check_same_count(images, labels, "img.idx", "lab.idx"));
}

TEST(IdxLabelsArgs, NumClassesOutOfRange) {
  const Bytes bytes = labels_file(random_bytes(5, 16, 10));
  for (int bad : {0, -1, 257})
    expect_error<ValueError>([&] { parse_idx_labels(bytes, "labels.idx", bad); }, {"labels.idx", "num_classes"},
                             "num_classes " + std::to_string(bad));
}

TEST(FashionMnist, RealFilesLoad) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed at " << dir << " (needs train-images-idx3-ubyte.gz and friends)";
  for (const auto& [prefix, count] : {std::pair<std::string, std::int64_t>{"train", 60000}, {"t10k", 10000}}) {
    const std::string images_path = (dir / (prefix + "-images-idx3-ubyte.gz")).string();
    const std::string labels_path = (dir / (prefix + "-labels-idx1-ubyte.gz")).string();
    const IdxImages images = read_idx_images(images_path);
    const IdxLabels labels = read_idx_labels(labels_path);
    EXPECT_EQ(images.count, count) << images_path;
    EXPECT_EQ(images.rows, 28) << images_path;
    EXPECT_EQ(images.cols, 28) << images_path;
    EXPECT_EQ(images.pixels.size(), static_cast<std::size_t>(count * 28 * 28)) << images_path;
    EXPECT_EQ(labels.count, count) << labels_path;
    EXPECT_NO_THROW(check_same_count(images, labels, images_path, labels_path));
    // Fashion-MNIST is balanced: every class 0..9 appears exactly count/10 times.
    std::array<std::int64_t, 10> per_class{};
    for (std::uint8_t l : labels.labels) {
      ASSERT_LT(l, 10) << labels_path;
      ++per_class[l];
    }
    for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], count / 10) << labels_path << " class " << c;
    // Real images use the full 0..255 range, and no image is blank.
    EXPECT_EQ(*std::max_element(images.pixels.begin(), images.pixels.end()), 255) << images_path;
    for (std::int64_t i = 0; i < count; ++i) {
      const auto first = images.pixels.begin() + i * 28 * 28;
      ASSERT_TRUE(std::any_of(first, first + 28 * 28, [](std::uint8_t p) { return p != 0; }))
          << images_path << " image " << i << " is blank";
    }
  }
}

TEST(IdxFuzz, RandomDamageIsRejectedOrConsistent) {
  // Random byte edits, truncations and extensions of valid raw and gzip files: the parser either returns
  // an object whose sizes agree with its data, or throws FormatError; nothing else.
  std::mt19937 rng(2024);
  const Bytes images = images_file(4, 6, 5, random_bytes(120, 17));
  const Bytes labels = labels_file(random_bytes(30, 18, 10));
  const std::vector<Bytes> seeds{images, gzip(images), labels, gzip(labels)};
  for (int trial = 0; trial < 4000; ++trial) {
    Bytes b = seeds[trial % seeds.size()];
    switch (rng() % 3) {
      case 0:
        for (unsigned k = 1 + rng() % 3; k > 0; --k) b[rng() % b.size()] = static_cast<std::uint8_t>(rng());
        break;
      case 1: b.resize(rng() % b.size()); break;
      default: b.resize(b.size() + 1 + rng() % 8, static_cast<std::uint8_t>(rng())); break;
    }
    try {
      if (trial % 2 == 0) {
        const IdxImages img = parse_idx_images(b, "fuzz");
        ASSERT_EQ(img.pixels.size(), static_cast<std::size_t>(img.count * img.rows * img.cols)) << "trial " << trial;
      } else {
        const IdxLabels lab = parse_idx_labels(b, "fuzz");
        ASSERT_EQ(lab.labels.size(), static_cast<std::size_t>(lab.count)) << "trial " << trial;
        for (std::uint8_t l : lab.labels) ASSERT_LT(l, 10) << "trial " << trial;
      }
    } catch (const FormatError& e) {
      ASSERT_NE(std::string(e.what()).find("fuzz"), std::string::npos) << e.what();
    }
  }
}
