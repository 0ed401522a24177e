// The data pipeline: MnistDataset (on synthetic IDX files, raw and gzip, and on Fashion-MNIST when installed),
// epoch_order, DataLoader (coverage, order, shapes, errors from the prefetch thread, shutdown) on every path,
// and index_select.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "idx_corpus.h"
#include "cpu/parallel.h"
#include "minidl/data/data_loader.h"
#include "minidl/data/mnist.h"
#include "minidl/indexing.h"
#include "minidl/threads.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace minidl;
using namespace minidl::data;
using minidl::idx_corpus::Bytes;
using minidl::testing::expect_error;
using minidl::testing::random_tensor;

namespace {

// ---- helpers ------------------------------------------------------------------------------------------------

// Runs fn on its own thread and fails (then aborts: a hung thread cannot be abandoned safely) when it has not
// finished within `seconds`; rethrows what fn threw.
void run_with_timeout(const std::function<void()>& fn, int seconds = 30) {
  auto task = std::make_shared<std::packaged_task<void()>>(fn);
  std::future<void> done = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (done.wait_for(std::chrono::seconds(seconds)) == std::future_status::timeout) {
    std::fprintf(stderr, "test body did not finish within %d s: the DataLoader deadlocked\n", seconds);
    std::fflush(stderr);
    std::abort();
  }
  done.get();
}

// Sample i has data filled with the value i and target i, so a batch tells exactly which samples it holds.
class RangeDataset : public Dataset {
 public:
  RangeDataset(std::int64_t n, Shape sample_shape) : n_(n), sample_shape_(std::move(sample_shape)) {}
  std::int64_t size() const override { return n_; }
  Shape sample_shape() const override { return sample_shape_; }
  Batch get_batch(const std::vector<std::int64_t>& indices) const override {
    const auto k = static_cast<std::int64_t>(indices.size());
    const std::int64_t per = shape_numel(sample_shape_);
    std::vector<float> data(static_cast<std::size_t>(k * per));
    for (std::int64_t r = 0; r < k; ++r)
      std::fill(data.begin() + r * per, data.begin() + (r + 1) * per, static_cast<float>(indices[static_cast<std::size_t>(r)]));
    Shape shape{k};
    shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
    return {from_vector(data, shape), from_vector(indices, {k})};
  }

 private:
  std::int64_t n_;
  Shape sample_shape_;
};

struct DatasetFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A RangeDataset that throws DatasetFailure for the batch that starts with sample `fail_at`, and counts calls.
class ThrowingDataset : public RangeDataset {
 public:
  ThrowingDataset(std::int64_t n, std::int64_t fail_at) : RangeDataset(n, {2, 3}), fail_at_(fail_at) {}
  Batch get_batch(const std::vector<std::int64_t>& indices) const override {
    ++calls;
    if (!indices.empty() && indices.front() == fail_at_)
      throw DatasetFailure("synthetic failure at sample " + std::to_string(fail_at_));
    return RangeDataset::get_batch(indices);
  }
  mutable std::atomic<int> calls{0};

 private:
  std::int64_t fail_at_;
};

// A RangeDataset whose get_batch takes a while, so shutdown happens while the thread is inside it.
class SlowDataset : public RangeDataset {
 public:
  using RangeDataset::RangeDataset;
  Batch get_batch(const std::vector<std::int64_t>& indices) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return RangeDataset::get_batch(indices);
  }
};

struct Epoch {
  std::vector<std::vector<float>> data;
  std::vector<std::vector<std::int64_t>> target;
  std::vector<Shape> data_shapes;
};

// All batches of one epoch, moved to the host. Batches are kept alive until the epoch ends, so a path that
// recycled memory still referenced by a returned batch would show up as wrong values.
Epoch run_epoch(DataLoader& loader, std::int64_t e) {
  Epoch out;
  std::vector<Batch> held;
  for (Batch& b : loader.epoch(e)) held.push_back(b);
  for (const Batch& b : held) {
    EXPECT_EQ(b.data.dtype(), kFloat32);
    EXPECT_EQ(b.target.dtype(), kInt64);
    EXPECT_EQ(b.data.device(), loader.options().device);
    EXPECT_EQ(b.target.device(), loader.options().device);
    out.data_shapes.push_back(b.data.sizes());
    out.data.push_back(b.data.to_vector<float>());
    out.target.push_back(b.target.to_vector<std::int64_t>());
  }
  return out;
}

// Checks an epoch of a RangeDataset against the definition: batch b holds order[b*bs ...] of epoch_order.
void expect_epoch_matches_definition(const Epoch& got, std::int64_t n, const Shape& sample, const DataLoaderOptions& o,
                                     std::int64_t epoch, const std::string& what) {
  const std::vector<std::int64_t> order = epoch_order(n, o.shuffle, o.seed, epoch);
  const std::int64_t batches = o.drop_last ? n / o.batch_size : (n + o.batch_size - 1) / o.batch_size;
  ASSERT_EQ(static_cast<std::int64_t>(got.target.size()), batches) << what;
  const std::int64_t per = shape_numel(sample);
  std::multiset<std::int64_t> seen;
  for (std::int64_t b = 0; b < batches; ++b) {
    const std::int64_t rows = std::min(o.batch_size, n - b * o.batch_size);
    Shape shape{rows};
    shape.insert(shape.end(), sample.begin(), sample.end());
    EXPECT_EQ(got.data_shapes[static_cast<std::size_t>(b)], shape) << what << " batch " << b;
    const auto& t = got.target[static_cast<std::size_t>(b)];
    const auto& d = got.data[static_cast<std::size_t>(b)];
    ASSERT_EQ(static_cast<std::int64_t>(t.size()), rows) << what << " batch " << b;
    ASSERT_EQ(static_cast<std::int64_t>(d.size()), rows * per) << what << " batch " << b;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t expected = order[static_cast<std::size_t>(b * o.batch_size + r)];
      ASSERT_EQ(t[static_cast<std::size_t>(r)], expected) << what << " batch " << b << " row " << r;
      for (std::int64_t i = 0; i < per; ++i)
        ASSERT_EQ(d[static_cast<std::size_t>(r * per + i)], static_cast<float>(expected)) << what << " batch " << b;
      seen.insert(expected);
    }
  }
  // Every sample exactly once (all of them unless drop_last cut the tail).
  const std::int64_t visited = o.drop_last ? batches * o.batch_size : n;
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), visited) << what;
  EXPECT_EQ(static_cast<std::int64_t>(std::set<std::int64_t>(seen.begin(), seen.end()).size()), visited)
      << what << ": a sample appeared twice";
  EXPECT_TRUE(seen.empty() || (*seen.begin() >= 0 && *seen.rbegin() < n)) << what;
}

void expect_same_epochs(const Epoch& a, const Epoch& b, const std::string& what) {
  ASSERT_EQ(a.target.size(), b.target.size()) << what;
  for (std::size_t i = 0; i < a.target.size(); ++i) {
    EXPECT_EQ(a.data_shapes[i], b.data_shapes[i]) << what << " batch " << i;
    EXPECT_EQ(a.target[i], b.target[i]) << what << " batch " << i;
    EXPECT_EQ(a.data[i], b.data[i]) << what << " batch " << i;
  }
}

std::string describe(const DataLoaderOptions& o) {
  return detail::str("batch_size=", o.batch_size, " shuffle=", o.shuffle, " drop_last=", o.drop_last,
                     " prefetch=", o.prefetch, " device=", o.device, " resident=", o.device_resident);
}

// Writes a synthetic MNIST-format directory: train (raw files) and t10k (gzip), random pixels and labels.
class SyntheticMnist : public ::testing::Test {
 protected:
  static constexpr std::int64_t kTrain = 103, kTest = 37, kRows = 5, kCols = 4;

  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("minidl_test_data_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    train_pixels_ = idx_corpus::random_bytes(kTrain * kRows * kCols, 11);
    train_labels_ = idx_corpus::random_bytes(kTrain, 12, 10);
    test_pixels_ = idx_corpus::random_bytes(kTest * kRows * kCols, 13);
    test_labels_ = idx_corpus::random_bytes(kTest, 14, 10);
    const auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
    write("train-images-idx3-ubyte", idx_corpus::idx_file({u32(kTrain), u32(kRows), u32(kCols)}, train_pixels_));
    write("train-labels-idx1-ubyte", idx_corpus::idx_file({u32(kTrain)}, train_labels_));
    write("t10k-images-idx3-ubyte.gz",
          idx_corpus::gzip(idx_corpus::idx_file({u32(kTest), u32(kRows), u32(kCols)}, test_pixels_)));
    write("t10k-labels-idx1-ubyte.gz", idx_corpus::gzip(idx_corpus::idx_file({u32(kTest)}, test_labels_)));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const std::string& name, const Bytes& bytes) {
    std::ofstream out(dir_ / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << "cannot write " << (dir_ / name);
  }
  fs::path dir_;
  Bytes train_pixels_, train_labels_, test_pixels_, test_labels_;
};

}  // namespace

// ---- MnistDataset -------------------------------------------------------------------------------------------

TEST_F(SyntheticMnist, LoadsBothSplitsNormalisedExactly) {
  for (const Normalization norm : {Normalization::mnist(), Normalization::fashion_mnist()}) {
    for (const bool train : {true, false}) {
      const MnistDataset ds = MnistDataset::load(dir_.string(), train, norm);
      const Bytes& pixels = train ? train_pixels_ : test_pixels_;
      const Bytes& labels = train ? train_labels_ : test_labels_;
      const std::int64_t n = train ? kTrain : kTest;
      const std::string what = detail::str(train ? "train" : "test", " mean=", norm.mean);
      ASSERT_EQ(ds.size(), n) << what;
      EXPECT_EQ(ds.sample_shape(), (Shape{1, kRows, kCols})) << what;
      ASSERT_EQ(ds.images().sizes(), (Shape{n, 1, kRows, kCols})) << what;
      ASSERT_EQ(ds.images().dtype(), kFloat32) << what;
      ASSERT_EQ(ds.labels().dtype(), kInt64) << what;
      EXPECT_EQ(ds.normalization().mean, norm.mean) << what;
      const std::vector<float> img = ds.images().to_vector<float>();
      for (std::size_t i = 0; i < pixels.size(); ++i)
        ASSERT_EQ(img[i], static_cast<float>((pixels[i] / 255.0 - norm.mean) / norm.std)) << what << " pixel " << i;
      const std::vector<std::int64_t> lab = ds.labels().to_vector<std::int64_t>();
      for (std::size_t i = 0; i < labels.size(); ++i) ASSERT_EQ(lab[i], labels[i]) << what << " label " << i;
    }
  }
}

TEST_F(SyntheticMnist, NormalizationConstantsAndNames) {
  EXPECT_EQ(Normalization::mnist().mean, 0.1307);
  EXPECT_EQ(Normalization::mnist().std, 0.3081);
  EXPECT_EQ(Normalization::fashion_mnist().mean, 0.2860);
  EXPECT_EQ(Normalization::fashion_mnist().std, 0.3530);
  EXPECT_EQ(Normalization::from_name("MNIST").mean, 0.1307);
  EXPECT_EQ(Normalization::from_name("fashion-mnist").std, 0.3530);
  EXPECT_EQ(Normalization::from_name("fashion_mnist").std, 0.3530);
  EXPECT_EQ(Normalization::from_name("none").std, 1.0);
  expect_error<ValueError>([] { Normalization::from_name("cifar"); }, {"cifar", "fashion-mnist"}, "from_name");
}

/// Training images of `count` pixels, `q` of them of byte `v` and the rest 0: mean q v/255 and std
/// sqrt(q (1 - q)) v/255, which sets either known dataset's statistics with the right v and q.
Bytes two_level_pixels(std::size_t count, std::uint8_t v, double q) {
  Bytes pixels(count, 0);
  const auto n = static_cast<std::size_t>(std::lround(q * static_cast<double>(count)));
  for (std::size_t i = 0; i < n; ++i) pixels[i * count / n] = v;
  return pixels;
}

TEST_F(SyntheticMnist, AutoNormalizationDecidesFromTheDataNotFromThePath) {
  const auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
  const std::size_t count = static_cast<std::size_t>(kTrain * kRows * kCols);
  // Fashion-MNIST's statistics (0.2860, 0.3530) in a folder named like MNIST, and MNIST's in one named like
  // Fashion-MNIST: the names must not matter.
  const fs::path fashion_data = dir_ / "mnist", mnist_data = dir_ / "Fashion-MNIST";
  for (const auto& [where, v, q] : {std::tuple{fashion_data, std::uint8_t{184}, 0.3964},
                                    std::tuple{mnist_data, std::uint8_t{218}, 0.1529}}) {
    fs::create_directories(where);
    const Bytes bytes = idx_corpus::idx_file({u32(kTrain), u32(kRows), u32(kCols)}, two_level_pixels(count, v, q));
    std::ofstream(where / "train-images-idx3-ubyte", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const NormalizationChoice fashion = MnistDataset::choose_normalization(fashion_data.string());
  EXPECT_EQ(fashion.dataset, "Fashion-MNIST");
  EXPECT_EQ(fashion.normalization.mean, Normalization::fashion_mnist().mean);
  EXPECT_EQ(fashion.normalization.std, Normalization::fashion_mnist().std);
  for (const char* part : {"train-images-idx3-ubyte", "pixel mean 0.28", "Fashion-MNIST's"}) {
    EXPECT_NE(fashion.reason.find(part), std::string::npos) << fashion.reason;
  }
  const NormalizationChoice mnist = MnistDataset::choose_normalization(mnist_data.string());
  EXPECT_EQ(mnist.dataset, "MNIST");
  EXPECT_EQ(mnist.normalization.mean, Normalization::mnist().mean);
  EXPECT_EQ(mnist.normalization.std, Normalization::mnist().std);
  EXPECT_NE(mnist.reason.find("pixel mean 0.13"), std::string::npos) << mnist.reason;
  // The fixture's uniform random bytes (mean 0.5, std 0.29) are neither: their own statistics are used.
  const NormalizationChoice other = MnistDataset::choose_normalization(dir_.string());
  EXPECT_EQ(other.dataset, "unrecognised data");
  EXPECT_NEAR(other.normalization.mean, 0.5, 0.05);
  EXPECT_NEAR(other.normalization.std, 1.0 / std::sqrt(12.0), 0.05);
  EXPECT_NE(other.reason.find("own statistics"), std::string::npos) << other.reason;
  // The choice reads the training images, so it names them when they are missing.
  fs::create_directories(dir_ / "empty");
  expect_error<IOError>([&] { MnistDataset::choose_normalization((dir_ / "empty").string()); },
                        {"train-images-idx3-ubyte"}, "choose_normalization");
}

TEST_F(SyntheticMnist, MissingFilesAreListed) {
  const fs::path empty_dir = dir_ / "empty";
  fs::create_directories(empty_dir);
  expect_error<IOError>([&] { MnistDataset::load(empty_dir.string(), true, Normalization::mnist()); },
                        {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte",
                         "train-labels-idx1-ubyte.gz", empty_dir.string()},
                        "empty directory");
  // Only the labels are missing: the message names them and not the images.
  fs::copy_file(dir_ / "train-images-idx3-ubyte", empty_dir / "train-images-idx3-ubyte");
  try {
    MnistDataset::load(empty_dir.string(), true, Normalization::mnist());
    ADD_FAILURE() << "expected IOError";
  } catch (const IOError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("train-labels-idx1-ubyte"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("train-images"), std::string::npos) << msg;
  }
  expect_error<IOError>([&] { MnistDataset::load((dir_ / "nope").string(), true, Normalization::mnist()); },
                        {"not a directory"}, "missing directory");
  expect_error<ValueError>([&] { MnistDataset::load(dir_.string(), true, Normalization{0.5, 0.0}); }, {"std"},
                           "zero std");
  expect_error<ValueError>([&] { MnistDataset::load(dir_.string(), true, Normalization{NAN, 1.0}); }, {"mean"},
                           "nan mean");
}

TEST_F(SyntheticMnist, MismatchedCountsAreFormatError) {
  write("train-labels-idx1-ubyte", idx_corpus::idx_file({static_cast<std::uint32_t>(kTrain - 1)},
                                                        Bytes(train_labels_.begin(), train_labels_.end() - 1)));
  EXPECT_THROW(MnistDataset::load(dir_.string(), true, Normalization::mnist()), FormatError);
}

TEST_F(SyntheticMnist, LimitKeepsThePrefix) {
  MnistDataset full = MnistDataset::load(dir_.string(), true, Normalization::mnist());
  MnistDataset part = MnistDataset::load(dir_.string(), true, Normalization::mnist());
  part.limit(10);
  ASSERT_EQ(part.size(), 10);
  EXPECT_EQ(part.images().sizes(), (Shape{10, 1, kRows, kCols}));
  const std::vector<float> a = full.images().to_vector<float>(), b = part.images().to_vector<float>();
  EXPECT_TRUE(std::equal(b.begin(), b.end(), a.begin()));
  const std::vector<std::int64_t> la = full.labels().to_vector<std::int64_t>(), lb = part.labels().to_vector<std::int64_t>();
  EXPECT_TRUE(std::equal(lb.begin(), lb.end(), la.begin()));
  EXPECT_EQ(full.limit(100000).size(), kTrain);
  expect_error<ValueError>([&] { full.limit(0); }, {"limit", "0"}, "limit(0)");
}

TEST_F(SyntheticMnist, GetBatchGathersRowsInOrder) {
  const MnistDataset ds = MnistDataset::load(dir_.string(), false, Normalization::fashion_mnist());
  const std::vector<std::int64_t> idx = {5, 0, 36, 5, 17};
  const Batch b = ds.get_batch(idx);
  ASSERT_EQ(b.data.sizes(), (Shape{5, 1, kRows, kCols}));
  ASSERT_EQ(b.target.sizes(), (Shape{5}));
  const std::vector<float> all = ds.images().to_vector<float>(), got = b.data.to_vector<float>();
  const std::vector<std::int64_t> labels = ds.labels().to_vector<std::int64_t>(), t = b.target.to_vector<std::int64_t>();
  const std::int64_t per = kRows * kCols;
  for (std::size_t r = 0; r < idx.size(); ++r) {
    EXPECT_EQ(t[r], labels[static_cast<std::size_t>(idx[r])]) << "row " << r;
    for (std::int64_t i = 0; i < per; ++i)
      ASSERT_EQ(got[r * per + i], all[idx[r] * per + i]) << "row " << r << " element " << i;
  }
  expect_error<IndexError>([&] { ds.get_batch({0, kTest}); }, {"get_batch", std::to_string(kTest), "position 1"},
                           "index == size");
  expect_error<IndexError>([&] { ds.get_batch({-1}); }, {"-1"}, "negative index");
}

TEST_F(SyntheticMnist, LoaderBatchesAreGathersOfTheDataset) {
  auto ds = std::make_shared<MnistDataset>(MnistDataset::load(dir_.string(), true, Normalization::mnist()));
  DataLoader loader(ds, DataLoaderOptions().set_batch_size(16).set_seed(3));
  const std::vector<float> all = ds->images().to_vector<float>();
  const std::vector<std::int64_t> labels = ds->labels().to_vector<std::int64_t>();
  const std::vector<std::int64_t> order = epoch_order(kTrain, true, 3, 1);
  const std::int64_t per = kRows * kCols;
  std::int64_t pos = 0;
  for (Batch& b : loader.epoch(1)) {
    const std::vector<float> d = b.data.to_vector<float>();
    const std::vector<std::int64_t> t = b.target.to_vector<std::int64_t>();
    for (std::size_t r = 0; r < t.size(); ++r, ++pos) {
      const std::int64_t s = order[static_cast<std::size_t>(pos)];
      ASSERT_EQ(t[r], labels[static_cast<std::size_t>(s)]);
      for (std::int64_t i = 0; i < per; ++i) ASSERT_EQ(d[r * per + i], all[s * per + i]);
    }
  }
  EXPECT_EQ(pos, kTrain);
}

// ---- epoch_order ----------------------------------------------------------------------------------------------

TEST(EpochOrder, PermutationSeededBySeedAndEpoch) {
  const std::int64_t n = 1000;
  const std::vector<std::int64_t> a = epoch_order(n, true, 42, 0);
  std::vector<std::int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(epoch_order(n, true, 42, 0), a);
  EXPECT_NE(epoch_order(n, true, 42, 1), a);
  EXPECT_NE(epoch_order(n, true, 43, 0), a);
  const std::vector<std::int64_t> identity = epoch_order(n, false, 42, 5);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(identity[static_cast<std::size_t>(i)], i);
  EXPECT_TRUE(epoch_order(0, true, 1, 1).empty());
  EXPECT_EQ(epoch_order(1, true, 1, 1), std::vector<std::int64_t>{0});
  EXPECT_THROW(epoch_order(5, true, 1, -1), ValueError);
  EXPECT_THROW(epoch_order(-1, true, 1, 0), ValueError);
}

// The order depends on nothing but (n, seed, epoch): mt19937_64 is fully specified by the standard and the
// bounded draw is the library's own, so these values hold with every compiler and standard library.
TEST(EpochOrder, GoldenValues) {
  EXPECT_EQ(epoch_order(10, true, 42, 0), (std::vector<std::int64_t>{9, 6, 2, 0, 1, 4, 3, 8, 5, 7}));
  EXPECT_EQ(epoch_order(10, true, 0, 3), (std::vector<std::int64_t>{0, 5, 4, 9, 7, 6, 8, 1, 2, 3}));
}

// Each position receives every sample about equally often (a gross bias, e.g. from a modulo draw over a
// tiny range or an off-by-one in Fisher-Yates, would show).
TEST(EpochOrder, PositionsAreUniform) {
  const std::int64_t n = 5, epochs = 20000;
  std::vector<std::vector<int>> count(n, std::vector<int>(n, 0));
  for (std::int64_t e = 0; e < epochs; ++e) {
    const std::vector<std::int64_t> o = epoch_order(n, true, 9, e);
    for (std::int64_t p = 0; p < n; ++p) ++count[static_cast<std::size_t>(p)][static_cast<std::size_t>(o[static_cast<std::size_t>(p)])];
  }
  const double expected = static_cast<double>(epochs) / n;  // 4000, binomial sd ~ 57
  for (std::int64_t p = 0; p < n; ++p)
    for (std::int64_t s = 0; s < n; ++s)
      EXPECT_NEAR(count[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)], expected, 400)
          << "position " << p << " sample " << s;
}

// ---- DataLoader: order, coverage, shapes -----------------------------------------------------------------

TEST(DataLoader, EverySampleOncePerEpochOnEveryCpuPath) {
  const std::int64_t n = 103;
  const Shape sample{2, 3};
  auto ds = std::make_shared<RangeDataset>(n, sample);
  for (const std::int64_t bs : {1, 7, 10, 103, 250}) {
    for (const bool shuffle : {false, true}) {
      for (const bool drop_last : {false, true}) {
        if (drop_last && bs > n) continue;  // rejected: no batch at all (tested below)
        for (const int prefetch : {0, 1, 3}) {
          for (const bool resident : {false, true}) {
            const DataLoaderOptions o = DataLoaderOptions()
                                            .set_batch_size(bs)
                                            .set_shuffle(shuffle)
                                            .set_drop_last(drop_last)
                                            .set_seed(77)
                                            .set_prefetch(prefetch)
                                            .set_device_resident(resident);
            run_with_timeout([&] {
              DataLoader loader(ds, o);
              EXPECT_EQ(loader.num_batches(), drop_last ? n / bs : (n + bs - 1) / bs) << describe(o);
              for (const std::int64_t e : {0, 1, 4}) {
                expect_epoch_matches_definition(run_epoch(loader, e), n, sample, o, e,
                                                describe(o) + " epoch " + std::to_string(e));
              }
            });
          }
        }
      }
    }
  }
}

TEST(DataLoader, OrderIsReproducibleBySeedAndEpoch) {
  auto ds = std::make_shared<RangeDataset>(64, Shape{3});
  const DataLoaderOptions o = DataLoaderOptions().set_batch_size(8).set_seed(5);
  DataLoader a(ds, o), b(ds, o), c(ds, DataLoaderOptions(o).set_seed(6));
  const Epoch a0 = run_epoch(a, 0), a1 = run_epoch(a, 1);
  expect_same_epochs(a0, run_epoch(b, 0), "same seed and epoch");
  expect_same_epochs(a1, run_epoch(b, 1), "same seed and epoch 1");
  expect_same_epochs(a0, run_epoch(a, 0), "epoch 0 repeated on the same loader");
  EXPECT_NE(a0.target, a1.target) << "epochs 0 and 1 gave the same order";
  EXPECT_NE(a0.target, run_epoch(c, 0).target) << "seeds 5 and 6 gave the same order";
}

TEST(DataLoader, NextAndIterationProtocol) {
  auto ds = std::make_shared<RangeDataset>(10, Shape{1});
  DataLoader loader(ds, DataLoaderOptions().set_batch_size(4).set_shuffle(false));
  expect_error<ValueError>([&] { loader.next(); }, {"start_epoch"}, "next before start_epoch");
  loader.start_epoch(0);
  std::vector<std::int64_t> sizes;
  while (auto b = loader.next()) sizes.push_back(b->target.numel());
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{4, 4, 2}));
  EXPECT_FALSE(loader.next().has_value()) << "next() after the end must keep returning nullopt";
  // Abandoning an epoch halfway and starting another starts from its first batch.
  loader.start_epoch(1);
  ASSERT_TRUE(loader.next().has_value());
  loader.start_epoch(2);
  auto first = loader.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->target.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST(DataLoader, RejectsBadOptions) {
  auto ds = std::make_shared<RangeDataset>(10, Shape{1});
  expect_error<ValueError>([&] { DataLoader(ds, DataLoaderOptions().set_batch_size(0)); }, {"batch_size", "0"}, "bs 0");
  expect_error<ValueError>([&] { DataLoader(ds, DataLoaderOptions().set_prefetch(-1)); }, {"prefetch", "-1"}, "prefetch");
  expect_error<ValueError>([&] { DataLoader(ds, DataLoaderOptions().set_batch_size(11).set_drop_last(true)); },
                           {"drop_last", "11", "10"}, "drop_last empties the epoch");
  expect_error<ValueError>([&] { DataLoader(nullptr, DataLoaderOptions()); }, {"null"}, "null dataset");
  expect_error<ValueError>([&] { DataLoader(std::make_shared<RangeDataset>(0, Shape{1}), DataLoaderOptions()); },
                           {"empty"}, "empty dataset");
  DataLoader loader(ds, DataLoaderOptions());
  EXPECT_THROW(loader.start_epoch(-1), ValueError);
#if !MINIDL_CUDA_ENABLED
  EXPECT_THROW(DataLoader(ds, DataLoaderOptions().set_device(Device(kCUDA))), TypeError);
#endif
}

// A dataset returning the wrong shape is caught where the batch is assembled and reported from next().
TEST(DataLoader, MalformedBatchFromDatasetIsReported) {
  class WrongShape : public RangeDataset {
   public:
    WrongShape() : RangeDataset(20, {4}) {}
    Shape sample_shape() const override { return {5}; }
  };
  for (const int prefetch : {0, 2}) {
    run_with_timeout([&] {
      DataLoader loader(std::make_shared<WrongShape>(), DataLoaderOptions().set_prefetch(prefetch));
      loader.start_epoch(0);
      expect_error<ValueError>([&] { loader.next(); }, {"get_batch", "[20, 4]", "[20, 5]"},
                               "prefetch " + std::to_string(prefetch));
    });
  }
}

// The prefetch thread's gathers run on it alone (cpu::SerialScope), so they never hold the thread pool the
// training step's kernels need; without prefetch the gather runs on the caller and may use the pool.
TEST(DataLoader, PrefetchThreadGathersWithoutThePool) {
  class ParallelGather : public RangeDataset {
   public:
    ParallelGather() : RangeDataset(40, {3}) {}
    Batch get_batch(const std::vector<std::int64_t>& indices) const override {
      const std::thread::id self = std::this_thread::get_id();
      std::atomic<int> chunks{0}, elsewhere{0};
      minidl::cpu::parallel_for(1000, 1e6, [&](std::int64_t, std::int64_t) {
        ++chunks;
        if (std::this_thread::get_id() != self) ++elsewhere;
      });
      splits.push_back(chunks.load() == 1 && elsewhere.load() == 0);
      return RangeDataset::get_batch(indices);
    }
    mutable std::vector<bool> splits;  // per get_batch call: ran as one chunk on its own thread
  };
  const int saved = get_num_threads();
  set_num_threads(4);
  for (const int prefetch : {0, 2}) {
    run_with_timeout([&] {
      auto ds = std::make_shared<ParallelGather>();
      {
        DataLoader loader(ds, DataLoaderOptions().set_batch_size(8).set_prefetch(prefetch));
        loader.start_epoch(0);
        for (std::int64_t b = 0; b < 5; ++b) ASSERT_TRUE(loader.next().has_value()) << "batch " << b;
      }  // the prefetch thread is joined
      ASSERT_EQ(ds->splits.size(), 5u) << "prefetch " << prefetch;
      for (std::size_t b = 0; b < 5; ++b)
        EXPECT_EQ(ds->splits[b], prefetch > 0) << "prefetch " << prefetch << " batch " << b;
    });
  }
  set_num_threads(saved);
}

// ---- DataLoader: errors and shutdown of the prefetch thread ------------------------------------------------

TEST(DataLoader, PrefetchThreadRethrowsDatasetExceptionAtItsBatch) {
  for (const int prefetch : {0, 1, 4}) {
    run_with_timeout([&] {
      // Batches of 5 in index order: batch 3 starts with sample 15 and throws.
      auto ds = std::make_shared<ThrowingDataset>(40, 15);
      DataLoader loader(ds, DataLoaderOptions().set_batch_size(5).set_shuffle(false).set_prefetch(prefetch));
      for (const std::int64_t e : {0, 1}) {  // the loader stays usable after a failed epoch
        loader.start_epoch(e);
        for (std::int64_t b = 0; b < 3; ++b) {
          auto batch = loader.next();
          ASSERT_TRUE(batch.has_value()) << "prefetch " << prefetch << " batch " << b;
          EXPECT_EQ(batch->target.to_vector<std::int64_t>()[0], b * 5);
        }
        expect_error<DatasetFailure>([&] { loader.next(); }, {"sample 15"}, "prefetch " + std::to_string(prefetch));
        expect_error<DatasetFailure>([&] { loader.next(); }, {"sample 15"}, "second next() after the failure");
      }
    });
  }
}

TEST(DataLoader, DestructsCleanlyMidEpoch) {
  auto ds = std::make_shared<SlowDataset>(200, Shape{4});
  run_with_timeout([&] {
    for (const int prefetch : {1, 2, 8}) {
      {  // never consumed: the thread is blocked on a full queue
        DataLoader loader(ds, DataLoaderOptions().set_batch_size(4).set_prefetch(prefetch));
        loader.start_epoch(0);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      {  // destroyed at once: the thread is inside get_batch
        DataLoader loader(ds, DataLoaderOptions().set_batch_size(4).set_prefetch(prefetch));
        loader.start_epoch(0);
      }
      {  // partly consumed, then a new epoch, then destroyed
        DataLoader loader(ds, DataLoaderOptions().set_batch_size(4).set_prefetch(prefetch));
        loader.start_epoch(0);
        for (int i = 0; i < 3; ++i) ASSERT_TRUE(loader.next().has_value());
        loader.start_epoch(1);
        ASSERT_TRUE(loader.next().has_value());
      }
      {  // constructed, never started
        DataLoader loader(ds, DataLoaderOptions().set_prefetch(prefetch));
      }
    }
  });
}

TEST(DataLoader, DestructsCleanlyAfterAnException) {
  run_with_timeout([&] {
    auto ds = std::make_shared<ThrowingDataset>(100, 0);  // the very first batch throws
    {
      DataLoader loader(ds, DataLoaderOptions().set_batch_size(10).set_shuffle(false));
      loader.start_epoch(0);
      EXPECT_THROW(loader.next(), DatasetFailure);
    }
    {  // failure never observed by the consumer
      DataLoader loader(ds, DataLoaderOptions().set_batch_size(10).set_shuffle(false));
      loader.start_epoch(0);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // The thread stops at the failing batch instead of producing the rest of the epoch.
  auto ds = std::make_shared<ThrowingDataset>(100, 20);
  run_with_timeout([&] {
    DataLoader loader(ds, DataLoaderOptions().set_batch_size(10).set_shuffle(false).set_prefetch(8));
    loader.start_epoch(0);
    for (int b = 0; b < 2; ++b) ASSERT_TRUE(loader.next().has_value());
    EXPECT_THROW(loader.next(), DatasetFailure);
  });
  EXPECT_EQ(ds->calls.load(), 3);
}

// ---- index_select ---------------------------------------------------------------------------------------------

namespace {

// out[..., j, ...] = self[..., index[j], ...], computed naively on the host.
template <class T>
std::vector<T> naive_index_select(const std::vector<T>& x, const Shape& shape, std::int64_t dim,
                                  const std::vector<std::int64_t>& index) {
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < dim; ++d) outer *= shape[static_cast<std::size_t>(d)];
  for (std::size_t d = static_cast<std::size_t>(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::int64_t n = shape[static_cast<std::size_t>(dim)], k = static_cast<std::int64_t>(index.size());
  std::vector<T> out;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < k; ++j)
      for (std::int64_t i = 0; i < inner; ++i) out.push_back(x[static_cast<std::size_t>((o * n + index[static_cast<std::size_t>(j)]) * inner + i)]);
  return out;
}

std::vector<std::int64_t> random_index(std::int64_t k, std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, n - 1);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(k));
  for (auto& v : idx) v = dist(rng);
  idx[0] = idx[static_cast<std::size_t>(k - 1)];  // at least one repeat
  return idx;
}

}  // namespace

TEST(IndexSelect, ForwardMatchesNaiveOnEveryDimAndDtype) {
  const Shape shape{4, 5, 3};
  for (const DType dt : {kFloat32, kFloat64, kInt64}) {
    Tensor x = dt == kInt64 ? uniform(shape, -1000, 1000, TensorOptions(kFloat64)).to(kInt64) : random_tensor(shape, dt);
    for (const std::int64_t dim : {0, 1, 2, -1}) {
      const std::int64_t d = dim < 0 ? dim + 3 : dim;
      const std::vector<std::int64_t> idx = random_index(7, shape[static_cast<std::size_t>(d)], 100 + static_cast<std::uint32_t>(d));
      const Tensor out = index_select(x, dim, from_vector(idx, {7}));
      Shape expected_shape = shape;
      expected_shape[static_cast<std::size_t>(d)] = 7;
      ASSERT_EQ(out.sizes(), expected_shape);
      ASSERT_EQ(out.dtype(), dt);
      const Tensor x64 = x.to(kFloat64);
      EXPECT_EQ(out.to(kFloat64).to_vector<double>(), naive_index_select(x64.to_vector<double>(), shape, d, idx))
          << dtype_name(dt) << " dim " << dim;
    }
  }
  // A 0-d index selects one slice; an empty index selects none.
  const Tensor x = random_tensor({3, 2});
  EXPECT_EQ(index_select(x, 0, from_vector(std::vector<std::int64_t>{2}, {})).sizes(), (Shape{1, 2}));
  EXPECT_EQ(index_select(x, 1, from_vector(std::vector<std::int64_t>{}, {0})).sizes(), (Shape{3, 0}));
}

TEST(IndexSelect, RejectsBadArguments) {
  const Tensor x = random_tensor({4, 5});
  expect_error<IndexError>([&] { index_select(x, 1, from_vector(std::vector<std::int64_t>{0, 4, 5, 1}, {4})); },
                           {"index[2] = 5", "dimension 1", "size 5"}, "index == size");
  expect_error<IndexError>([&] { index_select(x, 0, from_vector(std::vector<std::int64_t>{-1}, {1})); },
                           {"index[0] = -1"}, "negative index");
  expect_error<TypeError>([&] { index_select(x, 0, tensor({0.0, 1.0})); }, {"int64", "float32"}, "float index");
  expect_error<ValueError>([&] { index_select(x, 0, from_vector(std::vector<std::int64_t>{0, 1}, {1, 2})); },
                           {"[1, 2]"}, "2-d index");
  EXPECT_THROW(index_select(x, 2, from_vector(std::vector<std::int64_t>{0}, {1})), IndexError);
  EXPECT_THROW(index_select(Tensor(), 0, from_vector(std::vector<std::int64_t>{0}, {1})), ValueError);
}

TEST(IndexSelect, GradcheckOnEveryDim) {
  for (const std::int64_t dim : {0, 1, 2}) {
    Tensor x = random_tensor({3, 4, 2}, kFloat64, true);
    const std::vector<std::int64_t> idx = random_index(6, x.size(dim), 7 + static_cast<std::uint32_t>(dim));
    const Tensor index = from_vector(idx, {6});
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], dim, index); }, {x}))
        << "dim " << dim;
  }
}

// Repeated indices sum their gradients; unselected slices get zero.
TEST(IndexSelect, BackwardSumsRepeats) {
  Tensor x = random_tensor({4, 3}, kFloat64, true);
  const Tensor index = from_vector(std::vector<std::int64_t>{2, 0, 2, 2}, {4});
  const Tensor w = random_tensor({4, 3}, kFloat64);
  (index_select(x, 0, index) * w).sum().backward();
  const std::vector<double> g = x.grad().to_vector<double>(), wv = w.to_vector<double>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(g[0 * 3 + c], wv[1 * 3 + c]);
    EXPECT_EQ(g[1 * 3 + c], 0.0);
    EXPECT_DOUBLE_EQ(g[2 * 3 + c], wv[0 * 3 + c] + wv[2 * 3 + c] + wv[3 * 3 + c]);
    EXPECT_EQ(g[3 * 3 + c], 0.0);
  }
}

// ---- Fashion-MNIST (when installed) ---------------------------------------------------------------------------

TEST(FashionMnistDataset, LoadsWithUnitStatistics) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz") && !fs::exists(fs::path(dir) / "train-images-idx3-ubyte"))
    GTEST_SKIP() << "Fashion-MNIST not installed at " << dir;
  for (const auto& [train, count] : {std::pair<bool, std::int64_t>{true, 60000}, {false, 10000}}) {
    const MnistDataset ds = MnistDataset::load(dir, train, Normalization::fashion_mnist());
    ASSERT_EQ(ds.size(), count);
    EXPECT_EQ(ds.sample_shape(), (Shape{1, 28, 28}));
    const std::vector<float> px = ds.images().to_vector<float>();
    double sum = 0, sq = 0;
    for (float v : px) sum += v;
    const double mean = sum / static_cast<double>(px.size());
    for (float v : px) sq += (v - mean) * (v - mean);
    const double stddev = std::sqrt(sq / static_cast<double>(px.size()));
    EXPECT_NEAR(mean, 0.0, 0.01) << (train ? "train" : "test");
    EXPECT_NEAR(stddev, 1.0, 0.01) << (train ? "train" : "test");
    std::map<std::int64_t, std::int64_t> per_class;
    for (std::int64_t l : ds.labels().to_vector<std::int64_t>()) ++per_class[l];
    ASSERT_EQ(per_class.size(), 10u);
    for (const auto& [label, n] : per_class) EXPECT_EQ(n, count / 10) << "class " << label;
  }
}

// ---- GPU --------------------------------------------------------------------------------------------------------

#if MINIDL_CUDA_ENABLED

// Every CUDA path (pinned prefetch ring, synchronous upload, device-resident gather) yields exactly the CPU
// loader's batches, with batches held across the whole epoch so recycled buffers would show.
TEST(DataLoaderGpu, EveryPathMatchesTheCpuLoader) {
  MINIDL_REQUIRE_GPU();
  const std::int64_t n = 1037;
  auto ds = std::make_shared<RangeDataset>(n, Shape{1, 7, 5});
  for (const std::int64_t bs : {64, 1037, 100}) {
    for (const bool drop_last : {false, true}) {
      const DataLoaderOptions cpu = DataLoaderOptions().set_batch_size(bs).set_drop_last(drop_last).set_seed(11);
      DataLoader reference(ds, cpu);
      const Epoch want0 = run_epoch(reference, 0), want3 = run_epoch(reference, 3);
      for (const int prefetch : {0, 1, 3}) {
        for (const bool resident : {false, true}) {
          const DataLoaderOptions o =
              DataLoaderOptions(cpu).set_device(Device(kCUDA)).set_prefetch(prefetch).set_device_resident(resident);
          run_with_timeout([&] {
            DataLoader loader(ds, o);
            expect_same_epochs(run_epoch(loader, 0), want0, describe(o) + " epoch 0");
            expect_same_epochs(run_epoch(loader, 3), want3, describe(o) + " epoch 3");
          });
        }
      }
    }
  }
}

// A consumer that queues GPU work on every batch before looking at it (as training does) still sees each
// batch's own values: the uploads are ordered before the reads on the library stream.
TEST(DataLoaderGpu, PinnedPathIsStreamOrderedUnderLoad) {
  MINIDL_REQUIRE_GPU();
  const std::int64_t n = 4096;
  auto ds = std::make_shared<RangeDataset>(n, Shape{1, 28, 28});
  run_with_timeout([&] {
    DataLoader loader(ds, DataLoaderOptions().set_batch_size(256).set_device(Device(kCUDA)).set_seed(1));
    std::vector<Tensor> sums;
    std::vector<std::vector<std::int64_t>> targets;
    for (Batch& b : loader.epoch(0)) {
      Tensor x = b.data;
      for (int i = 0; i < 20; ++i) x = x * 1.0 + 0.0;  // keeps the stream busy while the next uploads run
      sums.push_back(x.sum({1, 2, 3}));
      targets.push_back(b.target.to_vector<std::int64_t>());
    }
    for (std::size_t b = 0; b < sums.size(); ++b) {
      const std::vector<float> s = sums[b].to_vector<float>();
      for (std::size_t r = 0; r < s.size(); ++r)
        ASSERT_EQ(s[r], static_cast<float>(targets[b][r]) * 784.0f) << "batch " << b << " row " << r;
    }
  });
}

TEST(DataLoaderGpu, PrefetchThreadErrorsAndShutdown) {
  MINIDL_REQUIRE_GPU();
  run_with_timeout([&] {
    auto ds = std::make_shared<ThrowingDataset>(40, 15);
    DataLoader loader(ds, DataLoaderOptions().set_batch_size(5).set_shuffle(false).set_device(Device(kCUDA)));
    loader.start_epoch(0);
    for (int b = 0; b < 3; ++b) ASSERT_TRUE(loader.next().has_value());
    EXPECT_THROW(loader.next(), DatasetFailure);
    loader.start_epoch(1);
    ASSERT_TRUE(loader.next().has_value());
  });
  run_with_timeout([&] {
    auto ds = std::make_shared<SlowDataset>(200, Shape{1, 28, 28});
    DataLoader loader(ds, DataLoaderOptions().set_batch_size(8).set_device(Device(kCUDA)));
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next().has_value());
  });
}

TEST(DataLoaderGpu, MnistResidentMatchesCpu) {
  MINIDL_REQUIRE_GPU();
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << "Fashion-MNIST not installed at " << dir;
  auto ds = std::make_shared<MnistDataset>(MnistDataset::load(dir, false, Normalization::fashion_mnist()));
  const DataLoaderOptions o = DataLoaderOptions().set_batch_size(500).set_seed(2);
  DataLoader cpu(ds, o), gpu(ds, DataLoaderOptions(o).set_device(Device(kCUDA)).set_device_resident(true));
  expect_same_epochs(run_epoch(gpu, 1), run_epoch(cpu, 1), "Fashion-MNIST test split, resident");
}

TEST(IndexSelectGpu, MatchesCpuForwardAndBackward) {
  MINIDL_REQUIRE_GPU();
  const Shape shape{6, 33, 5};
  for (const DType dt : {kFloat32, kFloat64, kInt64}) {
    const Tensor x = dt == kInt64 ? uniform(shape, -1000, 1000, TensorOptions(kFloat64)).to(kInt64) : random_tensor(shape, dt);
    for (const std::int64_t dim : {0, 1, 2}) {
      const Tensor index = from_vector(random_index(50, shape[static_cast<std::size_t>(dim)], 3), {50});
      const Tensor want = index_select(x, dim, index);
      const Tensor got = index_select(x.cuda(), dim, index.cuda());
      EXPECT_TRUE(got.is_cuda());
      EXPECT_EQ(got.to(kFloat64).to_vector<double>(), want.to(kFloat64).to_vector<double>()) << dtype_name(dt) << " dim " << dim;
      if (dt == kInt64) continue;
      Tensor xc = x.clone().detach().requires_grad_(true), xg = x.cuda().detach().requires_grad_(true);
      const Tensor w = random_tensor(want.sizes(), dt);
      (index_select(xc, dim, index) * w).sum().backward();
      (index_select(xg, dim, index.cuda()) * w.cuda()).sum().backward();
      // Both backends sum repeats in index order, so the gradients agree to rounding of the products.
      minidl::testing::expect_close(xg.grad(), xc.grad(), 1e-6, 1e-6, "grad " + std::string(dtype_name(dt)));
    }
  }
  const Tensor xg = random_tensor({4, 3}, kFloat32).cuda();
  expect_error<IndexError>([&] { index_select(xg, 0, from_vector(std::vector<std::int64_t>{1, 4}, {2}).cuda()); },
                           {"index[1] = 4"}, "gpu out of range");
  EXPECT_THROW(index_select(xg, 0, from_vector(std::vector<std::int64_t>{1}, {1})), TypeError);  // index on the CPU
  // The device is still usable after the rejected call.
  EXPECT_EQ(index_select(xg, 0, from_vector(std::vector<std::int64_t>{3}, {1}).cuda()).cpu().to_vector<float>(),
            index_select(xg.cpu(), 0, from_vector(std::vector<std::int64_t>{3}, {1})).to_vector<float>());
}

#endif  // MINIDL_CUDA_ENABLED
