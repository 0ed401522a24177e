// Writes the fuzzers' seed corpus: every valid and malformed file the reader tests build (tests/idx_corpus.h,
// tests/safetensors_corpus.h), one file each, into OUTDIR/idx and OUTDIR/safetensors.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "idx_corpus.h"
#include "safetensors_corpus.h"

namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::size_t write_idx(const fs::path& dir) {
  namespace c = minidl::idx_corpus;
  fs::create_directories(dir);
  std::size_t n = 0;
  const c::Bytes images = c::images_file(3, 5, 4, c::random_bytes(3 * 5 * 4, 1));
  const c::Bytes labels = c::labels_file(c::random_bytes(17, 2, 10));
  for (const auto& [id, bytes] : {std::pair{"images", images}, std::pair{"labels", labels}}) {
    write(dir / (std::string("valid_") + id), bytes);
    write(dir / (std::string("valid_") + id + "_gz"), c::gzip(bytes));
    write(dir / (std::string("valid_") + id + "_gz_3_members"), c::gzip(bytes, 3));
    n += 3;
  }
  for (const auto& m : c::malformed_images(3)) {
    write(dir / ("images_" + m.id), m.bytes);
    ++n;
  }
  for (const auto& m : c::malformed_labels(4)) {
    write(dir / ("labels_" + m.id), m.bytes);
    ++n;
  }
  return n;
}

std::size_t write_safetensors(const fs::path& dir) {
  namespace c = minidl::test::safetensors_corpus;
  fs::create_directories(dir);
  std::size_t n = 0;
  for (const auto& cases : {c::valid_cases(), c::malformed_cases()}) {
    for (const auto& k : cases) {
      write(dir / k.label, k.bytes);
      ++n;
    }
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  try {
    const fs::path out = argv[1];
    const std::size_t idx = write_idx(out / "idx"), st = write_safetensors(out / "safetensors");
    std::printf("make_fuzz_corpus: %zu IDX and %zu safetensors seeds in %s\n", idx, st, out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_fuzz_corpus: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
