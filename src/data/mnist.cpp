#include "minidl/data/mnist.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "minidl/data/idx.h"
#include "minidl/errors.h"
#include "minidl/indexing.h"

namespace minidl::data {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The first of `base`, `base.gz` that exists in dir, or "" (and the names looked for appended to `missing`).
std::string find_file(const std::filesystem::path& dir, const std::string& base, std::string& missing) {
  for (const std::string& name : {base, base + ".gz"}) {
    const std::filesystem::path p = dir / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  missing += detail::str(missing.empty() ? "" : "; ", (dir / base).string(), " or ", (dir / (base + ".gz")).string());
  return "";
}

// The first `n` rows of a contiguous tensor, copied (so the rest of the memory is released).
Tensor first_rows(const Tensor& t, std::int64_t n) {
  Shape s = t.sizes();
  s[0] = n;
  Tensor out = empty(s, TensorOptions(t.dtype()));
  std::memcpy(out.data_ptr(), t.data_ptr(), out.nbytes());
  return out;
}

}  // namespace

Normalization Normalization::mnist() { return {0.1307, 0.3081}; }
Normalization Normalization::fashion_mnist() { return {0.2860, 0.3530}; }

Normalization Normalization::from_name(const std::string& name) {
  const std::string n = lower(name);
  if (n == "mnist") return mnist();
  if (n == "fashion-mnist" || n == "fashion_mnist" || n == "fashion") return fashion_mnist();
  if (n == "none") return {0.0, 1.0};
  throw ValueError(detail::str("Normalization::from_name: unknown dataset '", name,
                               "' (expected mnist, fashion-mnist, fashion_mnist, fashion or none)"));
}

NormalizationChoice MnistDataset::choose_normalization(const std::string& dir) {
  std::string missing;
  const std::string path = find_file(dir, "train-images-idx3-ubyte", missing);
  MINIDL_CHECK(missing.empty(), IOError, "MnistDataset::choose_normalization: missing the training images; looked for ",
               missing);
  const IdxImages images = read_idx_images(path);
  // A histogram of the bytes, then the moments in double: exact up to rounding for any file size.
  std::array<std::uint64_t, 256> histogram{};
  for (const std::uint8_t p : images.pixels) ++histogram[p];
  double sum = 0, sum_sq = 0;
  for (int p = 0; p < 256; ++p) {
    const double v = p / 255.0, n = static_cast<double>(histogram[static_cast<std::size_t>(p)]);
    sum += n * v;
    sum_sq += n * v * v;
  }
  const double count = static_cast<double>(images.pixels.size());
  const double mean = sum / count, sd = std::sqrt(std::max(0.0, sum_sq / count - mean * mean));
  const std::string measured = detail::str(path, " has pixel mean ", mean, " and std ", sd);
  struct Known {
    const char* name;
    Normalization norm;
  };
  for (const Known& k :
       {Known{"MNIST", Normalization::mnist()}, Known{"Fashion-MNIST", Normalization::fashion_mnist()}}) {
    if (std::abs(mean - k.norm.mean) <= kStatisticsTolerance && std::abs(sd - k.norm.std) <= kStatisticsTolerance) {
      return {k.norm, k.name,
              detail::str(measured, ", within ", kStatisticsTolerance, " of ", k.name, "'s (", k.norm.mean, ", ",
                          k.norm.std, ")")};
    }
  }
  const Normalization mnist = Normalization::mnist(), fashion = Normalization::fashion_mnist();
  return {{mean, sd > 0 ? sd : 1.0},
          "unrecognised data",
          detail::str(measured, ", matching neither MNIST's (", mnist.mean, ", ", mnist.std, ") nor Fashion-MNIST's (",
                      fashion.mean, ", ", fashion.std, "): normalising with its own statistics",
                      sd > 0 ? "" : " (all pixels are equal: std 1)")};
}

MnistDataset::MnistDataset(Tensor images, Tensor labels, Normalization norm, std::string images_path)
    : images_(std::move(images)), labels_(std::move(labels)), norm_(norm), images_path_(std::move(images_path)) {}

MnistDataset MnistDataset::load(const std::string& dir, bool train, Normalization norm) {
  MINIDL_CHECK(std::isfinite(norm.mean) && std::isfinite(norm.std) && norm.std > 0, ValueError,
               "MnistDataset::load: normalization needs a finite mean and a finite std > 0, found mean ", norm.mean,
               " and std ", norm.std);
  std::error_code ec;
  MINIDL_CHECK(std::filesystem::is_directory(dir, ec), IOError, "MnistDataset::load: '", dir,
               "' is not a directory (expected one holding the MNIST-format files)");
  const std::string split = train ? "train" : "t10k";
  std::string missing;
  const std::string images_path = find_file(dir, split + "-images-idx3-ubyte", missing);
  const std::string labels_path = find_file(dir, split + "-labels-idx1-ubyte", missing);
  MINIDL_CHECK(missing.empty(), IOError, "MnistDataset::load: missing ", train ? "training" : "test",
               " files; looked for ", missing);

  const IdxImages idx_images = read_idx_images(images_path);
  const IdxLabels idx_labels = read_idx_labels(labels_path);
  check_same_count(idx_images, idx_labels, images_path, labels_path);

  // 256 possible bytes: normalise each once, in double, then round to float.
  std::array<float, 256> lut{};
  for (int p = 0; p < 256; ++p)
    lut[static_cast<std::size_t>(p)] = static_cast<float>((p / 255.0 - norm.mean) / norm.std);
  Tensor images = empty({idx_images.count, 1, idx_images.rows, idx_images.cols}, TensorOptions(kFloat32));
  float* px = images.data_ptr<float>();
  for (std::size_t i = 0; i < idx_images.pixels.size(); ++i) px[i] = lut[idx_images.pixels[i]];
  Tensor labels = empty({idx_labels.count}, TensorOptions(kInt64));
  std::int64_t* lb = labels.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < idx_labels.labels.size(); ++i) lb[i] = idx_labels.labels[i];
  return MnistDataset(std::move(images), std::move(labels), norm, images_path);
}

MnistDataset& MnistDataset::limit(std::int64_t n) {
  MINIDL_CHECK(n >= 1, ValueError, "MnistDataset::limit: expected n >= 1, found ", n);
  if (n >= size()) return *this;
  images_ = first_rows(images_, n);
  labels_ = first_rows(labels_, n);
  return *this;
}

std::int64_t MnistDataset::size() const { return labels_.numel(); }

Shape MnistDataset::sample_shape() const { return Shape(images_.sizes().begin() + 1, images_.sizes().end()); }

Batch MnistDataset::get_batch(const std::vector<std::int64_t>& indices) const {
  const std::int64_t n = size();
  for (std::size_t j = 0; j < indices.size(); ++j) {
    MINIDL_CHECK(indices[j] >= 0 && indices[j] < n, IndexError, "MnistDataset::get_batch: index ", indices[j],
                 " at position ", j, " is out of range for a dataset of ", n, " samples");
  }
  const Tensor index = from_vector(indices, {static_cast<std::int64_t>(indices.size())});
  return {index_select(images_, 0, index), index_select(labels_, 0, index)};
}

}  // namespace minidl::data
